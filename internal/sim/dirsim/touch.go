package dirsim

import (
	"unsafe"

	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/sim"
)

var _ sim.Toucher = (*Sim)(nil)

// touchWindow is how many accesses Touch loads ahead at a time.
const touchWindow = 32

// TouchWindow implements sim.Toucher.
func (s *Sim) TouchWindow() int { return touchWindow }

// ahead is what Touch found of one read in its earlier stages.
type ahead struct {
	id     uint32
	client int
	cache  *cache
	row    int32 // the block's row (kindRows)
	h      int32 // the requester's handle of the block
	entry  int32 // the block's directory entry
	holder int   // the client the directory will most likely forward to (-1: none)
	hh     int32 // the holder's handle of the block
}

// victimAt is a block a client's insert may evict: its number and its row
// (its node's, kindRows).
type victimAt struct {
	id     uint32
	client int32
	row    int32
	prev   int32 // the block before it in the client's list
}

// toucher is Touch's memory between windows: each client's count of reads
// in the window it touched last and in the one it touches now, the clients
// with a count, and where the walks over the server's and a lone client's
// oldest blocks are.
type toucher struct {
	lastCnt, curCnt         []int32
	lastClients, curClients []int32
	srvWalk, cliWalk        victimWalk
	vic                     [2 * touchWindow]victimAt
	pf                      prefetches
}

// Touch implements sim.Toucher: it loads, for each read of acc, the state
// its access will use — the block's slot (the server's handle and the
// requester's, or the row of every client's), the requester's handle, the
// block's directory entry, the handle and node of the holder the
// directory will most likely forward to, the blocks that the requesters'
// and the server's inserts may evict and those blocks' slots and rows —
// in stages, each stage's loads independent of each other so that the
// processor overlaps them; the last stages, whose values it does not use
// (the links, the holders' nodes, the victims' rows, the server's
// victims' slots), are prefetches, which hold nothing back while their
// lines arrive. It only reads.
func (s *Sim) Touch(acc []sim.Access) {
	if len(s.caches) == 1 {
		s.touchLone(acc)
		return
	}
	t := &s.tch
	if t.curCnt == nil {
		k := len(s.caches)
		t.curCnt, t.lastCnt = make([]int32, k), make([]int32, k)
	}
	var st [touchWindow]ahead
	n := 0
	for i := range acc {
		a := &acc[i]
		if a.Op == sim.OpRead && a.ID != 0 && uint(a.Client) < uint(len(s.caches)) && n < len(st) {
			st[n] = ahead{id: a.ID, client: a.Client, cache: s.caches[a.Client], holder: -1}
			if !s.none {
				st[n].entry = s.dir.Ahead(ref{a.ID, a.File}.dirID())
			}
			if t.curCnt[a.Client] == 0 {
				t.curClients = append(t.curClients, int32(a.Client))
			}
			t.curCnt[a.Client]++
			n++
		}
	}
	nv := s.clientVictims()
	t.next()
	ix := s.dir.Slots()
	for i := range st[:n] { // the blocks' slots
		if id := st[i].id; int(id) < len(ix) {
			st[i].row = ix[id].User[uCli]
		}
	}
	for _, v := range t.vic[:nv] { // the victims' slots: written when their rows empty
		if int(v.id) < len(ix) {
			t.pf.add(unsafe.Pointer(&ix[v.id]))
		}
	}
	s.touchVictims(s.server, &t.srvWalk)
	s.touchRows(st[:n])
	for i := range st[:n] { // the holders' handles, the requesters' links
		a := &st[i]
		l := a.cache
		if rs := l.rows; rs != nil && a.row != 0 && a.holder >= 0 && a.holder < len(s.caches) {
			a.hh = rs.get(a.row, s.caches[a.holder].col)
		}
		if a.h > 0 && int(a.h) < len(l.links) {
			t.pf.add(unsafe.Pointer(&l.links[a.h]))
		}
		if a.hh != 0 { // the holder's node
			if hc := s.caches[a.holder]; int(a.hh) < len(hc.nodes) {
				t.pf.add(unsafe.Pointer(&hc.nodes[a.hh]))
			}
		}
	}
	if rs := s.caches[0].rows; rs != nil {
		for _, v := range t.vic[:nv] { // the victims' rows
			if v.row != 0 && int(v.row) < len(rs.h)/rs.stride {
				t.pf.add(unsafe.Pointer(rs.field(v.row, s.caches[v.client].col.off)))
			}
		}
	}
	t.pf.flush()
}

// prefetches is a list of addresses for prefetch: Touch's last stages,
// whose values it does not use.
type prefetches struct {
	a [8 * touchWindow]uintptr
	n int
}

// add lists p (dropped when the list is full: a hint).
func (f *prefetches) add(p unsafe.Pointer) {
	if f.n < len(f.a) {
		f.a[f.n] = uintptr(p)
		f.n++
	}
}

// flush prefetches the listed addresses and empties the list.
func (f *prefetches) flush() {
	prefetch(f.a[:f.n])
	f.n = 0
}

// touchRows loads the rows of st's blocks (the requesters' handles) and
// their directory entries (the holders they name).
func (s *Sim) touchRows(st []ahead) {
	for i := range st {
		a := &st[i]
		if l := a.cache; l.kind == kindRows && a.row != 0 {
			a.h = l.rows.get(a.row, l.col)
		}
		if a.entry != 0 {
			if h := s.dir.AheadHolder(a.entry, directory.ClientID(a.client+1)); h != directory.NoClient && h != directory.Server {
				a.holder = int(h) - 1
			}
		}
	}
}

// clientVictims puts in tch.vic the blocks that the clients reading in the
// window being touched may evict, as many from each one's oldest as it
// reads in this window and the one before (every read a miss); it returns
// how many. Each walk starts from the oldest block, loading again what an
// earlier window's walk loaded: a client reads about once in 42 accesses
// at 42 clients, so what its last walk loaded is windows old, out of the
// processor's nearer caches by the time its next insert evicts it.
func (s *Sim) clientVictims() int {
	t := &s.tch
	nv := 0
	for _, c := range t.curClients { // the oldest blocks: loads independent of each other
		l := s.caches[c]
		if h := l.list.Back(); h != 0 {
			n := &l.nodes[h]
			t.vic[nv] = victimAt{id: n.id, client: c, row: n.row, prev: l.links[h].Prev}
			nv++
		}
	}
	for i, n := 0, nv; i < n; i++ { // the next oldest, for those that read more than once
		c := t.vic[i].client
		l, h := s.caches[c], t.vic[i].prev
		for k := t.lastCnt[c] + t.curCnt[c] - 1; h != 0 && k > 0 && nv < len(t.vic); k-- {
			n := &l.nodes[h]
			t.vic[nv] = victimAt{id: n.id, client: c, row: n.row}
			nv++
			h = l.links[h].Prev
		}
	}
	return nv
}

// touchLone is Touch for a lone client, whose cache and the server's
// memory's nodes stay in the processor's cache: it prefetches the blocks'
// slots and the victims' only.
func (s *Sim) touchLone(acc []sim.Access) {
	ix := s.dir.Slots()
	for i := range acc {
		if a := &acc[i]; int(a.ID) < len(ix) {
			s.tch.pf.add(unsafe.Pointer(&ix[a.ID])) // and the directory's entry, beside it
		}
	}
	s.touchVictims(s.server, &s.tch.srvWalk)
	s.touchVictims(s.caches[0], &s.tch.cliWalk)
	s.tch.pf.flush()
}

// next ends a window: its counts become the last window's.
func (t *toucher) next() {
	t.lastCnt, t.curCnt = t.curCnt, t.lastCnt
	for _, c := range t.lastClients {
		t.curCnt[c] = 0
	}
	t.lastClients, t.curClients = t.curClients, t.lastClients[:0]
}

// victimWalk is where a walk over a cache's oldest blocks (touchVictims)
// stopped in its list: at handle h, which the cache's
// pos-th eviction (counting from 0) evicts if no hit moves it meanwhile,
// having loaded the blocks before it; and the cache's eviction count at
// touchVictims' last call.
type victimWalk struct {
	h       int32
	pos, at uint64
}

// resume returns where a walk over l's oldest blocks goes on: where w
// stopped, unless that block has been evicted since (or w never walked l),
// then from the oldest.
func (w *victimWalk) resume(l *cache) (int32, uint64) {
	if w.pos < l.evicted || w.h == 0 || int(w.h) >= len(l.nodes) {
		return l.list.Back(), l.evicted
	}
	return w.h, w.pos
}

// touchVictims loads the oldest blocks of l and lists their slots for
// prefetch (Touch's tch.pf), those its
// inserts will evict next: twice as many as it evicted since the last
// call (the window being simulated and the one touched, if they evict
// alike), and two more. It goes on from where it stopped, when that block
// has not been evicted yet.
func (s *Sim) touchVictims(l *cache, w *victimWalk) {
	e := l.evicted
	end := e + 2*(e-w.at) + 2
	w.at = e
	h, pos := w.resume(l)
	ix := s.dir.Slots()
	for ; h != 0 && pos < end; pos++ {
		if id := l.nodes[h].id; int(id) < len(ix) {
			s.tch.pf.add(unsafe.Pointer(&ix[id]))
		}
		h = l.links[h].Prev
	}
	w.h, w.pos = h, pos
}
