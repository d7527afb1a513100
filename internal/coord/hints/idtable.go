package hints

import "github.com/coopfs/coopfs/internal/block"

// idTable maps block ids to cache entries: open addressing with linear
// probing and backward-shift deletion. A cache inserts and deletes all the
// time; Go's maps leave a tombstone per deletion and their probe sequences
// grow long under that churn, this table's never do. It grows at 3/4 load
// and never shrinks. The zero value is empty.
type idTable struct {
	slots []idSlot
	n     int
	mask  uint64
}

type idSlot struct {
	h  uint64 // hash | 1; 0 marks an empty slot
	id block.ID
	e  *entry
}

func idHash(id block.ID) uint64 {
	x := id.File*0x9e3779b97f4a7c15 ^ id.Index
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x | 1
}

func (t *idTable) len() int { return t.n }

func (t *idTable) get(id block.ID) *entry {
	if t.n == 0 {
		return nil
	}
	h := idHash(id)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.h == 0 {
			return nil
		}
		if s.h == h && s.id == id {
			return s.e
		}
	}
}

func (t *idTable) put(id block.ID, e *entry) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	h := idHash(id)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.h == 0 {
			*s = idSlot{h, id, e}
			t.n++
			return
		}
		if s.h == h && s.id == id {
			s.e = e
			return
		}
	}
}

func (t *idTable) del(id block.ID) {
	if t.n == 0 {
		return
	}
	h := idHash(id)
	i := h & t.mask
	for ; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.h == 0 {
			return
		}
		if s.h == h && s.id == id {
			break
		}
	}
	// Backward shift: pull later entries of the run into the hole unless
	// their home slot lies after the hole.
	for j := (i + 1) & t.mask; ; j = (j + 1) & t.mask {
		s := &t.slots[j]
		if s.h == 0 {
			break
		}
		if (j-s.h&t.mask)&t.mask >= (j-i)&t.mask {
			t.slots[i] = *s
			i = j
		}
	}
	t.slots[i] = idSlot{}
	t.n--
}

func (t *idTable) grow() {
	old := t.slots
	size := max(16, 2*len(old))
	t.slots = make([]idSlot, size)
	t.mask = uint64(size - 1)
	for i := range old {
		if s := &old[i]; s.h != 0 {
			j := s.h & t.mask
			for t.slots[j].h != 0 {
				j = (j + 1) & t.mask
			}
			t.slots[j] = *s
		}
	}
}
