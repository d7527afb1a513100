package hints

import (
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// hintStore holds a client's hints: block → Hint, with each file's hints
// on a list (hand-out on open, invalidation, pruning). Hints live in a
// slab named by int32 handles (0 is none), found through an lru.Table;
// the file lists are lru.Lists over the same handles, their heads in an
// lru.Table. Nothing in it holds a pointer, and nothing is allocated per
// hint once the slab has grown to the peak number of hints.
type hintStore struct {
	byID   lru.Table[bkey, int32]
	slots  []hslot    // slots[0] is unused
	flinks []lru.Link // the file lists' links, by handle
	files  lru.Table[fkey, lru.List]
	free   []int32
}

type hslot struct {
	id block.ID
	h  Hint
}

func (s *hintStore) len() int { return s.byID.Len() }

// get returns b's hint.
func (s *hintStore) get(b block.ID) (Hint, bool) {
	i, ok := s.byID.Get(bkey(b))
	if !ok {
		return Hint{}, false
	}
	return s.slots[i].h, true
}

// set gives b the hint h and returns the one it replaces, if any.
func (s *hintStore) set(b block.ID, h Hint) (old Hint, had bool) {
	if p := s.byID.Ref(bkey(b)); p != nil {
		sl := &s.slots[*p]
		old, sl.h = sl.h, h
		return old, true
	}
	var i int32
	if n := len(s.free); n > 0 {
		i, s.free = s.free[n-1], s.free[:n-1]
	} else {
		if len(s.slots) == 0 {
			s.slots = append(s.slots, hslot{})
		}
		i = int32(len(s.slots))
		s.slots = append(s.slots, hslot{})
		s.flinks = lru.Grow(s.flinks, i)
	}
	s.slots[i] = hslot{id: b, h: h}
	s.byID.Put(bkey(b), i)
	if fl := s.files.Ref(fkey(b.File)); fl != nil {
		fl.PushFront(s.flinks, i)
	} else {
		var l lru.List
		l.PushFront(s.flinks, i)
		s.files.Put(fkey(b.File), l)
	}
	return Hint{}, false
}

// del removes b's hint and returns it, if there was one.
func (s *hintStore) del(b block.ID) (Hint, bool) {
	i, ok := s.byID.Delete(bkey(b))
	if !ok {
		return Hint{}, false
	}
	old := s.slots[i].h
	fl := s.files.Ref(fkey(b.File))
	fl.Remove(s.flinks, i)
	if fl.Len() == 0 {
		s.files.Delete(fkey(b.File))
	}
	s.slots[i] = hslot{}
	s.free = append(s.free, i)
	return old, true
}

// file calls f for each hint of file (in no particular order) until f
// returns false. f must not change the store.
func (s *hintStore) file(file uint64, f func(index uint64, h Hint) bool) {
	fl, _ := s.files.Get(fkey(file))
	for i := fl.Front(); i != 0; i = lru.Next(s.flinks, i) {
		if sl := &s.slots[i]; !f(sl.id.Index, sl.h) {
			return
		}
	}
}

// dropFile removes every hint of file, calling f with each first.
func (s *hintStore) dropFile(file uint64, f func(h Hint)) {
	fl, ok := s.files.Delete(fkey(file))
	if !ok {
		return
	}
	for i := fl.Front(); i != 0; {
		next := lru.Next(s.flinks, i)
		sl := &s.slots[i]
		f(sl.h)
		s.byID.Delete(bkey(sl.id))
		s.flinks[i] = lru.Link{}
		*sl = hslot{}
		s.free = append(s.free, i)
		i = next
	}
}

// fileIDs returns the files that have hints (in no particular order).
func (s *hintStore) fileIDs() []uint64 {
	out := make([]uint64, 0, s.files.Len())
	s.files.Range(func(f fkey, _ lru.List) bool {
		out = append(out, uint64(f))
		return true
	})
	return out
}

// each calls f for every hint until f returns false. f must not change
// the store.
func (s *hintStore) each(f func(b block.ID, h Hint) bool) {
	s.byID.Range(func(k bkey, i int32) bool { return f(block.ID(k), s.slots[i].h) })
}
