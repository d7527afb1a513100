package classic

import (
	"fmt"
	"math/rand/v2"

	"github.com/coopfs/coopfs/internal/sim"
)

type ckey struct {
	k sim.Key
	c int
}

// Hash implements sim.Hasher.
func (k ckey) Hash() uint64 {
	return sim.Mix((k.k.File*0x9e3779b97f4a7c15 ^ k.k.Block) + uint64(k.c)*0xbf58476d1ce4e5b9)
}

// caches is the state every classic algorithm shares: per client an LRU
// list of the blocks it referenced and a FIFO list of the blocks forwarded
// to it and not referenced since (GMS's local and global pages), a global
// age list over all client entries, the holders of each
// block (what a manager knows), the server's LRU memory and the clients
// that have free slots.
//
// INVARIANT: size(c) <= k for every client; every client entry is on
// exactly one of its client's lists (cl if referenced there, gl if
// forwarded there and not referenced since, then e.global is set), the global list (ordered by age, newest first)
// and its block's holder list; free holds exactly the clients with free
// slots.
type caches struct {
	p    sim.Params
	k    int
	cl   []list
	gl   []list
	glob list
	ages bool // the global age list is kept (Global LRU, GMS)
	// single: one client, so a block has at most one copy, the client's:
	// one maps blocks to it, and neither the holder lists nor the (block,
	// client) table are kept.
	single bool
	one    sim.Table[sim.Key, *entry]
	at     sim.Table[ckey, *entry]
	blocks sim.Table[sim.Key, *list]
	server *lruSet
	pool   []*entry
	lpool  []*list
	tick   int64
	rng    *rand.Rand
	free   []int // clients with free slots
	freeAt []int // index in free, -1 if absent
}

func newCaches(p sim.Params) (*caches, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c := &caches{p: p, k: p.ClientCacheBlocks, cl: make([]list, p.Clients), gl: make([]list, p.Clients),
		rng: rand.New(rand.NewPCG(uint64(p.Seed), 0x636c6173)), single: p.Clients == 1,
		freeAt: make([]int, p.Clients)}
	c.server = newLRUSet(p.ServerCacheBlocks, &c.pool)
	c.glob.init(lGlobal)
	for i := range c.cl {
		c.cl[i].init(lLocal)
		c.gl[i].init(lLocal)
		c.freeAt[i] = -1
		c.updateFree(i)
	}
	return c, nil
}

// size is the number of blocks client n holds.
func (c *caches) size(n int) int { return c.cl[n].len() + c.gl[n].len() }

// full reports whether client n has no free slot.
func (c *caches) full(n int) bool { return c.size(n) >= c.k }

// victim is client n's oldest block: the older of its LRU referenced block
// and its earliest-forwarded block.
func (c *caches) victim(n int) *entry {
	a, b := c.cl[n].back(), c.gl[n].back()
	if a == nil || b != nil && b.age < a.age {
		return b
	}
	return a
}

// list returns the list e is on.
func (c *caches) listOf(e *entry) *list {
	if e.global {
		return &c.gl[e.node]
	}
	return &c.cl[e.node]
}

func (c *caches) updateFree(n int) {
	has := c.size(n) < c.k
	switch i := c.freeAt[n]; {
	case has && i < 0:
		c.freeAt[n] = len(c.free)
		c.free = append(c.free, n)
	case !has && i >= 0:
		last := c.free[len(c.free)-1]
		c.free[i], c.freeAt[last] = last, i
		c.free = c.free[:len(c.free)-1]
		c.freeAt[n] = -1
	}
}

// freeClient returns a client with a free slot other than not, or -1.
func (c *caches) freeClient(not int) int {
	for _, n := range c.free {
		if n != not {
			return n
		}
	}
	return -1
}

func (c *caches) lookup(n int, k sim.Key) *entry {
	if c.single {
		e, _ := c.one.Get(k)
		return e
	}
	e, _ := c.at.Get(ckey{k, n})
	return e
}

// holders returns k's holder list, nil if no client caches k.
func (c *caches) holders(k sim.Key) *list {
	h, _ := c.blocks.Get(k)
	return h
}

func (c *caches) copies(k sim.Key) int {
	if c.single {
		if e, _ := c.one.Get(k); e != nil {
			return 1
		}
		return 0
	}
	if h := c.holders(k); h != nil {
		return h.len()
	}
	return 0
}

// holder returns a client other than n holding k, or nil.
func (c *caches) holder(k sim.Key, n int) *entry {
	if c.single {
		if e, _ := c.one.Get(k); e != nil && e.node != n {
			return e
		}
		return nil
	}
	h := c.holders(k)
	if h == nil {
		return nil
	}
	for e := h.front(); e != nil; e = h.next(e) {
		if e.node != n {
			return e
		}
	}
	return nil
}

// other returns the copy of e's block other than e when there are exactly
// two (the one that becomes a singlet when e goes), else nil.
func (c *caches) other(e *entry) *entry {
	if c.single {
		return nil
	}
	h := c.holders(e.key)
	if h == nil || h.len() != 2 {
		return nil
	}
	if f := h.front(); f != e {
		return f
	}
	return h.back()
}

// touch records a reference by the entry's own client.
func (c *caches) touch(e *entry) {
	c.tick++
	if e.global {
		c.gl[e.node].remove(e)
		e.global = false
		c.cl[e.node].pushFront(e)
	} else {
		c.cl[e.node].moveToFront(e)
	}
	e.age, e.recirc = c.tick, 0
	if c.ages {
		c.glob.moveToFront(e)
	}
}

// add puts k in client n's cache as most recent; the caller made room.
func (c *caches) add(n int, k sim.Key) *entry {
	if c.full(n) {
		panic(fmt.Sprintf("classic: client %d full on add", n))
	}
	c.tick++
	e := newEntry(&c.pool)
	e.key, e.node, e.age = k, n, c.tick
	if !c.single {
		c.at.Put(ckey{k, n}, e)
	}
	c.cl[n].pushFront(e)
	if c.ages {
		c.glob.pushFront(e)
	}
	if c.single {
		c.one.Put(k, e)
		c.updateFree(n)
		return e
	}
	h := c.holders(k)
	if h == nil {
		if m := len(c.lpool); m > 0 {
			h = c.lpool[m-1]
			c.lpool = c.lpool[:m-1]
		} else {
			h = &list{}
		}
		h.init(lBlock)
		c.blocks.Put(k, h)
	}
	h.pushBack(e)
	e.hl = h
	c.updateFree(n)
	return e
}

// drop removes an entry from its client's cache.
func (c *caches) drop(e *entry) {
	n := e.node
	c.listOf(e).remove(e)
	if c.ages {
		c.glob.remove(e)
	}
	if c.single {
		c.one.Delete(e.key)
	} else {
		h := e.hl
		h.remove(e)
		if h.len() == 0 {
			c.blocks.Delete(e.key)
			c.lpool = append(c.lpool, h)
		}
		c.at.Delete(ckey{e.key, n})
	}
	c.pool = append(c.pool, e)
	c.updateFree(n)
}

// move forwards entry e to client t (which has room): it joins t's
// forwarded list and keeps its age (a forwarded block is as old as it was)
// unless refresh is set, which makes it the newest block.
func (c *caches) move(e *entry, t int, refresh bool) {
	if c.full(t) {
		panic(fmt.Sprintf("classic: client %d full on move", t))
	}
	from := e.node
	c.listOf(e).remove(e)
	if !c.single {
		c.at.Delete(ckey{e.key, from})
		c.at.Put(ckey{e.key, t}, e)
	}
	e.node, e.global = t, true
	c.gl[t].pushFront(e)
	if refresh {
		c.tick++
		e.age = c.tick
		if c.ages {
			c.glob.moveToFront(e)
		}
	}
	c.updateFree(from)
	c.updateFree(t)
}

// invalidate drops every copy of k except client n's and returns how many.
func (c *caches) invalidate(k sim.Key, n int) int {
	if c.single {
		if e, _ := c.one.Get(k); e != nil && e.node != n {
			c.drop(e)
			return 1
		}
		return 0
	}
	h := c.holders(k)
	if h == nil {
		return 0
	}
	cnt := 0
	for e := h.front(); e != nil; {
		nx := h.next(e)
		if e.node != n {
			if h.len() == 1 {
				c.drop(e)
				return cnt + 1
			}
			c.drop(e)
			cnt++
		}
		e = nx
	}
	return cnt
}

// randomClient returns a client other than n, uniformly (n if alone).
func (c *caches) randomClient(n int) int {
	if c.p.Clients == 1 {
		return n
	}
	t := c.rng.IntN(c.p.Clients - 1)
	if t >= n {
		t++
	}
	return t
}

// check verifies the invariants.
func (c *caches) check() error {
	total := 0
	for n := range c.cl {
		if c.size(n) > c.k {
			return fmt.Errorf("client %d holds %d blocks, capacity %d", n, c.size(n), c.k)
		}
		if (c.freeAt[n] >= 0) != (c.size(n) < c.k) {
			return fmt.Errorf("client %d: free set wrong", n)
		}
		for i, l := range []*list{&c.cl[n], &c.gl[n]} {
			cnt := 0
			for e := l.front(); e != nil; e = l.next(e) {
				cnt++
				if e.node != n || c.lookup(n, e.key) != e || e.global != (i == 1) {
					return fmt.Errorf("client %d: entry %v misfiled", n, e.key)
				}
			}
			if cnt != l.len() {
				return fmt.Errorf("client %d: list length %d, counted %d", n, l.len(), cnt)
			}
			total += cnt
		}
	}
	if c.ages && total != c.glob.len() || !c.single && total != c.at.Len() {
		return fmt.Errorf("%d entries on client lists, %d on the global list, %d in the map", total, c.glob.len(), c.at.Len())
	}
	var last int64 = 1 << 62
	for e := c.glob.front(); e != nil; e = c.glob.next(e) {
		if e.age > last {
			return fmt.Errorf("global list out of age order at %v", e.key)
		}
		last = e.age
	}
	held := 0
	var bad error
	c.one.Range(func(k sim.Key, e *entry) bool {
		if e.key != k {
			bad = fmt.Errorf("block %v: entry of %v", k, e.key)
			return false
		}
		held++
		return true
	})
	c.blocks.Range(func(k sim.Key, h *list) bool {
		seen := map[int]bool{}
		for e := h.front(); e != nil; e = h.next(e) {
			if e.key != k || seen[e.node] {
				bad = fmt.Errorf("block %v: bad holder list", k)
				return false
			}
			seen[e.node] = true
			held++
		}
		return true
	})
	if bad != nil {
		return bad
	}
	if held != total {
		return fmt.Errorf("%d holders, %d entries", held, total)
	}
	if c.server.lst.len() > c.server.cap {
		return fmt.Errorf("server holds %d blocks, capacity %d", c.server.lst.len(), c.server.cap)
	}
	return nil
}

// checkNoGlobalDuplicates verifies that no block has two global copies and
// that a global copy is the only copy it had when it was forwarded... we
// check the stronger condition that holds at all times: at most one copy
// of any block is a global (forwarded, unreferenced) copy.
func (c *caches) checkNoGlobalDuplicates() error {
	var bad error
	c.blocks.Range(func(k sim.Key, h *list) bool {
		g := 0
		for e := h.front(); e != nil; e = h.next(e) {
			if e.global {
				g++
			}
		}
		if g > 1 {
			bad = fmt.Errorf("block %v has %d global copies", k, g)
		}
		return bad == nil
	})
	return bad
}

// deleteFile drops every cached block of a file of n blocks; it returns the
// number of client copies dropped.
func (c *caches) deleteFile(file, n uint64) int {
	cnt := 0
	for b := range n {
		k := sim.Key{File: file, Block: b}
		cnt += c.invalidate(k, -1)
		c.server.del(k)
	}
	return cnt
}

// front is what every classic algorithm does first with an access: the
// consistency actions of writes and deletes, nothing more for other
// non-reads, and a local hit. done reports that the access is finished,
// with out its outcome (place is then set for a write: the caller places the
// written block at the writer); else it is a read that missed locally.
func (c *caches) front(a sim.Access, cnt *sim.Counters, manager bool) (out sim.Outcome, done, place bool) {
	if c.consistency(a, cnt, manager) {
		return sim.Outcome{}, true, a.Op == sim.OpWrite
	}
	if a.Op != sim.OpRead {
		return sim.Outcome{}, true, false
	}
	if e := c.lookup(a.Client, a.Key()); e != nil {
		c.touch(e)
		return sim.Outcome{Layer: sim.LayerLocal}, true, false
	}
	return sim.Outcome{}, false, false
}

// consistency handles writes and deletes the same way for every classic
// algorithm (write-through, block-based write-invalidate through the
// manager: one message to the manager, one per invalidated copy). It
// returns true if a was such an operation; for a write, the caller then
// places the block at the writer.
func (c *caches) consistency(a sim.Access, cnt *sim.Counters, manager bool) bool {
	switch a.Op {
	case sim.OpWrite:
		k := a.Key()
		n := c.invalidate(k, a.Client)
		cnt.Invalidations += int64(n)
		c.server.put(k)
		cnt.Msg(a.Client, sim.NodeServer, true)
		if manager {
			cnt.Manager(sim.CauseConsistency, 1+n)
			cnt.Msg(a.Client, sim.NodeManager, false)
			for range n {
				cnt.Msg(sim.NodeManager, 0, false)
			}
		}
		return true
	case sim.OpDelete:
		n := c.deleteFile(a.File, a.Block)
		cnt.Invalidations += int64(n)
		if manager {
			cnt.Manager(sim.CauseConsistency, 1+n)
		}
		return true
	}
	return false
}
