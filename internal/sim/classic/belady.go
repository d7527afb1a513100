package classic

import (
	"fmt"
	"math"
	"math/bits"
)

// farthest is a set of trace positions (next uses) that finds its largest
// member in a few word operations: a bitmap of the positions, and above
// it a level with a bit per nonzero word of the level below, up to one
// word.
type farthest struct {
	lv [][]uint64 // lv[0]: a bit per position
}

func newFarthest(n int) *farthest {
	f := &farthest{}
	for {
		w := max((n+63)/64, 1)
		f.lv = append(f.lv, make([]uint64, w))
		if w == 1 {
			return f
		}
		n = w
	}
}

func (f *farthest) has(p int32) bool {
	w := int(p >> 6)
	return w < len(f.lv[0]) && f.lv[0][w]&(1<<(p&63)) != 0
}

// add puts p in the set, growing it if p is beyond its positions.
func (f *farthest) add(p int32) {
	if int(p>>6) >= len(f.lv[0]) {
		f.grow(int(p) + 1)
	}
	for _, l := range f.lv {
		w := &l[p>>6]
		was := *w
		*w |= 1 << (p & 63)
		if was != 0 {
			return
		}
		p >>= 6
	}
}

func (f *farthest) del(p int32) {
	for _, l := range f.lv {
		w := &l[p>>6]
		if *w &^= 1 << (p & 63); *w != 0 {
			return
		}
		p >>= 6
	}
}

// grow makes room for the positions below n, at least twice as many.
func (f *farthest) grow(n int) {
	g := newFarthest(max(n, 2*64*len(f.lv[0])))
	copy(g.lv[0], f.lv[0])
	for i := 1; i < len(g.lv); i++ {
		for j, w := range g.lv[i-1] {
			if w != 0 {
				g.lv[i][j>>6] |= 1 << (j & 63)
			}
		}
	}
	*f = *g
}

// max returns the largest position, -1 if the set is empty.
func (f *farthest) max() int32 {
	if f.lv[len(f.lv)-1][0] == 0 {
		return -1
	}
	p := int32(0)
	for i := len(f.lv) - 1; i >= 0; i-- {
		p = p<<6 | int32(bits.Len64(f.lv[i][p])-1)
	}
	return p
}

// len counts the positions (O(positions/64): checks only).
func (f *farthest) len() int {
	n := 0
	for _, w := range f.lv[0] {
		n += bits.OnesCount64(w)
	}
	return n
}

// beladySet is Optimal with one client and no deletes: exactly Belady's
// replacement, with the cache kept as the set of its blocks' next uses.
// The block accessed at position i is cached iff i is in the set (its
// previous access put its next use, i, there), so a hit is one bit test
// and there is no per-block state at all; the victim is the block whose
// next use is the largest position, or any block never used again (which
// one does not matter: none is read again, and with one client nothing
// else depends on it).
type beladySet struct {
	set   *farthest
	never int // cached blocks never used again
	n     int // cached blocks
}

// access simulates access i to a block whose next use is nu, with a cache
// of k blocks, and reports a hit.
func (b *beladySet) access(i, nu int32, k int) bool {
	hit := b.set.has(i)
	if hit {
		b.set.del(i)
	} else {
		if k == 0 {
			return false
		}
		if b.n >= k {
			if b.never > 0 {
				b.never--
			} else {
				b.set.del(b.set.max())
			}
			b.n--
		}
		b.n++
	}
	if nu == math.MaxInt32 {
		b.never++
	} else {
		b.set.add(nu)
	}
	return hit
}

func (b *beladySet) check(k int) error {
	if in := b.set.len() + b.never; in != b.n || b.n > k {
		return fmt.Errorf("beladySet: %d blocks counted, %d in the set and never used again, capacity %d", b.n, in, k)
	}
	return nil
}
