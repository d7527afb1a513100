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
				if int(e.node) != n || c.lookup(n, e.id) != h || e.global != (i == 1) || c.ages && c.gnode[h] != e.node {
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
	if c.ages && total != c.glob.Len() {
		return fmt.Errorf("%d entries on client lists, %d on the global list", total, c.glob.Len())
	}
	var last int64 = 1 << 62
	for h := c.glob.Front(); h != 0; h = c.gln[h].Next {
		if c.es[h].age > last {
			return fmt.Errorf("global list out of age order at %v", c.ids.Key(c.es[h].id))
		}
		last = c.es[h].age
	}
	if c.single { // its list is the global age list (caches.oldest)
		last = 1 << 62
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
