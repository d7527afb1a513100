package dirsim

import (
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
	victim int32 // the requester's block its insert will most likely evict
	vid    uint32
	row    int32 // the block's row (kindRows)
	h      int32 // the requester's handle of the block
	entry  int32 // the block's directory entry
	holder int   // the client the directory will most likely forward to (-1: none)
	hh     int32 // the holder's handle of the block
}

// toucher is Touch's memory between windows: each client's count of reads
// in the window it touched last and in the one it touches now, the clients
// with a count, and where each client's walk from its oldest block is.
type toucher struct {
	lastCnt, curCnt         []int32
	lastClients, curClients []int32
	walkH, walkD            []int32
	srvWalk, cliWalk        victimWalk // the server's and a lone client's
	sink                    uint64
}

// Touch implements sim.Toucher: it loads, for each read of acc, the state
// its access will use — the block's slot (the server's handle and the
// requester's, or the row of every client's), the requester's handle, the
// block's directory entry, the handle and node of the holder the
// directory will most likely forward to, the requester's and the server's
// blocks that their inserts will most likely evict and those blocks'
// slots and rows — in stages, each stage's loads independent of each
// other so that the processor overlaps them. It only reads.
func (s *Sim) Touch(acc []sim.Access) {
	if len(s.caches) == 1 {
		s.touchLone(acc)
		return
	}
	var st [touchWindow]ahead
	n := 0
	for i := range acc {
		a := &acc[i]
		if a.Op == sim.OpRead && a.ID != 0 && uint(a.Client) < uint(len(s.caches)) && n < len(st) {
			l := s.caches[a.Client]
			st[n] = ahead{id: a.ID, client: a.Client, cache: l, holder: -1, victim: s.victimAhead(l, a.Client)}
			if !s.none {
				st[n].entry = s.dir.Ahead(ref{a.ID, a.File}.dirID())
			}
			n++
		}
	}
	s.tch.next()
	var x uint64
	ix := s.dir.Slots()
	for i := range st[:n] { // the slots, the victims' nodes
		t := &st[i]
		if int(t.id) < len(ix) {
			t.row = ix[t.id].User[uCli]
		}
		if t.victim != 0 {
			t.vid = t.cache.nodes[t.victim].id
		}
	}
	x += s.touchVictims(s.server, &s.tch.srvWalk)
	for i := range st[:n] { // the rows, the entries, the victims' slots
		t := &st[i]
		l := t.cache
		switch l.kind {
		case kindLone:
			t.h, t.row = t.row, 0
		case kindRows:
			if t.row != 0 {
				t.h = l.rows.get(t.row, t.client)
			}
		}
		if int(t.vid) < len(ix) {
			t.vid = uint32(ix[t.vid].User[uCli])
		}
		if t.entry != 0 {
			if h := s.dir.AheadHolder(t.entry, directory.ClientID(t.client+1)); h != directory.NoClient && h != directory.Server {
				t.holder = int(h) - 1
			}
		}
	}
	for i := range st[:n] { // the holders' handles, the victims' rows, the requesters' links
		t := &st[i]
		l := t.cache
		if rs := l.rows; rs != nil {
			if t.row != 0 && t.holder >= 0 && t.holder < rs.stride-1 {
				t.hh = rs.get(t.row, t.holder)
			}
			if t.vid != 0 && int(t.vid) < len(rs.h)/rs.stride {
				x += uint64(rs.h[int(t.vid)*rs.stride] + rs.h[int(t.vid)*rs.stride+1+t.client])
			}
		}
		if t.h > 0 && int(t.h) < len(l.links) {
			x += uint64(l.links[t.h].Prev)
		}
	}
	for i := range st[:n] { // the holders' nodes
		t := &st[i]
		if t.hh != 0 {
			if hc := s.caches[t.holder]; int(t.hh) < len(hc.nodes) {
				x += uint64(hc.nodes[t.hh].ready)
			}
		}
	}
	s.tch.sink += x
}

// touchLone is Touch for a lone client, whose cache and the server's
// memory's nodes stay in the processor's cache: it loads the blocks' slots
// and the victims' only.
func (s *Sim) touchLone(acc []sim.Access) {
	var x uint64
	ix := s.dir.Slots()
	for i := range acc {
		a := &acc[i]
		if int(a.ID) < len(ix) {
			x += uint64(ix[a.ID].User[uCli]) // and the directory's entry, beside it
		}
	}
	x += s.touchVictims(s.server, &s.tch.srvWalk)
	x += s.touchVictims(s.caches[0], &s.tch.cliWalk)
	s.tch.sink += x
}

// next ends a window: its counts become the last window's.
func (t *toucher) next() {
	t.lastCnt, t.curCnt = t.curCnt, t.lastCnt
	for _, c := range t.lastClients {
		t.curCnt[c] = 0
	}
	t.lastClients, t.curClients = t.curClients, t.lastClients[:0]
}

// victimAhead returns the handle of the block client c's next read in the
// window being touched will most likely evict: as many blocks from the
// oldest as c has reads before it, in this window and the one before
// (each of them a miss), 0 if the cache holds fewer.
func (s *Sim) victimAhead(l *cache, c int) int32 {
	t := &s.tch
	if t.curCnt == nil {
		k := len(s.caches)
		t.curCnt, t.lastCnt, t.walkH, t.walkD = make([]int32, k), make([]int32, k), make([]int32, k), make([]int32, k)
	}
	d := t.lastCnt[c] + t.curCnt[c]
	if t.curCnt[c] == 0 {
		t.curClients = append(t.curClients, int32(c))
		t.walkH[c], t.walkD[c] = l.list.Back(), 0
	}
	t.curCnt[c]++
	h, k := t.walkH[c], t.walkD[c]
	for ; k < d && h != 0; k++ {
		h = l.links[h].Prev
	}
	t.walkH[c], t.walkD[c] = h, k
	return h
}

// victimWalk is where touchVictims stopped in a cache's list: at handle
// h, which the cache's pos-th eviction (counting from 0) evicts if no hit
// moves it meanwhile, having loaded the blocks before it; and the cache's
// eviction count at the last call.
type victimWalk struct {
	h       int32
	pos, at uint64
}

// touchVictims loads the oldest blocks of l and their slots, those its
// inserts will evict next: twice as many as it evicted since the last
// call (the window being simulated and the one touched, if they evict
// alike), and two more. It goes on from where it stopped, when that block
// has not been evicted yet.
func (s *Sim) touchVictims(l *cache, w *victimWalk) uint64 {
	e := l.evicted
	end := e + 2*(e-w.at) + 2
	w.at = e
	h, pos := w.h, w.pos
	if pos < e || h == 0 || int(h) >= len(l.nodes) { // evicted (or never walked): from the oldest
		h, pos = l.list.Back(), e
	}
	var x uint64
	ix := s.dir.Slots()
	for ; h != 0 && pos < end; pos++ {
		if id := l.nodes[h].id; int(id) < len(ix) {
			x += uint64(ix[id].User[0] + ix[id].User[1])
		}
		h = l.links[h].Prev
	}
	w.h, w.pos = h, pos
	return x
}
