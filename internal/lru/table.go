package lru

import "unsafe"

// Hasher is a key of a Table: comparable, with its own hash.
type Hasher interface {
	comparable
	Hash() uint64
}

// Mix is a 64-bit finalizer (murmur3's fmix64).
func Mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Table is a hash map: open addressing with linear probing
// and backward-shift deletion, so that a table under constant insert and
// delete churn (a cache) keeps short probe sequences — Go's maps slow down
// under that churn (their deletions leave tombstones). It grows at 3/4 load
// and never shrinks: its size follows the peak number of keys. The zero
// value is an empty table. Not safe for concurrent use.
type Table[K Hasher, V any] struct {
	slots []tslot[K, V]
	n     int
	mask  uint64
}

type tslot[K Hasher, V any] struct {
	// h is hash | 1; 0 marks an empty slot. The home slot is h >> 1 (the
	// low bit, always set, would leave every even slot without a home:
	// twice the load on the odd ones and long probe runs).
	h uint64
	k K
	v V
}

// Len returns the number of keys.
func (t *Table[K, V]) Len() int { return t.n }

// Bytes returns the memory the table's slots take (their capacity: the
// table never shrinks), not counting what its keys or values point to.
func (t *Table[K, V]) Bytes() int64 {
	return int64(cap(t.slots)) * int64(unsafe.Sizeof(tslot[K, V]{}))
}

// Get returns k's value.
func (t *Table[K, V]) Get(k K) (V, bool) {
	if t.n > 0 {
		h := k.Hash() | 1
		for i := (h >> 1) & t.mask; ; i = (i + 1) & t.mask {
			s := &t.slots[i]
			if s.h == 0 {
				break
			}
			if s.h == h && s.k == k {
				return s.v, true
			}
		}
	}
	var zero V
	return zero, false
}

// Ref returns a pointer to k's value, nil if k is absent. The pointer is
// valid until the next Put or Delete.
func (t *Table[K, V]) Ref(k K) *V {
	if t.n > 0 {
		h := k.Hash() | 1
		for i := (h >> 1) & t.mask; ; i = (i + 1) & t.mask {
			s := &t.slots[i]
			if s.h == 0 {
				break
			}
			if s.h == h && s.k == k {
				return &s.v
			}
		}
	}
	return nil
}

// Intern returns k's value if k is present, else sets it to v and
// returns v; found reports which.
func (t *Table[K, V]) Intern(k K, v V) (_ V, found bool) {
	return t.InternHashed(k, k.Hash(), v)
}

// InternHashed is Intern with k's hash already computed (h = k.Hash()).
func (t *Table[K, V]) InternHashed(k K, h uint64, v V) (_ V, found bool) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	h |= 1
	for i := (h >> 1) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.h == 0 {
			*s = tslot[K, V]{h, k, v}
			t.n++
			return v, false
		}
		if s.h == h && s.k == k {
			return s.v, true
		}
	}
}

// Touch reads the first slot a key of hash h probes and returns a word of
// it: a caller about to look up many keys touches all their slots first,
// so that the memory fetches overlap instead of following one another.
func (t *Table[K, V]) Touch(h uint64) uint64 {
	if len(t.slots) == 0 {
		return 0
	}
	return t.slots[(h>>1)&t.mask].h
}

// Put sets k's value.
func (t *Table[K, V]) Put(k K, v V) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	h := k.Hash() | 1
	for i := (h >> 1) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.h == 0 {
			*s = tslot[K, V]{h, k, v}
			t.n++
			return
		}
		if s.h == h && s.k == k {
			s.v = v
			return
		}
	}
}

// Delete removes k and returns its value.
func (t *Table[K, V]) Delete(k K) (V, bool) {
	var zero V
	if t.n == 0 {
		return zero, false
	}
	h := k.Hash() | 1
	i := (h >> 1) & t.mask
	for ; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.h == 0 {
			return zero, false
		}
		if s.h == h && s.k == k {
			break
		}
	}
	v := t.slots[i].v
	// Backward shift: move later entries of the run into the hole when
	// their home slot is not between the hole and them.
	for j := (i + 1) & t.mask; ; j = (j + 1) & t.mask {
		s := &t.slots[j]
		if s.h == 0 {
			break
		}
		home := (s.h >> 1) & t.mask
		if (j-home)&t.mask >= (j-i)&t.mask {
			t.slots[i] = *s
			i = j
		}
	}
	t.slots[i] = tslot[K, V]{}
	t.n--
	return v, true
}

func (t *Table[K, V]) grow() {
	old := t.slots
	size := max(16, 2*len(old))
	t.slots = make([]tslot[K, V], size)
	t.mask = uint64(size - 1)
	for i := range old {
		s := &old[i]
		if s.h == 0 {
			continue
		}
		j := (s.h >> 1) & t.mask
		for t.slots[j].h != 0 {
			j = (j + 1) & t.mask
		}
		t.slots[j] = *s
	}
}

// Range calls f for every key until f returns false. f must not change
// the table.
func (t *Table[K, V]) Range(f func(K, V) bool) {
	for i := range t.slots {
		if s := &t.slots[i]; s.h != 0 && !f(s.k, s.v) {
			return
		}
	}
}

// Clear removes every key, keeping the memory.
func (t *Table[K, V]) Clear() {
	clear(t.slots)
	t.n = 0
}
