package classic

import (
	"fmt"
	"math/bits"
)

// check verifies the invariants.
func (c *caches) check() error {
	total := 0
	for n := range c.cl {
		if size := c.cl[n].Len() + c.gl[n].Len(); size > c.k || size != int(c.size[n]) {
			return fmt.Errorf("client %d holds %d blocks, counted %d, capacity %d", n, size, c.size[n], c.k)
		}
		if p := c.pending == n+1; c.frees && (p && c.freeAt[n] >= 0 || (p || c.freeAt[n] >= 0) != (int(c.size[n]) < c.k)) {
			return fmt.Errorf("client %d: free set wrong", n)
		}
		for i, l := range []int{0, 1} {
			lst := &c.cl[n]
			if l == 1 {
				lst = &c.gl[n]
			}
			cnt := 0
			for h := lst.Front(); h != 0; h = c.es[h].ln.Next {
				cnt++
				e := &c.es[h]
				if int(e.node) != n || c.lookup(n, e.id) != h || e.global != (i == 1) || c.ages && !c.ax.files(h, e.age) {
					return fmt.Errorf("client %d: entry %v misfiled", n, c.ids.Key(e.id))
				}
			}
			if cnt != lst.Len() {
				return fmt.Errorf("client %d: list length %d, counted %d", n, lst.Len(), cnt)
			}
			total += cnt
		}
	}
	if total != len(c.es)-1-c.nfree {
		return fmt.Errorf("%d entries on client lists, %d in the slab", total, len(c.es)-1-c.nfree)
	}
	if c.ages {
		if err := c.ax.check(total, c.tick); err != nil {
			return err
		}
	}
	if c.single { // its list is the global age list (caches.oldest)
		var last int64 = 1 << 62
		for h := c.cl[0].Front(); h != 0; h = c.es[h].ln.Next {
			if c.es[h].age > last {
				return fmt.Errorf("one client's list out of age order at %v", c.ids.Key(c.es[h].id))
			}
			last = c.es[h].age
		}
		if c.gl[0].Len() != 0 {
			return fmt.Errorf("one client holds %d forwarded blocks", c.gl[0].Len())
		}
	}
	held := 0
	for id, h := range c.one {
		if h != 0 {
			if c.es[h].id != uint32(id) {
				return fmt.Errorf("block %v: entry of %v", c.ids.Key(uint32(id)), c.ids.Key(c.es[h].id))
			}
			held++
		}
	}
	for id := range c.bl {
		seen := map[int32]bool{}
		var mask uint64
		for _, x := range c.arena.run(&c.bl[id]) {
			h := x.h
			if c.es[h].id != uint32(id) || int32(c.es[h].node) != x.node || seen[x.node] {
				return fmt.Errorf("block %v: bad holder list", c.ids.Key(uint32(id)))
			}
			seen[x.node] = true
			mask |= bit(int32(c.es[h].node))
			held++
		}
		if b := &c.bl[id]; !b.inline() && (b.count() < 2 || b.count() > b.capacity() || b.capacity() < 2) {
			return fmt.Errorf("block %v: %d holders in a run of capacity %d", c.ids.Key(uint32(id)), b.count(), b.capacity())
		}
		if b := &c.bl[id]; !b.inline() && mask != c.arena.mask(b) {
			return fmt.Errorf("block %v: holder mask %#x, holders %#x", c.ids.Key(uint32(id)), c.arena.mask(b), mask)
		}
	}
	if held != total {
		return fmt.Errorf("%d holders, %d entries", held, total)
	}
	if c.server.lst.Len() > c.server.cap {
		return fmt.Errorf("server holds %d blocks, capacity %d", c.server.lst.Len(), c.server.cap)
	}
	return c.server.check()
}

// check verifies that the set's bits name exactly the blocks on its list.
func (s *lruSet) check() error {
	marked := 0
	for _, w := range s.in {
		marked += bits.OnesCount64(w)
	}
	n := 0
	for h := s.lst.Front(); h != 0; h = s.links[h].Next {
		if n++; n > s.lst.Len() || !s.has(uint32(h)) {
			return fmt.Errorf("server: block %d listed but not marked, or the list is longer than %d", h, s.lst.Len())
		}
	}
	if marked != n || n != s.lst.Len() {
		return fmt.Errorf("server: %d blocks marked, %d listed, length %d", marked, n, s.lst.Len())
	}
	return nil
}

// checkNoGlobalDuplicates verifies the condition that holds at all times:
// at most one copy of any block is a global (forwarded, unreferenced) copy.
func (c *caches) checkNoGlobalDuplicates() error {
	for id := range c.bl {
		g := 0
		for _, x := range c.arena.run(&c.bl[id]) {
			if c.es[x.h].global {
				g++
			}
		}
		if g > 1 {
			return fmt.Errorf("block %v has %d global copies", c.ids.Key(uint32(id)), g)
		}
	}
	return nil
}

// files reports whether entry h is filed under age a.
func (x *ageIndex) files(h int32, a int64) bool {
	i := a - x.base
	return 0 <= i && i < int64(len(x.at)) && x.live[i/64]&(1<<(i%64)) != 0 && x.at[i] == h
}

// check verifies that the index files live entries (each under its own
// age: the caller checks that) and nothing else, with none below lo, and
// that its last slot is the newest age, tick.
func (x *ageIndex) check(live int, tick int64) error {
	if len(x.live) < cap(x.at)/64+1 && cap(x.at) > 0 {
		return fmt.Errorf("age index: %d words of bits for %d slots", len(x.live), cap(x.at))
	}
	n := 0
	for w, b := range x.live {
		for ; b != 0; b &= b - 1 {
			i := w*64 + bits.TrailingZeros64(b)
			if i < x.lo || i >= len(x.at) {
				return fmt.Errorf("age index: age %d live, outside %d to %d", x.base+int64(i), x.base+int64(x.lo), x.base+int64(len(x.at))-1)
			}
			n++
		}
	}
	if n != live {
		return fmt.Errorf("age index: %d entries filed, %d on client lists", n, live)
	}
	if len(x.at) > 0 && x.base+int64(len(x.at))-1 != tick {
		return fmt.Errorf("age index: newest age %d, tick %d", x.base+int64(len(x.at))-1, tick)
	}
	return nil
}
