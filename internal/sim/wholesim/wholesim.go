// Package wholesim is the wholefile policy (seed 001, C2Cfs) in the
// simulator: whole-file client caches and the very state machine the live
// server runs (internal/coord/wholefile.Server: commit counters and
// valid-cache maps) deciding where a miss is served from.
//
// Model: a client's cache holds whole files (LRU over files, its capacity
// Params.ClientCacheBlocks blocks; a file is valid only at the version it
// was read at). An open hands the client the file's counter and the
// holders of its current version (two messages to the server). A read of a
// block the client does not hold comes from a holder (the holder of the
// block's segment: the file split into equal segments, one per holder) or,
// with no holder, from the server's memory (an LRU of
// Params.ServerCacheBlocks blocks) or disk. A client that has read every
// block of a file at one version holds it whole and joins the map (one
// message). A write starts a new version (write-through: the block goes to
// the server); the writer's own whole copy follows it (the live agent keeps
// it, internal/agent/rewrite.go), everyone else's goes stale. A close after
// writes commits. Clients never fail. Traces without opens work: a read
// opens the file implicitly, its size taken as the largest block seen.
package wholesim

import (
	"container/list"
	"fmt"
	"slices"

	"github.com/coopfs/coopfs/internal/coord/wholefile"
	"github.com/coopfs/coopfs/internal/sim"
)

// Name is the algorithm's name in the registry.
const Name = "wholefile"

// Sim is the wholefile algorithm.
type Sim struct {
	p       sim.Params
	ws      *wholefile.Server
	vers    map[uint64]uint64 // current version of every file seen (from 1)
	size    map[uint64]uint64 // size in blocks (opens, else largest block seen + 1)
	clients []*client
	server  *blockLRU
}

var (
	_ sim.Algorithm = (*Sim)(nil)
	_ sim.Checker   = (*Sim)(nil)
)

// client is one client's whole-file cache and open files.
type client struct {
	files map[uint64]*fileCopy
	lru   *list.List // of file ids, most recent first
	used  int        // blocks held
	open  map[uint64]*openFile
}

// fileCopy is what a client holds of one file: blocks of one version.
type fileCopy struct {
	version uint64
	blocks  map[uint64]bool
	whole   bool
	elem    *list.Element
}

type openFile struct {
	commit  uint64
	holders []wholefile.ClientID
	wrote   bool
}

// New returns the algorithm for p.
func New(p sim.Params) (*Sim, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ws, err := wholefile.NewServer(wholefile.Config{Epoch: 1})
	if err != nil {
		return nil, err
	}
	s := &Sim{p: p, ws: ws, vers: make(map[uint64]uint64), size: make(map[uint64]uint64),
		server: newBlockLRU(p.ServerCacheBlocks)}
	for range p.Clients {
		s.clients = append(s.clients, &client{files: make(map[uint64]*fileCopy), lru: list.New(), open: make(map[uint64]*openFile)})
	}
	return s, nil
}

func (s *Sim) version(f uint64) uint64 {
	v, ok := s.vers[f]
	if !ok {
		v = 1
		s.vers[f] = v
	}
	return v
}

// Access implements sim.Algorithm.
func (s *Sim) Access(a sim.Access, c *sim.Counters) sim.Outcome {
	if a.Client < 0 || a.Client >= len(s.clients) {
		return sim.Outcome{}
	}
	switch a.Op {
	case sim.OpOpen:
		s.size[a.File] = max(s.size[a.File], a.Block)
		s.open(a.Client, a.File, c)
	case sim.OpRead:
		return s.read(a, c)
	case sim.OpWrite:
		s.write(a, c)
	case sim.OpClose:
		s.close(a.Client, a.File, c)
	case sim.OpDelete:
		s.vers[a.File] = s.version(a.File) + 1
		s.ws.Changed(a.File, s.vers[a.File])
		s.size[a.File] = 0
	}
	return sim.Outcome{}
}

// open asks the server for the counter and the holders (two messages);
// a current whole copy makes the client a holder.
func (s *Sim) open(ci int, f uint64, c *sim.Counters) *openFile {
	cl := s.clients[ci]
	v := s.version(f)
	cp := cl.files[f]
	have := cp != nil && cp.version == v && cp.whole
	r := s.ws.Open(wholefile.ClientID(ci), f, v, have)
	c.Manager(sim.CauseConsistency, 2)
	c.Msg(ci, sim.NodeServer, false)
	c.Msg(sim.NodeServer, ci, false)
	of := &openFile{commit: r.Commit, holders: r.Holders}
	cl.open[f] = of
	if have {
		cl.lru.MoveToFront(cp.elem)
	}
	return of
}

func (s *Sim) read(a sim.Access, c *sim.Counters) sim.Outcome {
	cl := s.clients[a.Client]
	f, b := a.File, a.Block
	if b+1 > s.size[f] {
		s.size[f] = b + 1
	}
	v := s.version(f)
	cp := cl.files[f]
	if cp != nil && cp.version != v {
		s.drop(a.Client, f) // stale: revalidated away
		cp = nil
	}
	if cp != nil && cp.blocks[b] {
		cl.lru.MoveToFront(cp.elem)
		return sim.Outcome{Layer: sim.LayerLocal}
	}
	of := cl.open[f]
	if of == nil {
		of = s.open(a.Client, f, c) // a trace without opens
	}
	of.holders = slices.DeleteFunc(of.holders, func(h wholefile.ClientID) bool { return !s.holds(int(h), f, v) })
	var out sim.Outcome
	if n := uint64(len(of.holders)); n > 0 {
		seg := s.size[f]/n + 1
		h := int(of.holders[min(b/seg, n-1)])
		c.Lookup(2)
		c.Msg(a.Client, h, false)
		c.Msg(h, a.Client, true)
		out.Layer = sim.LayerRemote
	} else {
		c.Msg(a.Client, sim.NodeServer, false)
		c.Msg(sim.NodeServer, a.Client, true)
		out.Layer = sim.LayerDisk
		if s.server.touch(sim.Key{File: f, Block: b}, v) {
			out.Layer = sim.LayerServer
		}
	}
	s.fill(a.Client, f, v, b, c)
	return out
}

// holds reports whether client ci holds file f whole at version v.
func (s *Sim) holds(ci int, f, v uint64) bool {
	cp := s.clients[ci].files[f]
	return cp != nil && cp.version == v && cp.whole
}

// fill adds block b of f at v to client ci's copy; a copy now whole joins
// the map (one message). Whole files are evicted, least recently used
// first, to make room.
func (s *Sim) fill(ci int, f, v, b uint64, c *sim.Counters) {
	cl := s.clients[ci]
	cp := cl.files[f]
	if cp == nil {
		cp = &fileCopy{version: v, blocks: make(map[uint64]bool)}
		cp.elem = cl.lru.PushFront(f)
		cl.files[f] = cp
	}
	if !cp.blocks[b] {
		cp.blocks[b] = true
		cl.used++
	}
	cl.lru.MoveToFront(cp.elem)
	if !cp.whole && uint64(len(cp.blocks)) >= s.size[f] {
		cp.whole = true
		if s.ws.Have(wholefile.ClientID(ci), f, v) {
			c.Manager(sim.CauseConsistency, 1)
			c.Msg(ci, sim.NodeServer, false)
		}
	}
	for cl.used > s.p.ClientCacheBlocks && cl.lru.Len() > 1 {
		s.drop(ci, cl.lru.Back().Value.(uint64))
	}
	if cl.used > s.p.ClientCacheBlocks { // one file larger than the cache
		s.drop(ci, f)
	}
}

// drop removes client ci's copy of f (leaving the map if it held it).
func (s *Sim) drop(ci int, f uint64) {
	cl := s.clients[ci]
	cp := cl.files[f]
	if cp == nil {
		return
	}
	if cp.whole {
		s.ws.Dropped(wholefile.ClientID(ci), f)
	}
	cl.used -= len(cp.blocks)
	cl.lru.Remove(cp.elem)
	delete(cl.files, f)
}

// write starts a new version: the block goes to the server; the writer's
// own copy follows the file to the new version, everyone else's is stale.
func (s *Sim) write(a sim.Access, c *sim.Counters) {
	f := a.File
	old := s.version(f)
	v := old + 1
	s.vers[f] = v
	s.ws.Changed(f, v)
	if a.Block+1 > s.size[f] {
		s.size[f] = a.Block + 1
	}
	c.Msg(a.Client, sim.NodeServer, true)
	c.Msg(sim.NodeServer, a.Client, false)
	s.server.touch(sim.Key{File: f, Block: a.Block}, v)
	cl := s.clients[a.Client]
	if cp := cl.files[f]; cp != nil && cp.version == old {
		cp.version, cp.whole = v, false
		if !cp.blocks[a.Block] {
			cp.blocks[a.Block] = true
			cl.used++
		}
		cp.whole = uint64(len(cp.blocks)) >= s.size[f]
	} else if cp != nil {
		s.drop(a.Client, f)
	}
	if of := cl.open[f]; of != nil {
		of.wrote = true
	}
}

// close commits after writes (two messages).
func (s *Sim) close(ci int, f uint64, c *sim.Counters) {
	cl := s.clients[ci]
	of := cl.open[f]
	delete(cl.open, f)
	if of == nil || !of.wrote {
		return
	}
	v := s.version(f)
	s.ws.Commit(wholefile.ClientID(ci), f, of.commit, v, s.holds(ci, f, v))
	c.Manager(sim.CauseConsistency, 2)
	c.Msg(ci, sim.NodeServer, false)
	c.Msg(sim.NodeServer, ci, false)
}

// Check implements sim.Checker: every client within its capacity (but
// for a single file being read), and its block count matching its copies.
func (s *Sim) Check() error {
	for i, cl := range s.clients {
		n := 0
		for _, cp := range cl.files {
			n += len(cp.blocks)
		}
		if n != cl.used {
			return fmt.Errorf("wholesim: client %d counts %d blocks, holds %d", i, cl.used, n)
		}
		if cl.used > s.p.ClientCacheBlocks {
			return fmt.Errorf("wholesim: client %d holds %d blocks, capacity %d", i, cl.used, s.p.ClientCacheBlocks)
		}
		if cl.lru.Len() != len(cl.files) {
			return fmt.Errorf("wholesim: client %d: %d files in its LRU, %d held", i, cl.lru.Len(), len(cl.files))
		}
	}
	return s.server.check()
}

// blockLRU is the server's memory: an LRU of blocks tagged with versions.
type blockLRU struct {
	capacity int
	l        *list.List
	m        map[sim.Key]*list.Element
}

type blockEntry struct {
	k sim.Key
	v uint64
}

func newBlockLRU(capacity int) *blockLRU {
	return &blockLRU{capacity: capacity, l: list.New(), m: make(map[sim.Key]*list.Element)}
}

// touch reports whether k was held at v and makes it the most recent at v.
func (b *blockLRU) touch(k sim.Key, v uint64) bool {
	if b.capacity <= 0 {
		return false
	}
	if e, ok := b.m[k]; ok {
		hit := e.Value.(*blockEntry).v == v
		e.Value.(*blockEntry).v = v
		b.l.MoveToFront(e)
		return hit
	}
	b.m[k] = b.l.PushFront(&blockEntry{k, v})
	if b.l.Len() > b.capacity {
		e := b.l.Back()
		b.l.Remove(e)
		delete(b.m, e.Value.(*blockEntry).k)
	}
	return false
}

func (b *blockLRU) check() error {
	if b.l.Len() != len(b.m) || (b.capacity > 0 && b.l.Len() > b.capacity) {
		return fmt.Errorf("wholesim: server memory holds %d blocks (%d indexed), capacity %d", b.l.Len(), len(b.m), b.capacity)
	}
	return nil
}
