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
// and the block number).
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
type Optimal struct {
	p      sim.Params
	k      int
	next   []int32  // next use of access i's block, math.MaxInt32 if none
	bid    []uint32 // access i's block number (reads and writes)
	pos    int
	ids    sim.IDs
	blocks []*optEntry // block number → its entry, nil if not in client memory
	nblk   int         // entries in blocks
	glob   optHeap
	cl     []optHeap
	server *lruSet
	one    bool // one client: its heap would be the global heap, so it is not kept
	free   []int
	freeAt []int
}

type optEntry struct {
	id   uint32
	node int
	next int32
	idx  [2]int // position in the global heap and in its client's heap
}

// NewOptimal returns Optimal; it must be prescanned (sim.Run does it).
func NewOptimal(p sim.Params) (*Optimal, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	o := &Optimal{p: p, k: p.ClientCacheBlocks,
		cl: make([]optHeap, p.Clients), freeAt: make([]int, p.Clients), one: p.Clients == 1}
	o.glob.w = 0
	for i := range o.cl {
		o.cl[i].w = 1
		o.freeAt[i] = -1
		o.updateFree(i)
	}
	o.server = newLRUSet(p.ServerCacheBlocks)
	return o, nil
}

// Prescan implements sim.Prescanner: it numbers the blocks and builds the
// next-use index.
func (o *Optimal) Prescan(src sim.Source) error {
	var last []int32 // block number → its last access so far, -1 if none
	o.next, o.bid = o.next[:0], o.bid[:0]
	buf := make([]sim.Access, 4096)
	for {
		n, e := sim.FillBatch(src, buf)
		o.ids.Number(buf[:n])
		for _, a := range buf[:n] {
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
			o.pos = 0
			if errors.Is(e, io.EOF) {
				return nil
			}
			return e
		}
	}
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
	if o.pos >= len(o.next) {
		panic("optimal: Access beyond the prescanned workload (run it with sim.Run)")
	}
	nu, k := o.next[o.pos], o.bid[o.pos]
	o.pos++
	switch a.Op {
	case sim.OpDelete:
		for b := range a.Block {
			id := o.ids.Lookup(sim.Key{File: a.File, Block: b})
			if id == 0 {
				continue
			}
			if e := o.blocks[id]; e != nil {
				o.remove(e)
				cnt.Invalidations++
			}
			o.server.del(id)
		}
		return sim.Outcome{}
	case sim.OpRead, sim.OpWrite:
	default:
		return sim.Outcome{}
	}
	if int(k) >= len(o.blocks) {
		o.blocks = append(o.blocks, make([]*optEntry, o.ids.Len()+1-len(o.blocks))...)
	}
	n := a.Client
	layer := sim.LayerLocal
	if a.Op == sim.OpWrite {
		o.server.put(k)
	}
	if e := o.blocks[k]; e != nil {
		e.next = nu // migrate's remove ignores the client heap's old copy
		o.glob.fix(e)
		if e.node == n {
			if !o.one {
				o.cl[n].fix(e)
			}
		} else {
			layer = sim.LayerRemote
			o.migrate(e, n)
		}
	} else {
		layer = sim.LayerServer
		if a.Op == sim.OpRead && !o.server.get(k) {
			layer = sim.LayerDisk
			o.server.put(k)
		}
		if o.k > 0 {
			o.makeRoom(n)
			e := &optEntry{id: k, node: n, next: nu}
			o.blocks[k] = e
			o.nblk++
			o.glob.push(e)
			if !o.one {
				o.cl[n].push(e)
			}
			o.updateFree(n)
		}
	}
	if a.Op != sim.OpRead {
		return sim.Outcome{}
	}
	return sim.Outcome{Layer: layer}
}

// migrate moves e to client n; if n is full, n's farthest block takes e's
// place at its old client.
func (o *Optimal) migrate(e *optEntry, n int) {
	t := e.node
	o.cl[t].remove(e)
	if o.cl[n].len() >= o.k {
		v := o.cl[n].top()
		o.cl[n].remove(v)
		v.node = t
		o.cl[t].push(v)
	}
	e.node = n
	o.cl[n].push(e)
	o.updateFree(t)
	o.updateFree(n)
}

func (o *Optimal) remove(e *optEntry) {
	o.glob.remove(e)
	if !o.one {
		o.cl[e.node].remove(e)
	}
	o.blocks[e.id] = nil
	o.nblk--
	o.updateFree(e.node)
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
			v.node = t
			o.cl[t].push(v)
			o.updateFree(n)
			o.updateFree(t)
			return
		}
	}
	g := o.glob.top()
	t := g.node
	o.remove(g)
	if t != n {
		o.cl[n].remove(v)
		v.node = t
		o.cl[t].push(v)
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
	if o.one {
		for i, sl := range o.glob.a {
			if e := sl.e; o.blocks[e.id] != e || e.idx[0] != i || sl.next != e.next || e.node != 0 {
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
		for _, sl := range o.cl[n].a {
			e := sl.e
			if b := o.blocks[e.id]; e.node != n || b != e || sl.next != e.next || o.glob.a[e.idx[0]].next != e.next {
				return fmt.Errorf("client %d: entry %v misfiled", n, o.ids.Key(e.id))
			}
		}
		total += o.cl[n].len()
	}
	if total != o.nblk || total != o.glob.len() {
		return fmt.Errorf("%d entries on clients, %d blocks, %d in the global heap", total, o.nblk, o.glob.len())
	}
	return nil
}

// optHeap is a max-heap of entries by next use; w selects the index slot.
type optHeap struct {
	a []optSlot
	w int
}

// optSlot is a heap slot: an entry and a copy of its next use, so that
// comparisons touch no entry.
type optSlot struct {
	next int32
	e    *optEntry
}

func (h *optHeap) len() int           { return len(h.a) }
func (h *optHeap) top() *optEntry     { return h.a[0].e }
func (h *optHeap) less(i, j int) bool { return h.a[i].next > h.a[j].next }

func (h *optHeap) swap(i, j int) {
	h.a[i], h.a[j] = h.a[j], h.a[i]
	h.a[i].e.idx[h.w] = i
	h.a[j].e.idx[h.w] = j
}

func (h *optHeap) push(e *optEntry) {
	e.idx[h.w] = len(h.a)
	h.a = append(h.a, optSlot{e.next, e})
	h.up(len(h.a) - 1)
}

func (h *optHeap) remove(e *optEntry) {
	i := e.idx[h.w]
	last := len(h.a) - 1
	if i != last {
		h.swap(i, last)
	}
	h.a[last] = optSlot{}
	h.a = h.a[:last]
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// fix restores the order after e.next changed.
func (h *optHeap) fix(e *optEntry) {
	i := e.idx[h.w]
	h.a[i].next = e.next
	if !h.down(i) {
		h.up(i)
	}
}

func (h *optHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *optHeap) down(i0 int) bool {
	i, n := i0, len(h.a)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
