package classic

import (
	"math/bits"
	"slices"
)

// ageIndex is the global age order of the client entries (Global LRU and
// GMS with more than one client) as a table indexed by age. Every new
// reference takes the next tick as its age, so ages are distinct and the
// table is filled in order at its end: at[a-base] is the entry that was
// given age a, and bit a-base of live is set while that entry still has
// it (not referenced again, not dropped). The oldest entry is the first
// live one from lo; the M oldest are the next M.
//
// Against a linked list in age order this trades a walk of dependent
// loads (the M oldest, every epoch) and, on every reference and drop, a
// load and two stores at the entry's neighbours, for a bit cleared in a
// small bitmap, an append, and a scan of the bitmap's words.
//
// The table holds the live span of ages: when it fills, the prefix below
// lo (no entry) is cut off, and if the slots left are mostly dead (an old
// entry pins lo while the others are referenced again and again) the live
// entries are renumbered 1, 2, ... in order, so that the table grows with
// the entries, not with the trace. Only the order of ages matters to the
// algorithms (which of two entries is older, whether an entry is older
// than GMS's MinAge, kept here as mark and renumbered with them), so
// renumbering changes no result.
type ageIndex struct {
	at   []int32  // at[a-base]: the entry given age a
	live []uint64 // bit i%64 of live[i/64]: at[i] still has that age; covers cap(at)
	base int64    // the age of at[0]
	lo   int      // no live slot below lo
	// mark is an age the caller compares entries' ages with (GMS's MinAge);
	// renumbering maps it so that the same entries are at or below it.
	mark int64
	// slack is how many more slots than twice the entries the table may
	// span before it is renumbered (a field so that tests can make it
	// negative: renumbered whenever it fills).
	slack int
}

// newAgeIndex returns an empty index whose first age is 1.
func newAgeIndex() ageIndex { return ageIndex{base: 1, slack: 4096} }

// push files entry h under the next age, base+len(at); the caller made
// room (len(at) < cap(at)).
func (x *ageIndex) push(h int32) {
	n := len(x.at)
	x.at = x.at[:n+1]
	x.at[n] = h
	x.live[n/64] |= 1 << (n % 64)
}

// clear unfiles the entry of age a.
func (x *ageIndex) clear(a int64) {
	i := uint64(a - x.base)
	x.live[i/64] &^= 1 << (i % 64)
}

// skip moves lo to the oldest entry (len(at) if none).
func (x *ageIndex) skip() {
	w := x.lo / 64
	for w < len(x.live) && x.live[w] == 0 {
		w++
	}
	if w == len(x.live) {
		x.lo = len(x.at)
		return
	}
	x.lo = w*64 + bits.TrailingZeros64(x.live[w])
}

// oldest returns the oldest entry, 0 if none. Not inlined, so that
// caches.oldest, whose one-client case is a list's tail, is.
//
//go:noinline
func (x *ageIndex) oldest() int32 {
	x.skip()
	if x.lo == len(x.at) {
		return 0
	}
	return x.at[x.lo]
}

// room makes room at the end of a full table (len == cap) for the next
// age: it cuts off the empty prefix, renumbers the entries (rewriting
// their ages in es) when the table spans more than twice as many slots as
// there are entries (live) plus slack, and grows the table otherwise. It
// reports whether it renumbered (then the next age is base+len(at)).
func (x *ageIndex) room(es []entry, live int) (renumbered bool) {
	x.skip()
	switch cut := x.lo &^ 63; { // cut: whole words of the bitmap
	case len(x.at)-x.lo > 2*live+x.slack:
		x.renumber(es)
		renumbered = true
	case cut > 0 && cut >= len(x.at)/4:
		n := copy(x.at, x.at[cut:])
		k := copy(x.live, x.live[cut/64:])
		clear(x.live[k:])
		x.at, x.base, x.lo = x.at[:n], x.base+int64(cut), x.lo-cut
	}
	if len(x.at) == cap(x.at) {
		x.at = slices.Grow(x.at, max(len(x.at), 1024))
		x.live = append(x.live, make([]uint64, cap(x.at)/64+1-len(x.live))...)
	}
	return renumbered
}

// renumber gives the live entries the ages 1, 2, ... in their order,
// packing them at the start of the table, and maps mark to the age of the
// last entry at or below it (0 if none).
func (x *ageIndex) renumber(es []entry) {
	n, mark := 0, int64(0)
	for w := x.lo / 64; w < len(x.live); w++ {
		for b := x.live[w]; b != 0; b &= b - 1 {
			h := x.at[w*64+bits.TrailingZeros64(b)]
			a := int64(n) + 1
			if es[h].age <= x.mark {
				mark = a
			}
			es[h].age = a
			x.at[n] = h // n is at most the slot read: nothing unread is overwritten
			n++
		}
	}
	clear(x.live)
	for i := range n / 64 {
		x.live[i] = ^uint64(0)
	}
	if n%64 != 0 {
		x.live[n/64] = 1<<(n%64) - 1
	}
	x.at, x.base, x.lo, x.mark = x.at[:n], 1, 0, mark
}
