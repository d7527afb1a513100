package classic

import "math/bits"

// holder is one copy of a block: its entry handle and its client.
type holder struct {
	h    int32
	node int32
}

// block is what the caches know of one block (more than one client): its
// copies in the order their clients got them, as a run of holders in
// holderArena, and, with at most 64 clients, which clients hold it (bit n
// for client n), so that a local miss is one load. A client's copy is
// found by scanning the run (a few holders, in one or two cache lines):
// there is no table per client to search, insert into and delete from.
type block struct {
	mask uint64
	off  int32 // the run's start in holderArena.s
	n    int32 // copies
}

// holderArena keeps the runs of every block's holders in one slice. A run
// of n holders has a capacity of the power of two at or above n (a size
// class); it moves to the next class when it fills and back when it falls
// to a power of two, and freed runs are reused by class.
type holderArena struct {
	s    []holder
	free [][]int32 // by class: starts of free runs
}

// capOf returns the capacity of a run of n holders (0 for none).
func capOf(n int32) int32 {
	if n == 0 {
		return 0
	}
	return 1 << bits.Len32(uint32(n-1))
}

func (a *holderArena) alloc(capacity int32) int32 {
	c := bits.TrailingZeros32(uint32(capacity))
	for len(a.free) <= c {
		a.free = append(a.free, nil)
	}
	if f := a.free[c]; len(f) > 0 {
		a.free[c] = f[:len(f)-1]
		return f[len(f)-1]
	}
	off := int32(len(a.s))
	a.s = append(a.s, make([]holder, capacity)...)
	return off
}

func (a *holderArena) release(off, capacity int32) {
	c := bits.TrailingZeros32(uint32(capacity))
	a.free[c] = append(a.free[c], off)
}

// resize moves b's run to the capacity of want holders if that differs
// from the capacity of its n, keeping the first min(n, want) holders.
func (a *holderArena) resize(b *block, want int32) {
	oc, nc := capOf(b.n), capOf(want)
	if oc == nc {
		return
	}
	var off int32
	if nc > 0 {
		off = a.alloc(nc)
		copy(a.s[off:off+min(b.n, want)], a.s[b.off:b.off+min(b.n, want)])
	}
	if oc > 0 {
		a.release(b.off, oc)
	}
	b.off = off
}

// run returns b's holders (valid until the next change to any run).
func (a *holderArena) run(b *block) []holder { return a.s[b.off : b.off+b.n] }

// push appends holder x to b's run.
func (a *holderArena) push(b *block, x holder) {
	a.resize(b, b.n+1)
	a.s[b.off+b.n] = x
	b.n++
}

// remove takes entry h out of b's run, keeping the others in order.
func (a *holderArena) remove(b *block, h int32) {
	r := a.run(b)
	for i := range r {
		if r[i].h == h {
			copy(r[i:], r[i+1:])
			break
		}
	}
	a.resize(b, b.n-1)
	b.n--
}
