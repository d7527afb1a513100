package classic

import (
	"fmt"
	"math"

	"github.com/coopfs/coopfs/internal/sim"
)

// NChance is N-chance forwarding (seed 002 3.1, Dahlin94) with the xFS
// refinement, as simulated in seed 002 chapter 5.
//
// Lookup: a local miss sends the request to the manager, which forwards it
// to a client caching the block (preferring client caches over the server,
// the xFS refinement) or else to the server; the holder replies with the
// block: 3 lookup messages, 2 of them at the manager.
//
// Replacement: the client's LRU block v goes. Unless v is a recirculating
// block (forwarded to this client and not referenced since; the client then
// knows it is a singlet), the client asks the manager whether v is a
// singlet (2 duplicate-avoidance messages). A duplicate is dropped, and the
// manager told (1 delete message). A singlet with a recirculation count
// below n is forwarded to a random other client and its count incremented
// (2 forward messages: the block, and the notice to the manager), where it
// counts as just referenced; the target drops its own oldest block to make
// room (with a delete notice; the
// target's victim is not forwarded further, which bounds the cascade to one
// level). A singlet forwarded n times is dropped. A reference resets the
// count.
type NChance struct {
	c *caches
	n int
}

// NewNChance returns N-chance with n = p.NChance.
func NewNChance(p sim.Params) (*NChance, error) {
	if p.NChance > math.MaxUint8 {
		return nil, fmt.Errorf("%w: nchance = %d, at most %d", sim.ErrConfig, p.NChance, math.MaxUint8)
	}
	c, err := newCaches(p)
	if err != nil {
		return nil, err
	}
	return &NChance{c: c, n: p.NChance}, nil
}

// Access implements sim.Algorithm.
func (x *NChance) Access(a sim.Access, cnt *sim.Counters) sim.Outcome {
	return managerAccess(x.c, &a, cnt, x)
}

// roomMaker is what N-chance and GMS do differently: make room at a full
// client n (an interface, not a method value: no wrapper call per access).
type roomMaker interface {
	makeRoom(n int, cnt *sim.Counters)
}

// managerAccess is the read/write path shared by N-chance and GMS:
// manager-based lookup, write-invalidate consistency, placement at the
// reader with makeRoom called when its cache is full.
func managerAccess(c *caches, a *sim.Access, cnt *sim.Counters, makeRoom roomMaker) sim.Outcome {
	k, x, s := c.front(a, cnt, true)
	if s != stepMiss {
		if s == stepPlace {
			managerPlace(c, a.Client, k, cnt, makeRoom, false)
		}
		return s.outcome()
	}
	cnt.Lookup(3)
	cnt.Manager(sim.CauseLookup, 2)
	cnt.Msg(a.Client, sim.NodeManager, false)
	layer := sim.LayerRemote
	if x.h != 0 {
		cnt.Msg(sim.NodeManager, int(x.node), false)
		cnt.Msg(int(x.node), a.Client, true)
	} else {
		cnt.Msg(sim.NodeManager, sim.NodeServer, false)
		cnt.Msg(sim.NodeServer, a.Client, true)
		layer = sim.LayerServer
		if !c.server.get(k) {
			layer = sim.LayerDisk
			c.server.add(k)
		}
	}
	managerPlace(c, a.Client, k, cnt, makeRoom, true)
	return sim.Outcome{Layer: layer}
}

// managerPlace puts block k at client n as most recent; missed says n is
// known not to cache it (a local read miss).
func managerPlace(c *caches, n int, k uint32, cnt *sim.Counters, makeRoom roomMaker, missed bool) {
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
		makeRoom.makeRoom(n, cnt)
	}
	c.add(n, k)
}

// dropNotify drops e and tells the manager (1 delete message); it returns
// what caches.drop does.
func dropNotify(c *caches, e int32, cnt *sim.Counters) holder {
	n := int(c.es[e].node)
	left := c.drop(e)
	cnt.Replacement(sim.ReplDelete, 1)
	cnt.Manager(sim.CauseReplacement, 1)
	cnt.Msg(n, sim.NodeManager, false)
	return left
}

// forward moves singlet v to client t, which drops its oldest block if
// full (2 forward messages, plus the target's delete notice); refresh makes
// v the newest block at t.
func forward(c *caches, v int32, t int, refresh bool, cnt *sim.Counters) {
	from := int(c.es[v].node)
	if c.full(t) {
		dropNotify(c, c.victim(t), cnt)
	}
	c.move(v, t, refresh)
	cnt.Forwards++
	cnt.Replacement(sim.ReplForward, 2)
	cnt.Manager(sim.CauseReplacement, 1)
	cnt.Msg(from, t, true)
	cnt.Msg(from, sim.NodeManager, false)
}

func (x *NChance) makeRoom(n int, cnt *sim.Counters) {
	c := x.c
	v := c.victim(n)
	e := &c.es[v]
	if e.recirc == 0 { // not known to be a singlet: ask the manager
		cnt.Replacement(sim.ReplDuplicate, 2)
		cnt.Manager(sim.CauseReplacement, 2)
		cnt.Msg(n, sim.NodeManager, false)
		cnt.Msg(sim.NodeManager, n, false)
	}
	if c.copies(e.id) > 1 || int(e.recirc) >= x.n || c.p.Clients == 1 {
		dropNotify(c, v, cnt)
		return
	}
	t := c.randomClient(n)
	e.recirc++
	forward(c, v, t, true, cnt)
}

// Check implements sim.Checker.
func (x *NChance) Check() error { return x.c.check() }

// IDs implements sim.Numberer.
func (x *NChance) IDs() *sim.IDs { return &x.c.ids }
