package classic

import "math/bits"

// holder is one copy of a block: its entry handle and its client.
type holder struct {
	h    int32
	node int32
}

// block is what the caches know of one block (more than one client): its
// copies in the order their clients got them. A block with at most one
// copy (most of them) keeps it in the block itself; two or more copies are
// a run of holders in holderArena, after a mask of which clients hold it
// (bit n for client n, kept for clients below 64), so that a local miss is
// one load of the run's first line. A client's copy is found by scanning
// the run (a few holders, in one or two cache lines): there is no table per
// client to search, insert into and delete from. A block is 8 bytes (the
// table of blocks is touched at random on every access, and is the
// simulation's largest: 12 MB at 16 bytes a block on the 42-client suite
// trace): the run's place, length and capacity take the inline copy's
// space, and the mask lives with the run, which a block with one copy does
// not need (its copy's client is in the block).
type block struct {
	// in is the only copy while the run is inline (in[0].h >= 0: 0 if no
	// copy, an entry handle otherwise). Once the run is in the arena,
	// in[0].h is ^start (negative) and in[0].node packs the run's length
	// (low runBits) and the log2 of its capacity (a power of two, at
	// least 2) above them.
	in [1]holder
}

// runBits is the width of a run's length in block.in[0].node: it holds
// maxClients.
const runBits = 24

const runMask = 1<<runBits - 1

// inline reports whether b's copies (at most one) are in b itself.
func (b *block) inline() bool { return b.in[0].h >= 0 }

// count returns b's number of copies.
func (b *block) count() int32 {
	if x := b.in[0]; x.h >= 0 {
		if x.h != 0 {
			return 1
		}
		return 0
	}
	return b.in[0].node & runMask
}

// start returns the start of b's run in the arena (not inline).
func (b *block) start() int32 { return ^b.in[0].h }

// capacity returns the capacity of b's run in the arena (not inline).
func (b *block) capacity() int32 { return 1 << (b.in[0].node >> runBits) }

// setRun places b's run at off in the arena with n holders and capacity
// nc.
func (b *block) setRun(off, n, nc int32) {
	b.in[0] = holder{h: ^off, node: n | int32(bits.TrailingZeros32(uint32(nc)))<<runBits}
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

// alloc returns the start of a free run of the given capacity, with the
// slot of its mask before it.
func (a *holderArena) alloc(capacity int32) int32 {
	c := bits.TrailingZeros32(uint32(capacity))
	for len(a.free) <= c {
		a.free = append(a.free, nil)
	}
	if f := a.free[c]; len(f) > 0 {
		a.free[c] = f[:len(f)-1]
		return f[len(f)-1]
	}
	off := int32(len(a.s)) + 1
	a.s = append(a.s, make([]holder, 1+capacity)...)
	return off
}

func (a *holderArena) release(off, capacity int32) {
	c := bits.TrailingZeros32(uint32(capacity))
	a.free[c] = append(a.free[c], off)
}

// mask returns which clients below 64 hold b's copies (b's run is in the
// arena: not inline). It is kept in the slot before the run, its low 32
// bits in h and its high 32 in node.
func (a *holderArena) mask(b *block) uint64 {
	m := a.s[b.start()-1]
	return uint64(uint32(m.h)) | uint64(uint32(m.node))<<32
}

func (a *holderArena) setMask(b *block, m uint64) {
	a.s[b.start()-1] = holder{h: int32(uint32(m)), node: int32(uint32(m >> 32))}
}

// addBit and clearBit set and clear client n's bit in the mask slot m,
// both halves at once (no branch on which half holds it).
func (m *holder) addBit(n int32) {
	b := bit(n)
	m.h |= int32(uint32(b))
	m.node |= int32(uint32(b >> 32))
}

func (m *holder) clearBit(n int32) {
	b := bit(n)
	m.h &^= int32(uint32(b))
	m.node &^= int32(uint32(b >> 32))
}

// bit is client n's bit in a run's mask (0 past 63: the masks are read
// only with at most 64 clients).
func bit(n int32) uint64 { return 1 << uint32(n) }

// run returns b's holders (valid until the next change to any run or to
// the blocks' slice).
func (a *holderArena) run(b *block) []holder {
	if x := b.in[0]; x.h >= 0 {
		if x.h == 0 {
			return nil
		}
		return b.in[:]
	}
	off := b.start()
	return a.s[off : off+b.in[0].node&runMask]
}

// find returns client n's entry in b's run, 0 if none.
func (a *holderArena) find(b *block, n int32) int32 {
	for _, x := range a.run(b) {
		if x.node == n {
			return x.h
		}
	}
	return 0
}

// push appends holder x to b's run. A block's first copy (the common
// case) is one store, inlined where push is called.
func (a *holderArena) push(b *block, x holder) {
	if b.in[0].h == 0 {
		b.in[0] = x
		return
	}
	a.pushMore(b, x)
}

// pushMore is push for a block that has a copy already; not inlined, so
// that push is.
//
//go:noinline
func (a *holderArena) pushMore(b *block, x holder) {
	switch {
	case b.inline():
		off := a.alloc(2)
		a.s[off], a.s[off+1] = b.in[0], x
		m := bit(b.in[0].node) | bit(x.node)
		b.setRun(off, 2, 2)
		a.setMask(b, m)
	default:
		n, nc := b.count(), b.capacity()
		if n == nc {
			a.resize(b, 2*nc)
		}
		off := b.start()
		a.s[off+n] = x
		a.s[off-1].addBit(x.node)
		b.in[0].node++ // the length is the low bits
	}
}

// resize moves b's run (in the arena) to capacity nc (a power of two, at
// least its length), keeping its holders.
func (a *holderArena) resize(b *block, nc int32) {
	old, n := b.start(), b.count()
	off := a.alloc(nc)
	copy(a.s[off-1:off+n], a.s[old-1:old+n]) // the mask and the holders
	a.release(old, b.capacity())
	b.setRun(off, n, nc)
}

// remove takes entry h out of b's run, keeping the others in order, and
// returns the copy left when it leaves one (h 0 otherwise). A block's only
// copy (the common case) is one store, inlined where remove is called.
func (a *holderArena) remove(b *block, h int32) (left holder) {
	if b.in[0].h >= 0 {
		b.in[0] = left
		return left
	}
	return a.removeRun(b, h)
}

// removeRun is remove for a run in the arena; not inlined, so that remove
// is.
//
//go:noinline
func (a *holderArena) removeRun(b *block, h int32) holder {
	r := a.run(b)
	i := indexOf(r, h)
	a.s[b.start()-1].clearBit(r[i].node)
	for ; i < len(r)-1; i++ { // a loop: runs are short, and memmove is a call
		r[i] = r[i+1]
	}
	b.in[0].node--
	switch n, nc := int32(len(r)-1), b.capacity(); {
	case n == 1:
		a.release(b.start(), nc)
		b.in[0] = r[0]
		return r[0]
	case n <= nc/4:
		a.resize(b, capFor(n))
	}
	return holder{}
}

// moveTo records that b's copy h now belongs to client t. A block's only
// copy (the common case: a singlet forwarded) is one store, inlined where
// moveTo is called.
func (a *holderArena) moveTo(b *block, h int32, t int32) {
	if b.in[0].h >= 0 {
		b.in[0].node = t
		return
	}
	a.moveInRun(b, h, t)
}

// moveInRun is moveTo for a run in the arena; not inlined, so that moveTo
// is.
//
//go:noinline
func (a *holderArena) moveInRun(b *block, h int32, t int32) {
	r := a.run(b)
	i := indexOf(r, h)
	m := &a.s[b.start()-1]
	m.clearBit(r[i].node)
	m.addBit(t)
	r[i].node = t
}

// indexOf returns the index of entry h in run r, which holds it.
func indexOf(r []holder, h int32) int {
	i := 0
	for r[i].h != h {
		i++
	}
	return i
}

// capFor returns the smallest capacity that holds n holders.
func capFor(n int32) int32 {
	return 1 << bits.Len32(uint32(n-1))
}
