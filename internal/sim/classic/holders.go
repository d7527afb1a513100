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
	cap  int32 // the run's capacity: 0 or a power of two
}

// holderArena keeps the runs of every block's holders in one slice. A run's
// capacity is a power of two (a size class): it doubles when the run
// fills, halves when the run falls to a quarter of it (so that a block
// whose copies come and go around a power of two is not copied each
// time), and is freed when the run empties; freed runs are reused by
// class.
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

// resize moves b's run to capacity nc (0 or a power of two, at least its
// length), keeping its holders.
func (a *holderArena) resize(b *block, nc int32) {
	var off int32
	if nc > 0 {
		off = a.alloc(nc)
		copy(a.s[off:off+b.n], a.s[b.off:b.off+b.n])
	}
	if b.cap > 0 {
		a.release(b.off, b.cap)
	}
	b.off, b.cap = off, nc
}

// run returns b's holders (valid until the next change to any run).
func (a *holderArena) run(b *block) []holder { return a.s[b.off : b.off+b.n] }

// push appends holder x to b's run.
func (a *holderArena) push(b *block, x holder) {
	if b.n == b.cap {
		a.resize(b, max(1, 2*b.cap))
	}
	a.s[b.off+b.n] = x
	b.n++
}

// remove takes entry h out of b's run, keeping the others in order.
func (a *holderArena) remove(b *block, h int32) {
	r := a.run(b)
	i := 0
	for r[i].h != h {
		i++
	}
	for ; i < len(r)-1; i++ { // a loop: runs are short, and memmove is a call
		r[i] = r[i+1]
	}
	b.n--
	if b.n == 0 || b.n <= b.cap/4 {
		a.resize(b, capFor(b.n))
	}
}

// capFor returns the smallest capacity that holds n holders.
func capFor(n int32) int32 {
	if n == 0 {
		return 0
	}
	return 1 << bits.Len32(uint32(n-1))
}
