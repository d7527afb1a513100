package classic

import "github.com/coopfs/coopfs/internal/sim"

// GlobalLRU is seed 002's ideal algorithm 3.3.2: exact lookup (a local miss
// is served by any client caching the block, then by server memory, then
// disk) and replacement of the globally least recently used block. A client
// that needs room evicts its LRU block v; a duplicate is dropped; a singlet
// is forwarded to the client holding the globally LRU block g, which drops
// g to make room (a client with a free slot is used first); if v itself is
// the globally LRU block it is dropped. A forwarded block keeps its age and
// joins the target's forwarded blocks (see caches). Overheads are not counted (the seed
// does not measure them for the ideal algorithms).
type GlobalLRU struct{ c *caches }

// NewGlobalLRU returns the Global LRU algorithm.
func NewGlobalLRU(p sim.Params) (*GlobalLRU, error) {
	c, err := newCaches(p)
	if err != nil {
		return nil, err
	}
	c.global()
	return &GlobalLRU{c}, nil
}

// Access implements sim.Algorithm.
func (g *GlobalLRU) Access(a sim.Access, cnt *sim.Counters) sim.Outcome {
	c := g.c
	c.reserve()
	k, x, s := c.front(&a, cnt, false)
	if s != stepMiss {
		if s == stepPlace {
			g.place(a.Client, k, false)
		}
		return s.outcome()
	}
	layer := sim.LayerRemote
	if x.h != 0 {
		// served by another client; its copy keeps its age (it was not
		// used there) and, now a duplicate, goes first when it is that
		// client's LRU block.
	} else if c.server.get(k) {
		layer = sim.LayerServer
	} else {
		layer = sim.LayerDisk
		c.server.add(k)
	}
	g.place(a.Client, k, true)
	return sim.Outcome{Layer: layer}
}

// place puts block k at client n as most recent; missed says n is known
// not to cache it (a local read miss).
func (g *GlobalLRU) place(n int, k uint32, missed bool) {
	c := g.c
	if !missed {
		if e := c.lookup(n, k); e != 0 {
			c.touch(e)
			return
		}
	}
	if c.k == 0 {
		return
	}
	if c.full(n) {
		g.makeRoom(n)
	}
	c.add(n, k)
}

func (g *GlobalLRU) makeRoom(n int) {
	c := g.c
	v := c.victim(n)
	if c.copies(c.es[v].id) > 1 {
		c.drop(v)
		return
	}
	if t := c.freeClient(n); t >= 0 {
		c.move(v, t, false)
		return
	}
	old := c.oldest()
	switch {
	case old == v:
		c.drop(v)
	case int(c.es[old].node) == n:
		c.drop(old) // an older forwarded block sits here: it goes first
	default:
		t := int(c.es[old].node)
		c.drop(old)
		c.move(v, t, false)
	}
}

// Check implements sim.Checker.
func (g *GlobalLRU) Check() error {
	if err := g.c.check(); err != nil {
		return err
	}
	return g.c.checkNoGlobalDuplicates()
}

// IDs implements sim.Numberer.
func (g *GlobalLRU) IDs() *sim.IDs { return &g.c.ids }
