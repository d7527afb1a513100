package lru

import "math/bits"

// IDTable maps nonzero uint32 ids (dense block numbers, say) to int32
// handles: open addressing with linear probing and backward-shift deletion
// like Table, but with 8-byte slots and the id as its own hash input, so
// that a small table (one client's cache) fits in a processor cache. It
// grows at 3/4 load and never shrinks. The zero value is empty.
type IDTable struct {
	slots []idslot
	n     int
	shift uint8 // 64 - log2(len(slots))
}

type idslot struct {
	id uint32 // 0: empty
	h  int32
}

// home returns the first slot id probes.
func (t *IDTable) home(id uint32) uint64 { return (uint64(id) * 0x9e3779b97f4a7c15) >> t.shift }

// Len returns the number of ids.
func (t *IDTable) Len() int { return t.n }

// Get returns id's handle, 0 if absent.
func (t *IDTable) Get(id uint32) int32 {
	if t.n == 0 {
		return 0
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(id); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.id == id {
			return s.h
		}
		if s.id == 0 {
			return 0
		}
	}
}

// Put sets id's handle (id must not be 0).
func (t *IDTable) Put(id uint32, h int32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(id); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.id == id {
			s.h = h
			return
		}
		if s.id == 0 {
			*s = idslot{id, h}
			t.n++
			return
		}
	}
}

// Delete removes id and returns its handle (0 if absent).
func (t *IDTable) Delete(id uint32) int32 {
	if t.n == 0 {
		return 0
	}
	mask := uint64(len(t.slots) - 1)
	i := t.home(id)
	for ; ; i = (i + 1) & mask {
		if s := t.slots[i]; s.id == id {
			break
		} else if s.id == 0 {
			return 0
		}
	}
	h := t.slots[i].h
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		s := t.slots[j]
		if s.id == 0 {
			break
		}
		if home := t.home(s.id); (j-home)&mask >= (j-i)&mask {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = idslot{}
	t.n--
	return h
}

func (t *IDTable) grow() {
	old := t.slots
	size := max(16, 2*len(old))
	t.slots = make([]idslot, size)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	mask := uint64(size - 1)
	for _, s := range old {
		if s.id == 0 {
			continue
		}
		j := t.home(s.id)
		for t.slots[j].id != 0 {
			j = (j + 1) & mask
		}
		t.slots[j] = s
	}
}

// Range calls f for every id until f returns false.
func (t *IDTable) Range(f func(id uint32, h int32) bool) {
	for _, s := range t.slots {
		if s.id != 0 && !f(s.id, s.h) {
			return
		}
	}
}
