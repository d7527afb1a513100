package lru

// Sparse is an array indexed by uint64 that keeps only the pages (of
// SparsePage elements) that are used: a slice of pages for the indexes
// below SparseNear*SparsePage, a table of pages beyond (block numbers of
// some traces are object ids in the billions). A page grows with the
// highest index used in it, so an array of a few elements costs a few
// elements. The zero value is empty; a new element is T's zero value.
type Sparse[T any] struct {
	near     [][]T
	far      Table[pageKey, int32] // page number → index in farPages
	farPages [][]T
}

const (
	// SparsePage is the number of elements of a page.
	SparsePage = 64
	// SparseNear is the number of pages kept in a slice.
	SparseNear = 1024
)

type pageKey uint64

func (k pageKey) Hash() uint64 { return Mix(uint64(k)) }

// page returns page p's slice (nil if absent).
func (s *Sparse[T]) page(p uint64) []T {
	if p < uint64(len(s.near)) {
		return s.near[p]
	}
	if p < SparseNear || s.far.Len() == 0 {
		return nil
	}
	if i, ok := s.far.Get(pageKey(p)); ok {
		return s.farPages[i]
	}
	return nil
}

// At returns element i, nil if it was never made (the pointer is valid
// until the next Make).
func (s *Sparse[T]) At(i uint64) *T {
	if pg := s.page(i / SparsePage); i%SparsePage < uint64(len(pg)) {
		return &pg[i%SparsePage]
	}
	return nil
}

// Make returns element i, made (as T's zero value) if need be; the
// pointer is valid until the next Make.
func (s *Sparse[T]) Make(i uint64) *T {
	p, o := i/SparsePage, int(i%SparsePage)
	var pg *[]T
	if p < SparseNear {
		for uint64(len(s.near)) <= p {
			if len(s.near) < cap(s.near) {
				s.near = s.near[:len(s.near)+1] // a page kept by Reset
			} else {
				s.near = append(s.near, nil)
			}
		}
		pg = &s.near[p]
	} else {
		j, ok := s.far.Get(pageKey(p))
		if !ok {
			j = int32(len(s.farPages))
			s.farPages = append(s.farPages, nil)
			s.far.Put(pageKey(p), j)
		}
		pg = &s.farPages[j]
	}
	if o >= len(*pg) {
		*pg = Extend(*pg, o+1, SparsePage)
	}
	return &(*pg)[o]
}

// Extend returns s with at least n elements, the new ones zero, growing
// its capacity by doubling up to limit (or n, if larger): a small slice
// stays small, a full one is not reallocated past the limit.
func Extend[T any](s []T, n, limit int) []T {
	if n <= len(s) {
		return s
	}
	if n <= cap(s) {
		old := len(s)
		s = s[:n]
		clear(s[old:])
		return s
	}
	ns := make([]T, n, max(min(2*cap(s), limit), n))
	copy(ns, s)
	return ns
}

// Each calls f for every element made, near pages first in index order,
// until f returns false.
func (s *Sparse[T]) Each(f func(i uint64, v *T) bool) {
	for p, pg := range s.near {
		for o := range pg {
			if !f(uint64(p)*SparsePage+uint64(o), &pg[o]) {
				return
			}
		}
	}
	s.far.Range(func(p pageKey, j int32) bool {
		pg := s.farPages[j]
		for o := range pg {
			if !f(uint64(p)*SparsePage+uint64(o), &pg[o]) {
				return false
			}
		}
		return true
	})
}

// Reset empties the array, keeping the near pages' memory for reuse.
func (s *Sparse[T]) Reset() {
	for i := range s.near {
		clear(s.near[i])
		s.near[i] = s.near[i][:0]
	}
	s.near = s.near[:0]
	if s.far.Len() > 0 {
		s.far.Clear()
		s.farPages = s.farPages[:0]
	}
}
