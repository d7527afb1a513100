package classic

import "github.com/coopfs/coopfs/internal/sim"

// Baseline is the system without cooperative caching: each client has a
// local LRU cache; a local miss goes to the server, whose LRU memory caches
// what it reads from disk. With one client and no server memory it is
// exactly LRU.
type Baseline struct{ c *caches }

// NewBaseline returns the baseline algorithm.
func NewBaseline(p sim.Params) (*Baseline, error) {
	c, err := newCaches(p)
	if err != nil {
		return nil, err
	}
	return &Baseline{c}, nil
}

// Access implements sim.Algorithm.
func (b *Baseline) Access(a sim.Access, cnt *sim.Counters) sim.Outcome {
	c := b.c
	k, _, s := c.front(&a, cnt, true)
	if s != stepMiss {
		if s == stepPlace {
			b.place(a.Client, k, false)
		}
		return s.outcome()
	}
	cnt.Lookup(2)
	cnt.Msg(a.Client, sim.NodeServer, false)
	cnt.Msg(sim.NodeServer, a.Client, true)
	layer := sim.LayerServer
	if !c.server.get(k) {
		layer = sim.LayerDisk
		c.server.add(k)
	}
	b.place(a.Client, k, true)
	return sim.Outcome{Layer: layer}
}

// place puts block k at client n as most recent; missed says n is known
// not to cache it (a local read miss).
func (b *Baseline) place(n int, k uint32, missed bool) {
	c := b.c
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
		c.drop(c.victim(n))
	}
	c.add(n, k)
}

// Check implements sim.Checker.
func (b *Baseline) Check() error { return b.c.check() }

// IDs implements sim.Numberer.
func (b *Baseline) IDs() *sim.IDs { return &b.c.ids }
