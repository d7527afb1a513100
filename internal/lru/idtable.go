package lru

import "math/bits"

// IDTable maps nonzero uint32 ids (dense block numbers, say) to int32
// handles: open addressing with linear probing over 8-byte slots, the id
// its own hash input (a multiplicative hash), so that a small table (one
// client's cache) fits in a processor cache. A deletion leaves a tombstone
// (one store, where Table shifts the run back), which a later insertion
// along the same probe reuses; the table is rebuilt when tombstones and
// ids fill three quarters of it, doubling if the ids alone fill more than
// a third. The zero value is empty.
type IDTable struct {
	slots []idslot
	n     int // ids
	dead  int // tombstones
	shift uint8
}

type idslot struct {
	id uint32 // 0: empty; tomb: deleted
	h  int32
}

const tomb = ^uint32(0)

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

// Put sets id's handle (id must not be 0 or ^0).
func (t *IDTable) Put(id uint32, h int32) {
	if (t.n+t.dead+1)*4 > len(t.slots)*3 {
		t.rebuild()
	}
	mask := uint64(len(t.slots) - 1)
	free := -1
	for i := t.home(id); ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch s.id {
		case id:
			s.h = h
			return
		case tomb:
			if free < 0 {
				free = int(i)
			}
			continue
		case 0:
			if free >= 0 {
				s = &t.slots[free]
				t.dead--
			}
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
	for i := t.home(id); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.id == id {
			h := s.h
			s.id = tomb
			t.n--
			t.dead++
			return h
		}
		if s.id == 0 {
			return 0
		}
	}
}

// rebuild drops the tombstones, doubling the table if the ids need it.
func (t *IDTable) rebuild() {
	old := t.slots
	size := max(16, len(old))
	if (t.n+1)*3 > size {
		size *= 2
	}
	t.slots = make([]idslot, size)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	t.dead = 0
	mask := uint64(size - 1)
	for _, s := range old {
		if s.id == 0 || s.id == tomb {
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
		if s.id != 0 && s.id != tomb && !f(s.id, s.h) {
			return
		}
	}
}
