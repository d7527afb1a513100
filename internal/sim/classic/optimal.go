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
// A cached block's state is kept by block number, beside the heaps, in one
// 16-byte optBlock: its client, its next use and its positions in the
// global heap and its client's heap. Heap slots hold the next use and the
// block number: nothing holds a pointer.
type Optimal struct {
	p      sim.Params
	k      int
	next   []int32  // next use of access i's block, math.MaxInt32 if none
	bid    []uint32 // access i's block number (reads and writes)
	pos    int
	ids    sim.IDs
	blk    []optBlock // by block number
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
	o.blk = o.blk[:0]
	o.nblk, o.pos, o.bel = 0, 0, nil
	o.glob = optHeap{blk: &o.blk, which: 0}
	o.cl = make([]optHeap, o.p.Clients)
	o.free, o.freeAt = o.free[:0], make([]int, o.p.Clients)
	for i := range o.cl {
		o.cl[i] = optHeap{blk: &o.blk, which: 1}
		o.freeAt[i] = -1
		o.updateFree(i)
	}
	o.server = newLRUSet(o.p.ServerCacheBlocks)
	o.take, o.want, o.bad = false, o.want[:0], false
}

// TakeNext implements sim.NextTaker.
func (o *Optimal) TakeNext() *sim.IDs {
	o.reset()
	o.next, o.bid = nil, nil
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
	o.next, o.bid = o.next[:0], o.bid[:0]
	deletes := false
	buf := make([]sim.Access, 4096)
	for {
		n, e := sim.FillBatch(src, buf)
		if !numbered(buf[:n]) { // Run numbers them on the reading goroutine (PrescanIDs)
			o.ids.Number(buf[:n])
		}
		for _, a := range buf[:n] {
			deletes = deletes || a.Op == sim.OpDelete
			i := len(o.next)
			if i >= math.MaxInt32-1 {
				return fmt.Errorf("optimal: trace longer than %d accesses", math.MaxInt32-1)
			}
			o.next = append(o.next, math.MaxInt32)
			id := a.ID
			if id != 0 {
				for int(id) >= len(last) {
					last = append(last, -1)
				}
				if j := last[id]; j >= 0 {
					o.next[j] = int32(i)
				}
				last[id] = int32(i)
			}
			o.bid = append(o.bid, id)
		}
		if e != nil {
			if o.one && !deletes {
				o.bel = &beladySet{set: newFarthest(len(o.next))}
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
		if o.pos >= len(o.next) {
			panic("optimal: Access beyond the prescanned workload (run it with sim.Run)")
		}
		nu, k = o.next[o.pos], o.bid[o.pos]
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
			if int(id) < len(o.blk) && o.blk[id].node >= 0 {
				o.remove(id)
				cnt.Invalidations++
			}
			o.server.del(id)
		}
		return sim.Outcome{}
	case sim.OpRead, sim.OpWrite:
	default:
		return sim.Outcome{}
	}
	if int(k) >= len(o.blk) {
		o.grow(o.ids.Len() + 1)
	}
	n := int32(a.Client)
	layer := sim.LayerLocal
	if a.Op == sim.OpWrite {
		o.server.put(k)
	}
	if t := o.blk[k].node; t >= 0 {
		o.blk[k].nu = nu // migrate's remove ignores the client heap's old copy
		o.glob.fix(k, nu)
		if t == n {
			if !o.one {
				o.cl[n].fix(k, nu)
			}
		} else {
			layer = sim.LayerRemote
			o.migrate(k, n)
		}
	} else {
		layer = sim.LayerServer
		if a.Op == sim.OpRead && !o.server.get(k) {
			layer = sim.LayerDisk
			o.server.put(k)
		}
		if o.k > 0 {
			o.makeRoom(int(n))
			o.blk[k].node, o.blk[k].nu = n, nu
			o.nblk++
			o.glob.push(k, nu)
			if !o.one {
				o.cl[n].push(k, nu)
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
	for len(o.blk) < n {
		o.blk = append(o.blk, optBlock{node: -1})
	}
}

// migrate moves block id to client n; if n is full, n's farthest block
// takes id's place at its old client.
func (o *Optimal) migrate(id uint32, n int32) {
	t := o.blk[id].node
	o.cl[t].remove(id)
	if o.cl[n].len() >= o.k {
		v := o.cl[n].top()
		o.cl[n].remove(v)
		o.blk[v].node = t
		o.cl[t].push(v, o.blk[v].nu)
	}
	o.blk[id].node = n
	o.cl[n].push(id, o.blk[id].nu)
	o.updateFree(int(t))
	o.updateFree(int(n))
}

func (o *Optimal) remove(id uint32) {
	o.glob.remove(id)
	n := o.blk[id].node
	if !o.one {
		o.cl[n].remove(id)
	}
	o.blk[id].node = -1
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
			o.cl[n].remove(v)
			o.blk[v].node = int32(t)
			o.cl[t].push(v, o.blk[v].nu)
			o.updateFree(n)
			o.updateFree(t)
			return
		}
	}
	g := o.glob.top()
	t := int(o.blk[g].node)
	o.remove(g)
	if t != n {
		o.cl[n].remove(v)
		o.blk[v].node = int32(t)
		o.cl[t].push(v, o.blk[v].nu)
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
			if id := sl.id; o.blk[id].node != 0 || int(o.blk[id].pos[0]) != i || sl.next != o.blk[id].nu {
				return fmt.Errorf("entry %v misfiled", o.ids.Key(id))
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
			id := sl.id
			if int(o.blk[id].node) != n || int(o.blk[id].pos[1]) != i || sl.next != o.blk[id].nu || o.glob.a[o.blk[id].pos[0]].next != o.blk[id].nu {
				return fmt.Errorf("client %d: entry %v misfiled", n, o.ids.Key(id))
			}
		}
		total += o.cl[n].len()
	}
	if total != o.nblk || total != o.glob.len() {
		return fmt.Errorf("%d entries on clients, %d blocks, %d in the global heap", total, o.nblk, o.glob.len())
	}
	return nil
}
