package classic

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/coopfs/coopfs/internal/sim"
)

// Optimal is seed 002's ideal algorithm 3.3.1: Belady's replacement over the
// client memories, from a next-use index precomputed in Prescan (the one
// structure that grows with the trace: 8 bytes per access, the next use
// and the block number) or, where the trace carries each access's next use
// (libCacheSim's oracleGeneral formats), from the accesses themselves
// (TakeNext): then nothing grows with the trace but a bit per access (the
// one-client set of next uses), and each next use is checked when its
// block comes (sim.NextTaker).
//
// The client memories hold at most one copy of a block: a read served by
// another client moves the block to the reader, and the reader's block with
// the farthest next use moves to the freed slot, so a remote hit evicts
// nothing. On a miss the reader needs a slot: the block in all client
// caches whose next access is farthest goes (if it is on another client,
// the reader's farthest block is forwarded there to take its place; a
// client with a free slot takes it first). The set of blocks in client
// memory is therefore exactly Belady's for a cache of Clients × K blocks,
// so no algorithm has fewer reads that miss every client memory; with one
// client it is exactly Belady. Server memory is an LRU disk cache.
// Replacement uses heaps: O(log n) per access rather than O(1).
//
// A block in client memory has an entry (optEntry: its number, client and
// positions in the global heap and its client's heap) in a
// table of at most Clients × K entries, which the heaps' slots name (with
// the next use): the heaps' moves write to that small table, not to one
// as long as the unique blocks; by block number only the entry's index is
// kept. Nothing holds a pointer.
type Optimal struct {
	p      sim.Params
	k      int
	idx    useIndex // from Prescan: access i's block number and next use
	pos    int
	ids    sim.IDs
	entry  []int32    // block number → its entry, -1 if not in client memory
	ent    []optEntry // the entries of the blocks in client memory
	spare  []int32    // entries free for reuse
	nblk   int        // blocks in client memory
	glob   optHeap
	cl     []optHeap
	server *lruSet
	one    bool       // one client: its heap would be the global heap, so it is not kept
	bel    *beladySet // one client and no deletes in the trace: the set of next uses
	free   []int
	freeAt []int
	take   bool    // next uses from the accesses (TakeNext), not next and bid
	want   []int32 // with take: block number → the position its last access named next (math.MaxInt32: none), 0 if not seen
	bad    bool    // with take: a next use did not hold
}

// NewOptimal returns Optimal; it must be prescanned (sim.Run does it).
func NewOptimal(p sim.Params) (*Optimal, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	o := &Optimal{p: p, k: p.ClientCacheBlocks, one: p.Clients == 1}
	o.reset()
	return o, nil
}

// reset empties the caches for a new run (the block numbers stay).
func (o *Optimal) reset() {
	o.entry, o.ent, o.spare = o.entry[:0], o.ent[:0], o.spare[:0]
	o.nblk, o.pos, o.bel = 0, 0, nil
	o.glob = optHeap{ent: &o.ent, which: 0}
	o.cl = make([]optHeap, o.p.Clients)
	o.free, o.freeAt = o.free[:0], make([]int, o.p.Clients)
	for i := range o.cl {
		o.cl[i] = optHeap{ent: &o.ent, which: 1}
		o.freeAt[i] = -1
		o.updateFree(i)
	}
	o.server = newLRUSet(o.p.ServerCacheBlocks)
	o.take, o.want, o.bad = false, o.want[:0], false
}

// TakeNext implements sim.NextTaker.
func (o *Optimal) TakeNext() *sim.IDs {
	o.reset()
	o.idx = useIndex{}
	o.take = true
	if o.one {
		o.bel = &beladySet{set: newFarthest(1 << 16)}
	}
	return &o.ids
}

// NextHeld implements sim.NextTaker.
func (o *Optimal) NextHeld(end bool) bool {
	if o.bad || !end {
		return !o.bad
	}
	for _, w := range o.want {
		if w != 0 && w != math.MaxInt32 {
			return false
		}
	}
	return true
}

// taken is access a's next use and block number (TakeNext), a being at
// position i: ok is false, from the first one on, when a next use does
// not hold: the access names none or one that is not ahead, or its
// block's previous access named another position than i. Opens and
// closes name no block; a delete fails (its place in a trace's chain of
// next uses is not the prescan's).
func (o *Optimal) taken(a *sim.Access, i int32) (nu int32, k uint32, ok bool) {
	if !o.bad && (a.Op == sim.OpOpen || a.Op == sim.OpClose) {
		return math.MaxInt32, 0, true
	}
	if o.bad || (a.Op != sim.OpRead && a.Op != sim.OpWrite) || a.ID == 0 || a.Next == 0 ||
		(a.Next > 0 && (a.Next <= int64(i)+1 || a.Next >= math.MaxInt32)) {
		o.bad = true
		return 0, 0, false
	}
	k = a.ID
	if int(k) >= len(o.want) {
		o.want = append(o.want, make([]int32, int(k)+1-len(o.want)+len(o.want)/2)...)
	}
	if w := o.want[k]; w != 0 && w != i {
		o.bad = true
		return 0, 0, false
	}
	nu = math.MaxInt32
	if a.Next > 0 {
		nu = int32(a.Next - 1)
	}
	o.want[k] = nu
	return nu, k, true
}

// Prescan implements sim.Prescanner: it numbers the blocks and builds the
// next-use index.
func (o *Optimal) Prescan(src sim.Source) error {
	var last []int32 // block number → its last access so far, -1 if none
	o.reset()
	o.idx.n = 0 // its chunks are reused
	deletes := false
	buf := make([]sim.Access, 4096)
	for {
		n, e := sim.FillBatch(src, buf)
		if !numbered(buf[:n]) { // Run numbers them on the reading goroutine (PrescanIDs)
			o.ids.Number(buf[:n])
		}
		for _, a := range buf[:n] {
			deletes = deletes || a.Op == sim.OpDelete
			i := o.idx.n
			if i >= math.MaxInt32-1 {
				return fmt.Errorf("optimal: trace longer than %d accesses", math.MaxInt32-1)
			}
			id := a.ID
			o.idx.add(id)
			if id != 0 {
				for int(id) >= len(last) {
					last = append(last, -1)
				}
				if j := last[id]; j >= 0 {
					o.idx.setNext(j, int32(i))
				}
				last[id] = int32(i)
			}
		}
		if e != nil {
			if o.one && !deletes {
				o.bel = &beladySet{set: newFarthest(o.idx.n)}
			}
			if errors.Is(e, io.EOF) {
				return nil
			}
			return e
		}
	}
}

// PrescanIDs implements sim.PrescanNumberer.
func (o *Optimal) PrescanIDs() *sim.IDs { return &o.ids }

// numbered reports whether every read and write of batch has its number.
func numbered(batch []sim.Access) bool {
	for i := range batch {
		if a := &batch[i]; a.ID == 0 && (a.Op == sim.OpRead || a.Op == sim.OpWrite) {
			return false
		}
	}
	return true
}

func (o *Optimal) updateFree(n int) {
	has := o.size(n) < o.k
	switch i := o.freeAt[n]; {
	case has && i < 0:
		o.freeAt[n] = len(o.free)
		o.free = append(o.free, n)
	case !has && i >= 0:
		last := o.free[len(o.free)-1]
		o.free[i], o.freeAt[last] = last, i
		o.free = o.free[:len(o.free)-1]
		o.freeAt[n] = -1
	}
}

// Access implements sim.Algorithm.
func (o *Optimal) Access(a sim.Access, cnt *sim.Counters) sim.Outcome {
	var nu int32
	var k uint32
	if o.take {
		if o.pos >= math.MaxInt32-1 {
			o.bad = true
		}
		var ok bool
		if nu, k, ok = o.taken(&a, int32(o.pos)); !ok {
			return sim.Outcome{} // the run is void: sim.Run runs it again with a prescan
		}
	} else {
		if o.pos >= o.idx.n {
			panic("optimal: Access beyond the prescanned workload (run it with sim.Run)")
		}
		u := o.idx.at(o.pos)
		nu, k = u.next, u.id
	}
	o.pos++
	if o.bel != nil {
		return o.accessOne(a, int32(o.pos-1), nu, k)
	}
	switch a.Op {
	case sim.OpDelete:
		for b := range a.Block {
			id := o.ids.Lookup(sim.Key{File: a.File, Block: b})
			if id == 0 {
				continue
			}
			if int(id) < len(o.entry) && o.entry[id] >= 0 {
				o.remove(o.entry[id])
				cnt.Invalidations++
			}
			o.server.del(id)
		}
		return sim.Outcome{}
	case sim.OpRead, sim.OpWrite:
	default:
		return sim.Outcome{}
	}
	if int(k) >= len(o.entry) {
		o.grow(o.ids.Len() + 1)
	}
	n := int32(a.Client)
	layer := sim.LayerLocal
	if a.Op == sim.OpWrite {
		o.server.put(k)
	}
	if e := o.entry[k]; e >= 0 {
		o.glob.fix(e, nu)
		if t := o.ent[e].node; t == n {
			if !o.one {
				o.cl[n].fix(e, nu)
			}
		} else {
			layer = sim.LayerRemote
			o.migrate(e, n, nu)
		}
	} else {
		layer = sim.LayerServer
		if a.Op == sim.OpRead && !o.server.get(k) {
			layer = sim.LayerDisk
			o.server.put(k)
		}
		if o.k > 0 {
			o.makeRoom(int(n))
			e := o.add(k, n)
			o.glob.push(e, nu)
			if !o.one {
				o.cl[n].push(e, nu)
			}
			o.updateFree(int(n))
		}
	}
	if a.Op != sim.OpRead {
		return sim.Outcome{}
	}
	return sim.Outcome{Layer: layer}
}

// accessOne is Access with one client and no deletes (beladySet).
func (o *Optimal) accessOne(a sim.Access, i, nu int32, k uint32) sim.Outcome {
	if a.Op != sim.OpRead && a.Op != sim.OpWrite {
		return sim.Outcome{}
	}
	if a.Op == sim.OpWrite {
		o.server.put(k)
	}
	layer := sim.LayerLocal
	if !o.bel.access(i, nu, o.k) {
		layer = sim.LayerServer
		if a.Op == sim.OpRead && !o.server.get(k) {
			layer = sim.LayerDisk
			o.server.put(k)
		}
	}
	if a.Op != sim.OpRead {
		return sim.Outcome{}
	}
	return sim.Outcome{Layer: layer}
}

// grow makes the per-block state n long.
func (o *Optimal) grow(n int) {
	for len(o.entry) < n {
		o.entry = append(o.entry, -1)
	}
}

// add gives block k at client n an entry.
func (o *Optimal) add(k uint32, n int32) int32 {
	var e int32
	if l := len(o.spare); l > 0 {
		e, o.spare = o.spare[l-1], o.spare[:l-1]
	} else {
		e = int32(len(o.ent))
		o.ent = append(o.ent, optEntry{})
	}
	o.ent[e] = optEntry{id: k, node: n}
	o.entry[k] = e
	o.nblk++
	return e
}

// migrate moves entry e's block, next used at nu, to client n; if n is
// full, n's farthest block takes e's place at its old client.
func (o *Optimal) migrate(e, n, nu int32) {
	t := o.ent[e].node
	o.cl[t].remove(e)
	full := o.cl[n].len() >= o.k
	if full {
		o.move(o.cl[n].top(), n, t)
	}
	o.ent[e].node = n
	o.cl[n].push(e, nu)
	if !full { // else n and t hold as many blocks as before
		o.updateFree(int(t))
		o.updateFree(int(n))
	}
}

// move moves entry v's block from client n to client t.
func (o *Optimal) move(v, n, t int32) {
	nu := o.cl[n].a[o.ent[v].pos[1]].next
	o.cl[n].remove(v)
	o.ent[v].node = t
	o.cl[t].push(v, nu)
}

// remove drops entry e's block from client memory.
func (o *Optimal) remove(e int32) {
	o.glob.remove(e)
	n := o.ent[e].node
	if !o.one {
		o.cl[n].remove(e)
	}
	o.entry[o.ent[e].id] = -1
	o.spare = append(o.spare, e)
	o.nblk--
	o.updateFree(int(n))
}

// makeRoom frees a slot at client n.
func (o *Optimal) makeRoom(n int) {
	if o.size(n) < o.k {
		return
	}
	if o.one {
		o.remove(o.glob.top())
		return
	}
	v := o.cl[n].top()
	for _, t := range o.free {
		if t != n {
			o.move(v, int32(n), int32(t))
			o.updateFree(n)
			o.updateFree(t)
			return
		}
	}
	g := o.glob.top()
	t := int(o.ent[g].node)
	o.remove(g)
	if t != n {
		o.move(v, int32(n), int32(t))
		o.updateFree(n)
		o.updateFree(t)
	}
}

// size is the number of blocks client n holds.
func (o *Optimal) size(n int) int {
	if o.one {
		return o.glob.len()
	}
	return o.cl[n].len()
}

// Check implements sim.Checker.
func (o *Optimal) Check() error {
	if o.bel != nil {
		return o.bel.check(o.k)
	}
	if o.one {
		for i, sl := range o.glob.a {
			if e := &o.ent[sl.e]; e.node != 0 || int(e.pos[0]) != i || o.entry[e.id] != sl.e {
				return fmt.Errorf("entry %v misfiled", o.ids.Key(e.id))
			}
		}
		if o.glob.len() > o.k || o.glob.len() != o.nblk {
			return fmt.Errorf("%d blocks in the heap, %d indexed, capacity %d", o.glob.len(), o.nblk, o.k)
		}
		return nil
	}
	total := 0
	for n := range o.cl {
		if o.cl[n].len() > o.k {
			return fmt.Errorf("client %d holds %d blocks, capacity %d", n, o.cl[n].len(), o.k)
		}
		for i, sl := range o.cl[n].a {
			e := &o.ent[sl.e]
			if int(e.node) != n || int(e.pos[1]) != i || o.glob.a[e.pos[0]].next != sl.next || o.entry[e.id] != sl.e {
				return fmt.Errorf("client %d: entry %v misfiled", n, o.ids.Key(e.id))
			}
		}
		total += o.cl[n].len()
	}
	if total != o.nblk || total != o.glob.len() || total != len(o.ent)-len(o.spare) {
		return fmt.Errorf("%d entries on clients, %d blocks, %d in the global heap, %d entries used", total, o.nblk, o.glob.len(), len(o.ent)-len(o.spare))
	}
	return nil
}
