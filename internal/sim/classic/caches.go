package classic

import (
	"fmt"
	"math/bits"
	"math/rand/v2"

	"github.com/coopfs/coopfs/internal/sim"
)

// caches is the state every classic algorithm shares: per client an LRU
// list of the blocks it referenced and a FIFO list of the blocks forwarded
// to it and not referenced since (GMS's local and global pages), a global
// age list over all client entries, the holders of each block (what a
// manager knows), the server's LRU memory and the clients that have free
// slots. Blocks are numbered densely (sim.IDs: one table lookup per
// access); everything else is a slice indexed by block number or entry
// handle, and the lists are elists through the entries' own links.
//
// INVARIANT: size(c) <= k for every client; every client entry is on
// exactly one of its client's lists (cl if referenced there, gl if
// forwarded there and not referenced since, then global is set), the
// global list (ordered by age, newest first, when ages is set) and its
// block's holder list (or one[id] with one client), at most once per
// client; free and pending hold exactly the clients with free slots
// (when frees is set).
type caches struct {
	p   sim.Params
	k   int
	ids sim.IDs
	cl  []elist
	gl  []elist
	// ages: the global age order is kept in ax (Global LRU and GMS with
	// more than one client; with one, the client's list is that order: see
	// oldest).
	ages bool
	ax   ageIndex
	// single: one client, so a block has at most one copy, the client's:
	// one maps blocks to it and no holder lists are kept.
	single bool
	one    []int32 // single: block number → entry handle, 0 if not cached
	bl     []block // block number → its holders
	arena  holderArena
	masks  bool    // clients fit a run's mask (2 to 64: one client keeps one, not bl)
	nb     int     // the per-block slices' length (bl, or one with one client)
	size   []int32 // by client: blocks held
	es     []entry // the slab; es[0] is unused (handle 0 is nil)
	efree  []int32 // free handles: efree[:nfree] (the slice itself is not cut,
	nfree  int     // so that a push or pop stores no slice header)
	server *lruSet
	tick   int64
	rng    *rand.Rand
	// frees: free and freeAt are kept (Global LRU, GMS: N-chance and the
	// baseline never read them, and a full client joins and leaves the
	// set on every replacement).
	frees  bool
	free   []int // clients with free slots but the pending one
	freeAt []int // index in free, -1 if absent
	// pending is 1 + the client that joined the free set last, not yet
	// added to free (0 if none): it is added when the set changes
	// otherwise or is read.
	pending int
}

// maxClients is the most clients an entry can name (entry.node).
const maxClients = 1 << 16

func newCaches(p sim.Params) (*caches, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Clients > maxClients {
		return nil, fmt.Errorf("%w: clients = %d, the classic algorithms simulate at most %d", sim.ErrConfig, p.Clients, maxClients)
	}
	c := &caches{p: p, k: p.ClientCacheBlocks, cl: make([]elist, p.Clients), gl: make([]elist, p.Clients),
		rng: rand.New(rand.NewPCG(uint64(p.Seed), 0x636c6173)), single: p.Clients == 1, masks: 1 < p.Clients && p.Clients <= 64,
		es: make([]entry, 1), size: make([]int32, p.Clients), ax: newAgeIndex()}
	c.server = newLRUSet(p.ServerCacheBlocks)
	return c, nil
}

// global keeps the global age list and the set of clients with free slots
// (Global LRU and GMS); it is called before the first access.
func (c *caches) global() {
	c.ages, c.frees = !c.single, true
	c.freeAt = make([]int, len(c.cl))
	for i := range c.cl {
		c.freeAt[i] = -1
		if c.k > 0 {
			c.addFree(i)
		}
	}
}

// id returns a's block number (numbering it if Run did not), with the
// per-block slices long enough for it.
func (c *caches) id(a *sim.Access) uint32 {
	if id := a.ID; id != 0 && int(id) < c.nb {
		return id
	}
	return c.number(a)
}

// number is id's slow path: the block is new to the caches (or Run did not
// number it).
func (c *caches) number(a *sim.Access) uint32 {
	id := a.ID
	if id == 0 {
		id = c.ids.ID(a.Key())
	}
	if c.single {
		if int(id) >= len(c.one) {
			c.one = append(c.one, make([]int32, int(id)+1-len(c.one))...)
		}
		c.nb = len(c.one)
	} else {
		if int(id) >= len(c.bl) {
			c.bl = append(c.bl, make([]block, int(id)+1-len(c.bl))...)
		}
		c.nb = len(c.bl)
	}
	return id
}

// known reports whether block id has been accessed (Run numbers blocks
// ahead of the simulation).
func (c *caches) known(id uint32) bool { return int(id) < c.nb }

// full reports whether client n has no free slot.
func (c *caches) full(n int) bool { return int(c.size[n]) >= c.k }

// oldest returns the globally least recently used block (0 if none). With
// one client that is its LRU block: nothing is forwarded, so its list is
// the global age list.
func (c *caches) oldest() int32 {
	if c.single {
		return c.cl[0].Back()
	}
	return c.ax.oldest()
}

// countOldest goes through the global age order from the oldest block
// (see oldest) and adds 1 to w[n] for each block client n holds, up to m
// blocks; it returns how many it counted and the last one (the m-th
// oldest, 0 if none). With more than one client it scans the age index's
// slots in order: the entries it loads do not depend on each other.
func (c *caches) countOldest(w []int, m int) (found int, last int32) {
	if c.single {
		for h := c.cl[0].Back(); h != 0 && found < m; h = c.es[h].ln.Prev {
			w[0]++
			found++
			last = h
		}
		return found, last
	}
	x := &c.ax
	x.skip()
	es := c.es
	for i := x.lo / 64; i < len(x.live) && found < m; i++ {
		for b := x.live[i]; b != 0 && found < m; b &= b - 1 {
			h := x.at[i*64+bits.TrailingZeros64(b)]
			w[es[h].node]++
			found++
			last = h
		}
	}
	return found, last
}

// reserve makes room in the age index (when kept) for the one age an
// access gives: a reference takes the next tick as its age, and with the
// age index kept it is filed under it (ageIndex.push, which has no slow
// path, so that touch, add and move stay small).
func (c *caches) reserve() {
	if c.ages && len(c.ax.at) == cap(c.ax.at) {
		c.ageRoom()
	}
}

// ageRoom is reserve's slow path (see ageIndex.room). Not inlined, so that
// reserve is.
//
//go:noinline
func (c *caches) ageRoom() {
	if c.ax.room(c.es, len(c.es)-1-c.nfree) {
		c.tick = c.ax.base + int64(len(c.ax.at)) - 1 // renumbered: the newest age
	}
}

// victim is client n's oldest block: the older of its LRU referenced block
// and its earliest-forwarded block.
func (c *caches) victim(n int) int32 {
	a, b := c.cl[n].Back(), c.gl[n].Back()
	if a == 0 || b != 0 && c.es[b].age < c.es[a].age {
		return b
	}
	return a
}

// listOf returns the client list h is on.
func (c *caches) listOf(h int32) *elist {
	if e := &c.es[h]; e.global {
		return &c.gl[e.node]
	}
	return &c.cl[c.es[h].node]
}

// grew records that client n holds one block more: it leaves the free
// set (if kept) when that fills it. (grew and shrank are small enough to
// be inlined; the set's work is in leaveFree and joinFree.)
func (c *caches) grew(n int) {
	if c.size[n]++; int(c.size[n]) == c.k && c.frees {
		c.leaveFree(n)
	}
}

// shrank records that client n holds one block less: it joins the free
// set (if kept) when it was full.
func (c *caches) shrank(n int) {
	if c.size[n]--; int(c.size[n]) == c.k-1 && c.frees {
		c.joinFree(n)
	}
}

// leaveFree takes client n out of the free set. The client that last
// joined and has not been added yet (the common case: a full client makes
// room and fills again) just stops being pending.
func (c *caches) leaveFree(n int) {
	if c.pending == n+1 {
		c.pending = 0
		return
	}
	c.flushFree()
	i, last := c.freeAt[n], c.free[len(c.free)-1]
	c.free[i], c.freeAt[last] = last, i
	c.free = c.free[:len(c.free)-1]
	c.freeAt[n] = -1
}

// joinFree puts client n in the free set as the pending client.
func (c *caches) joinFree(n int) {
	c.flushFree()
	c.pending = n + 1
}

// flushFree adds the pending client to the end of free, where it would
// have been added.
func (c *caches) flushFree() {
	if p := c.pending; p != 0 {
		c.addFree(p - 1)
		c.pending = 0
	}
}

func (c *caches) addFree(n int) {
	c.freeAt[n] = len(c.free)
	c.free = append(c.free, n)
}

// freeSet returns the clients with free slots in the order they are kept.
func (c *caches) freeSet() []int {
	c.flushFree()
	return c.free
}

// freeClient returns a client with a free slot other than not, or -1.
func (c *caches) freeClient(not int) int {
	for _, n := range c.freeSet() {
		if n != not {
			return n
		}
	}
	return -1
}

// lookup returns client n's entry for block id, 0 if none.
func (c *caches) lookup(n int, id uint32) int32 {
	h, _ := c.probe(n, id)
	return h
}

// probe returns client n's entry for block id (0 if none) and, if n has
// none, the copy a manager forwards n's request to: the first holder (the
// one that has had it longest), with h 0 if there is no copy. One look at
// the block answers both: a block's only copy is in the block, and a run's
// mask (kept whatever the number of clients, a client past 64 without a
// bit, and read only when masks is set) says whether n is in it, its first
// holder beside it.
func (c *caches) probe(n int, id uint32) (int32, holder) {
	if c.single {
		return c.one[id], holder{} // the one client's copy, or none
	}
	b := &c.bl[id]
	x := b.in[0]
	if x.h >= 0 {
		if x.node == int32(n) {
			return x.h, holder{} // 0 if the block has no copy
		}
		return 0, x
	}
	if !c.masks || c.arena.mask(b)&bit(int32(n)) != 0 {
		if h := c.arena.find(b, int32(n)); h != 0 {
			return h, holder{}
		}
	}
	return 0, c.arena.s[b.start()]
}

func (c *caches) copies(id uint32) int {
	if c.single {
		if c.one[id] != 0 {
			return 1
		}
		return 0
	}
	return int(c.bl[id].count())
}

// touch records a reference by the entry's own client.
func (c *caches) touch(h int32) {
	e := &c.es[h]
	if e.global {
		c.gl[e.node].remove(c.es, h)
		e.global = false
		c.cl[e.node].pushFront(c.es, h)
	} else {
		c.cl[e.node].moveToFront(c.es, h)
	}
	c.tick++
	if c.ages {
		c.ax.clear(e.age)
		c.ax.push(h)
	}
	e.age, e.recirc = c.tick, 0
}

func (c *caches) newEntry() int32 {
	if c.nfree > 0 {
		c.nfree--
		return c.efree[c.nfree]
	}
	return c.growEntries()
}

// growEntries is newEntry's slow path: a new handle at the slab's end. Not
// inlined: its appends would give add a larger frame and spills on every
// call.
//
//go:noinline
func (c *caches) growEntries() int32 {
	h := int32(len(c.es))
	c.es = append(c.es, entry{})
	return h
}

// add puts block id in client n's cache as most recent; the caller made
// room.
func (c *caches) add(n int, id uint32) int32 {
	if c.full(n) {
		panic(fmt.Sprintf("classic: client %d full on add", n))
	}
	c.tick++
	h := c.newEntry()
	c.es[h] = entry{id: id, node: uint16(n), age: c.tick}
	c.cl[n].pushFront(c.es, h)
	if c.ages {
		c.ax.push(h)
	}
	if c.single {
		c.one[id] = h
	} else {
		c.arena.push(&c.bl[id], holder{h, int32(n)})
	}
	c.grew(n)
	return h
}

// drop removes entry h from its client's cache and returns the copy of its
// block left when there was one other (the block's new singlet), with h 0
// otherwise: its client comes from the block's run, without a load of the
// entry.
func (c *caches) drop(h int32) (left holder) {
	e := &c.es[h]
	n := int(e.node)
	c.listOf(h).remove(c.es, h)
	if c.ages {
		c.ax.clear(e.age)
	}
	if c.single {
		c.one[e.id] = 0
	} else {
		left = c.arena.remove(&c.bl[e.id], h)
	}
	if c.nfree < len(c.efree) {
		c.efree[c.nfree] = h
	} else {
		c.efree = append(c.efree, h)
	}
	c.nfree++
	c.shrank(n)
	return left
}

// move forwards entry h to client t (which has room): it joins t's
// forwarded list and keeps its age (a forwarded block is as old as it was)
// unless refresh is set, which makes it the newest block.
func (c *caches) move(h int32, t int, refresh bool) {
	if c.full(t) {
		panic(fmt.Sprintf("classic: client %d full on move", t))
	}
	e := &c.es[h]
	from := int(e.node)
	c.listOf(h).remove(c.es, h)
	if !c.single {
		c.arena.moveTo(&c.bl[e.id], h, int32(t))
	}
	e.node, e.global = uint16(t), true
	c.gl[t].pushFront(c.es, h)
	if refresh {
		c.tick++
		if c.ages {
			c.ax.clear(e.age)
			c.ax.push(h)
		}
		e.age = c.tick
	}
	// t first: a target that fills is the client that joined the free set
	// last (it made room for v), so it just stops being pending, and then
	// from becomes the pending one. The other order flushes both into the
	// set and takes both out again, to the same set.
	c.grew(t)
	c.shrank(from)
}

// invalidate drops every copy of block id except client n's and returns
// how many.
func (c *caches) invalidate(id uint32, n int) int {
	if c.single {
		if h := c.one[id]; h != 0 && int(c.es[h].node) != n {
			c.drop(h)
			return 1
		}
		return 0
	}
	cnt := 0
	b := &c.bl[id]
	for i := int32(0); i < b.count(); {
		if x := c.arena.run(b)[i]; x.node != int32(n) {
			c.drop(x.h) // takes it out of the run: i is the next one
			cnt++
		} else {
			i++
		}
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

// deleteFile drops every cached block of a file of n blocks; it returns the
// number of client copies dropped.
func (c *caches) deleteFile(file, n uint64) int {
	cnt := 0
	for b := range n {
		if id := c.ids.Lookup(sim.Key{File: file, Block: b}); id != 0 && c.known(id) {
			cnt += c.invalidate(id, -1)
			c.server.del(id)
		}
	}
	return cnt
}

// step is what front leaves to the algorithm.
type step uint8

const (
	stepMiss  step = iota // a read that missed locally: the algorithm serves it
	stepHit               // a local hit: done
	stepPlace             // a write: the algorithm places the block at the writer
	stepDone              // nothing more (a delete, another operation)
)

// outcome is the outcome of an access front finished (s is not stepMiss).
func (s step) outcome() sim.Outcome {
	if s == stepHit {
		return sim.Outcome{Layer: sim.LayerLocal}
	}
	return sim.Outcome{}
}

// front is what every classic algorithm does first with an access: the
// consistency actions of writes and deletes, nothing more for other
// non-reads, and a local hit; s says what is left (see step). On a local
// read miss, x is the copy another client holds (see probe). id is the
// block's number for reads and writes.
func (c *caches) front(a *sim.Access, cnt *sim.Counters, manager bool) (id uint32, x holder, s step) {
	switch a.Op {
	case sim.OpRead:
		id = c.id(a)
		h, x := c.probe(a.Client, id)
		if h != 0 {
			c.touch(h)
			return id, x, stepHit
		}
		return id, x, stepMiss
	case sim.OpWrite:
		id = c.id(a)
		c.write(a, id, cnt, manager)
		return id, x, stepPlace
	case sim.OpDelete:
		n := c.deleteFile(a.File, a.Block)
		cnt.Invalidations += int64(n)
		if manager {
			cnt.Manager(sim.CauseConsistency, 1+n)
		}
	}
	return 0, x, stepDone
}

// write handles a write the same way for every classic algorithm
// (write-through, block-based write-invalidate through the manager: one
// message to the manager, one per invalidated copy); the caller then
// places the block at the writer.
func (c *caches) write(a *sim.Access, id uint32, cnt *sim.Counters, manager bool) {
	n := c.invalidate(id, a.Client)
	cnt.Invalidations += int64(n)
	c.server.put(id)
	cnt.Msg(a.Client, sim.NodeServer, true)
	if manager {
		cnt.Manager(sim.CauseConsistency, 1+n)
		cnt.Msg(a.Client, sim.NodeManager, false)
		for range n {
			cnt.Msg(sim.NodeManager, 0, false)
		}
	}
}
