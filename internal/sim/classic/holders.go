package classic

import "math/bits"

// holder is one copy of a block: its entry handle and its client.
type holder struct {
	h    int32
	node int32
}

// block is what the caches know of one block (more than one client): its
// copies in the order their clients got them, and, with at most 64
// clients, which clients hold it (bit n for client n), so that a local
// miss is one load. A block with at most one copy (most of them) keeps it
// in the block itself; two or more copies are a run of holders in
// holderArena. A client's copy is found by scanning the run (a few
// holders, in one or two cache lines): there is no table per client to
// search, insert into and delete from.
type block struct {
	mask uint64
	// in is the only copy while the run is inline (cap 0, n at most 1);
	// once it is in the arena (cap > 0), in[0].h is the run's start there.
	in  [1]holder
	n   int32 // copies
	cap int32 // the run's capacity in the arena: 0 (inline) or a power of two, at least 2
}

// holderArena keeps the runs of every block's holders that have more than
// one copy in one slice. A run's capacity is a power of two (a size
// class): it doubles when the run fills, halves when the run falls to a
// quarter of it (so that a block whose copies come and go around a power
// of two is not copied each time), and goes back into its block when one
// copy is left; freed runs are reused by class.
type holderArena struct {
	s    []holder
	free [][]int32 // by class: starts of free runs
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

// run returns b's holders (valid until the next change to any run or to
// the blocks' slice).
func (a *holderArena) run(b *block) []holder {
	if b.cap == 0 {
		return b.in[:b.n]
	}
	off := b.in[0].h
	return a.s[off : off+b.n]
}

// push appends holder x to b's run.
func (a *holderArena) push(b *block, x holder) {
	switch {
	case b.cap == 0 && b.n == 0:
		b.in[0] = x
	case b.cap == 0:
		off := a.alloc(2)
		a.s[off], a.s[off+1] = b.in[0], x
		b.in[0], b.cap = holder{h: off}, 2
	default:
		if b.n == b.cap {
			a.resize(b, 2*b.cap)
		}
		a.s[b.in[0].h+b.n] = x
	}
	b.n++
}

// resize moves b's run (in the arena) to capacity nc (a power of two, at
// least its length), keeping its holders.
func (a *holderArena) resize(b *block, nc int32) {
	old := b.in[0].h
	off := a.alloc(nc)
	copy(a.s[off:off+b.n], a.s[old:old+b.n])
	a.release(old, b.cap)
	b.in[0].h, b.cap = off, nc
}

// remove takes entry h out of b's run, keeping the others in order.
func (a *holderArena) remove(b *block, h int32) {
	if b.cap == 0 {
		b.in[0], b.n = holder{}, 0
		return
	}
	r := a.run(b)
	i := 0
	for r[i].h != h {
		i++
	}
	for ; i < len(r)-1; i++ { // a loop: runs are short, and memmove is a call
		r[i] = r[i+1]
	}
	b.n--
	switch {
	case b.n == 1:
		a.release(b.in[0].h, b.cap)
		b.in[0], b.cap = r[0], 0
	case b.n <= b.cap/4:
		a.resize(b, capFor(b.n))
	}
}

// capFor returns the smallest capacity that holds n holders.
func capFor(n int32) int32 {
	return 1 << bits.Len32(uint32(n-1))
}
