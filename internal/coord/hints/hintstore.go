package hints

import (
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// hintStore holds a client's hints: block → Hint, with each file's hints
// on a list (hand-out on open, invalidation, pruning). Hints live in a
// slab named by int32 handles (0 is none), found through the client's
// blockDir; the file lists are lru.Lists over the same handles. Nothing in it holds a pointer, and nothing is allocated per
// hint once the slab has grown to the peak number of hints.
type hintStore struct {
	dir    *blockDir // the index, by block and by file (shared with the age cache)
	n      int
	slots  []hslot    // slots[0] is unused
	flinks []lru.Link // the file lists' links, by handle
	free   []int32
}

type hslot struct {
	id block.ID
	h  Hint
}

func (s *hintStore) len() int { return s.n }

// get returns b's hint.
func (s *hintStore) get(b block.ID) (Hint, bool) {
	r, _ := s.dir.blocks.Get(bkey(b))
	if r.hint == 0 {
		return Hint{}, false
	}
	return s.slots[r.hint].h, true
}

// set gives b the hint h and returns the one it replaces, if any.
func (s *hintStore) set(b block.ID, h Hint) (old Hint, had bool) {
	r := s.dir.ref(b)
	if r.hint != 0 {
		sl := &s.slots[r.hint]
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
	r.hint = i
	s.n++
	s.dir.file(b.File).hints.PushFront(s.flinks, i)
	return Hint{}, false
}

// del removes b's hint and returns it, if there was one.
func (s *hintStore) del(b block.ID) (Hint, bool) {
	r := s.dir.blocks.Ref(bkey(b))
	if r == nil || r.hint == 0 {
		return Hint{}, false
	}
	i := r.hint
	r.hint = 0
	s.dir.release(b, r)
	s.n--
	old := s.slots[i].h
	f := s.dir.files.Ref(fkey(b.File))
	f.hints.Remove(s.flinks, i)
	s.dir.releaseFile(b.File, f)
	s.slots[i] = hslot{}
	s.free = append(s.free, i)
	return old, true
}

// file calls f for each hint of file (in no particular order) until f
// returns false. f must not change the store.
func (s *hintStore) file(file uint64, f func(index uint64, h Hint) bool) {
	f0, _ := s.dir.files.Get(fkey(file))
	for i := f0.hints.Front(); i != 0; i = lru.Next(s.flinks, i) {
		if sl := &s.slots[i]; !f(sl.id.Index, sl.h) {
			return
		}
	}
}

// dropFile removes every hint of file, calling f with each first.
func (s *hintStore) dropFile(file uint64, f func(h Hint)) {
	fr := s.dir.files.Ref(fkey(file))
	if fr == nil {
		return
	}
	l := fr.hints
	fr.hints = lru.List{}
	s.dir.releaseFile(file, fr)
	for i := l.Front(); i != 0; {
		next := lru.Next(s.flinks, i)
		sl := &s.slots[i]
		f(sl.h)
		r := s.dir.blocks.Ref(bkey(sl.id))
		r.hint = 0
		s.dir.release(sl.id, r)
		s.n--
		s.flinks[i] = lru.Link{}
		*sl = hslot{}
		s.free = append(s.free, i)
		i = next
	}
}

// fileIDs returns the files that have hints (in no particular order).
func (s *hintStore) fileIDs() []uint64 {
	out := make([]uint64, 0, s.dir.files.Len())
	s.dir.files.Range(func(f fkey, fr fileRefs) bool {
		if fr.hints.Len() > 0 {
			out = append(out, uint64(f))
		}
		return true
	})
	return out
}

// each calls f for every hint until f returns false. f must not change
// the store.
func (s *hintStore) each(f func(b block.ID, h Hint) bool) {
	s.dir.blocks.Range(func(k bkey, r blockRefs) bool {
		return r.hint == 0 || f(block.ID(k), s.slots[r.hint].h)
	})
}
