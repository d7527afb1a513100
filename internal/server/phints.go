package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/hints"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// hintsPolicy is the server's part of the `hints` policy (seed 002): the
// manager that hands an opener the hints of the file's last opener, the
// client list every client learns its peers from, the discard cache in
// the server's memory, and the digests peers' blocks are checked against.
// The state machine is internal/coord/hints.Server; this adapter owns its
// lock, the discard cache's bytes and the clients' connections. Lookups
// and replacements never reach the server: they go from client to client.
type hintsPolicy struct {
	s       *Server
	timeout time.Duration // how long the last opener has to hand its hints over

	bcastMu sync.Mutex // orders the client-list messages (joined, left, broadcast); taken before mu

	mu      sync.Mutex
	hs      *hints.Server
	discard map[block.ID]discarded  // the discard cache's bytes (hs holds the order)
	members map[uint32]*hintsMember // connected clients, by hints id
	ids     map[string]uint32       // hints id of every peer listener address seen
	nextID  uint32                  // the last hints id given
	byConn  map[uint32]uint32       // connection's client id → hints id
	seq     uint64                  // the last membership change's number (wire.HintsPeers.Seq)

	opens, handouts, hinted, exportFails       atomic.Uint64
	offered, kept, discardHits, digestRequests atomic.Uint64
	refused                                    atomic.Uint64 // discards that failed their check
}

type discarded struct {
	version uint64
	data    []byte
}

type hintsMember struct {
	conn   *wire.Conn
	conns  int // connections with this id (a restarted client's old one may linger)
	boot   uint64
	listen string
	who    string // its peer identity (peerWho)
}

// maxHintsIDs bounds the peer listener addresses remembered; past it the
// table restarts (ids of clients not connected are forgotten).
const maxHintsIDs = 1 << 16

// HintsExportTimeout bounds how long an open waits for the last opener's
// hints; past it the opener gets none and the last opener is marked down.
// A last opener that is gone fails the call at once (its connection is
// closed); the bound is for one that is alive but slow, and a second was
// too short for a loaded machine: the opener then read every block from
// the server.
const HintsExportTimeout = 3 * time.Second

func newHintsPolicy(s *Server) (policy, error) {
	s.digests = newDigests(DefaultDigestEntries)
	p := &hintsPolicy{s: s, timeout: HintsExportTimeout, discard: make(map[block.ID]discarded),
		members: make(map[uint32]*hintsMember), ids: make(map[string]uint32), byConn: make(map[uint32]uint32),
		seq: s.bootID} // later than any number a server before this one gave (a boot id is its start time)
	blocks := int(max(0, s.cfg.DiscardCacheSize) / int64(s.cfg.BlockSize))
	hs, err := hints.NewServer(hints.ServerConfig{MemoryBlocks: blocks, Memory: hints.MemoryDiscard,
		Watch: func(b block.ID, in bool) {
			if !in {
				delete(p.discard, b) // under p.mu: every call into hs is
			}
		}})
	if err != nil {
		return nil, err
	}
	p.hs = hs
	if err := s.cfg.Metrics.Register(p); err != nil {
		return nil, fmt.Errorf("register hints metrics: %w", err)
	}
	return p, nil
}

func stamp() hints.Time { return hints.Time(time.Now().UnixNano()) }

// joined makes a client a member under the hints id of its peer listener
// address (a new boot id on a known address is a restart). A client that
// claims the address of a member of another identity (peerWho) that is
// still connected and answers a ping is not made a member: it would take
// over that member's id, its hints and its peers' requests.
func (p *hintsPolicy) joined(cl *client, c *wire.Conn) {
	if cl.listen == "" {
		return // not a peer: it reads through the server only
	}
	if old := p.claimed(cl); old != nil && p.answers(old) {
		p.s.log.Warn("a client claims the peer listener of another connected member: it reads through the server only",
			"client", cl.id, "name", cl.name, "listen", cl.listen)
		return
	}
	p.bcastMu.Lock() // the messages of this change leave before the next one's
	defer p.bcastMu.Unlock()
	p.mu.Lock()
	id, ok := p.ids[cl.listen]
	if !ok {
		if len(p.ids) >= maxHintsIDs {
			p.forgetIDs()
		}
		p.nextID++
		id = p.nextID
		p.ids[cl.listen] = id
	}
	p.byConn[cl.id] = id
	mb := p.members[id]
	if mb == nil || cl.bootID >= mb.boot {
		n := 0
		if mb != nil {
			n = mb.conns
		}
		mb = &hintsMember{conn: c, conns: n, boot: cl.bootID, listen: cl.listen, who: peerWho(cl)}
		p.members[id] = mb
	}
	mb.conns++
	p.hs.ClientSeen(hints.ClientID(id), hints.BootID(cl.bootID))
	p.seq++
	delta := &wire.HintsPeers{Delta: true, Members: []wire.HintsMember{{ID: id, Boot: mb.boot, Listen: mb.listen}}, Seq: p.seq}
	p.mu.Unlock()
	p.broadcast(c, id, delta)
}

// claimed is the connection of the member of another identity that holds
// cl's peer listener address, if any.
func (p *hintsPolicy) claimed(cl *client) *wire.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.ids[cl.listen]
	if !ok {
		return nil
	}
	mb := p.members[id]
	if mb == nil || mb.who == peerWho(cl) || mb.conn.Err() != nil {
		return nil
	}
	return mb.conn
}

// answers reports whether a member's connection answers a ping (any reply,
// an error included) within the ping timeout.
func (p *hintsPolicy) answers(c *wire.Conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), p.s.cfg.PingTimeout)
	defer cancel()
	_, err := c.Call(ctx, &wire.Ping{})
	var re *wire.RemoteError
	return err == nil || errors.As(err, &re)
}

// forgetIDs drops the ids of addresses no connected client uses (p.mu held).
func (p *hintsPolicy) forgetIDs() {
	for addr, id := range p.ids {
		if p.members[id] == nil {
			delete(p.ids, addr)
		}
	}
}

func (p *hintsPolicy) left(cl *client) {
	p.bcastMu.Lock()
	defer p.bcastMu.Unlock()
	p.mu.Lock()
	id, ok := p.byConn[cl.id]
	delete(p.byConn, cl.id)
	mb := p.members[id]
	if !ok || mb == nil {
		p.mu.Unlock()
		return
	}
	mb.conns--
	if mb.conns > 0 {
		p.mu.Unlock()
		return
	}
	delete(p.members, id)
	p.hs.ClientFailed(hints.ClientID(id))
	p.seq++
	delta := &wire.HintsPeers{Delta: true, Gone: []uint32{id}, Seq: p.seq}
	p.mu.Unlock()
	p.broadcast(nil, 0, delta)
}

// hid is the hints id of a connection's client (p.mu held); 0: none.
func (p *hintsPolicy) hid(cl *client) uint32 {
	if cl == nil {
		return 0
	}
	return p.byConn[cl.id]
}

// peerList is the client list, ordered by id, as of the last change (p.mu
// held).
func (p *hintsPolicy) peerList() *wire.HintsPeers {
	m := &wire.HintsPeers{Seq: p.seq}
	for id, mb := range p.members {
		m.Members = append(m.Members, wire.HintsMember{ID: id, Boot: mb.boot, Listen: mb.listen})
	}
	sort.Slice(m.Members, func(i, j int) bool { return m.Members[i].ID < m.Members[j].ID })
	return m
}

// broadcast tells the clients of a join or a leave: the joiner (conn
// joiner, id joinerID) gets the whole list, the others the delta. The
// caller holds bcastMu from the membership change to here, so the messages
// of successive changes leave in the order of the changes: a client hears
// of its peers in id order.
func (p *hintsPolicy) broadcast(joiner *wire.Conn, joinerID uint32, delta *wire.HintsPeers) {
	p.mu.Lock()
	var full *wire.HintsPeers
	if joiner != nil {
		full = p.peerList()
		full.You = joinerID
	}
	type to struct {
		c  *wire.Conn
		id uint32
	}
	tos := make([]to, 0, len(p.members))
	for id, mb := range p.members {
		if mb.conn != joiner {
			tos = append(tos, to{mb.conn, id})
		}
	}
	p.mu.Unlock()
	// A client gone meanwhile: its connection's end is handled by left.
	if joiner != nil {
		joiner.Send(full)
	}
	for _, t := range tos {
		m := *delta
		m.You = t.id
		t.c.Send(&m)
	}
}

// fileChanged: a file changed or left the version table (versions.go):
// its last opener's hints name stale copies, and the manager forgets it,
// which bounds its state by the version table. The discard cache's copies
// of the file are dropped when next looked at (read compares versions).
func (p *hintsPolicy) fileChanged(ino uint64) {
	p.mu.Lock()
	p.hs.Forget(ino)
	p.mu.Unlock()
}

func (p *hintsPolicy) memEvicted(block.ID) {}

// read serves a miss from the discard cache when it holds the block at the
// version asked: the master copy moves back to a client (Server.Fetch).
func (p *hintsPolicy) read(_ *wire.Conn, _ *client, _ *wire.ReadBlock, _ *os.File, id block.ID, v uint64, reply *wire.BlockReply) bool {
	p.mu.Lock()
	d, ok := p.discard[id]
	if !ok {
		p.mu.Unlock()
		return false
	}
	fr := p.hs.Fetch(stamp(), id)
	p.mu.Unlock()
	if !fr.Discard || d.version != v {
		return false // stale: dropped by Fetch
	}
	p.discardHits.Add(1)
	reply.Data, reply.Layer = d.data, 0
	p.s.cfg.Metrics.CountRead(obs.LayerServerMemory, len(d.data))
	return true
}

// served: a block read from the export is hashed while its bytes are at
// hand: the client it goes to holds its master copy, which peers will ask
// it for and check against this digest (digest, and the hand-outs on open
// carry the digests known). Reading the block again from the export for
// its digest later would cost a disk read per block where the disk is
// slow (bench replay --disk-latency). Blocks served from memory were
// hashed when they were read.
func (p *hintsPolicy) served(f *os.File, id block.ID, v uint64, data []byte, fromDisk bool) {
	if fromDisk && len(data) > 0 {
		p.s.learnDigest(f, id, v, data)
	}
}

func (p *hintsPolicy) serve(ctx context.Context, c *wire.Conn, cl *client, m wire.Msg) (wire.Msg, error, bool) {
	switch m := m.(type) {
	case *wire.HintsPeers:
		p.mu.Lock()
		defer p.mu.Unlock()
		list := p.peerList()
		list.You = p.hid(cl)
		return list, nil, true
	case *wire.HintsOpen:
		r, err := p.open(ctx, c, cl, m)
		return r, err, true
	case *wire.HintsDiscard:
		p.offered.Add(1)
		b := block.ID{File: m.File, Index: m.Index}
		if why := p.discardable(b, m); why != "" {
			// The discard cache's bytes are served as the server's own:
			// only the file's true bytes at that version enter it.
			p.refused.Add(1)
			p.s.log.Warn("refused a block for the discard cache", "client", c.Name(), "file", m.File,
				"index", m.Index, "version", m.Version, "why", why)
			return nil, nil, true
		}
		p.mu.Lock()
		if p.hs.AcceptDiscard(b, block.Version(m.Version), hints.Time(m.Stamp)) {
			p.discard[b] = discarded{version: m.Version, data: m.Data}
			p.kept.Add(1)
		}
		p.mu.Unlock()
		return nil, nil, true
	case *wire.HintsDigest:
		if m.Handle == 0 {
			r, err := p.digestByCap(m)
			return r, err, true
		}
		r, err := p.digest(c, m)
		return r, err, true
	case *wire.Discard, *wire.Held, *wire.PeerReport:
		return nil, nil, true
	}
	return nil, nil, false
}

// open hands the opener the hints of the file's last opener, asked with
// HintsExport, and the digests the server knows of the hinted blocks.
func (p *hintsPolicy) open(ctx context.Context, c *wire.Conn, cl *client, m *wire.HintsOpen) (*wire.HintsReply, error) {
	of := p.s.handles.get(m.Handle, c)
	if of == nil || cl == nil {
		return nil, fmt.Errorf("hints for unknown handle %d: %w", m.Handle, syscall.EBADF)
	}
	fi, err := of.f.Stat()
	if err != nil {
		return nil, err
	}
	a := p.s.attrOf(fi)
	p.opens.Add(1)
	reply := &wire.HintsReply{Version: a.Version}
	p.mu.Lock()
	me := p.hid(cl)
	if me == 0 {
		p.mu.Unlock()
		return reply, nil
	}
	r := p.hs.Open(stamp(), hints.ClientID(me), hints.BootID(cl.bootID), a.Ino, false)
	from := p.members[uint32(r.HintsFrom)]
	p.mu.Unlock()
	if r.HintsFrom == hints.NoClient || from == nil {
		return reply, nil
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	got, err := from.conn.Call(cctx, &wire.HintsExport{File: a.Ino})
	cancel()
	hr, ok := got.(*wire.HintsReply)
	if err != nil || !ok {
		p.exportFails.Add(1)
		p.mu.Lock()
		p.hs.ClientFailed(r.HintsFrom)
		p.mu.Unlock()
		p.s.log.Warn("last opener did not hand its hints over", "client", r.HintsFrom, "err", err)
		return reply, nil
	}
	p.handouts.Add(1)
	p.hinted.Add(uint64(len(hr.Hints)))
	reply.From, reply.FromBoot, reply.Hints = uint32(r.HintsFrom), uint64(r.HintsBoot), hr.Hints
	for _, h := range hr.Hints {
		if sum, ok := p.s.digests.get(digestKey{a.Ino, a.Version, h.Index}); ok {
			reply.Digests = append(reply.Digests, wire.BlockDigestMsg{Index: h.Index, Digest: sum})
		}
	}
	return reply, nil
}

// discardable says why a block offered to the discard cache may not enter
// it ("" when it may): the sender shows a capability this server issued
// for the file and version (it, or the client that forwarded it the copy,
// could read the file), and the bytes are the block's at that version by
// the server's digest — from its table (every block the server served
// from its export under hints was hashed) or its memory cache. A block
// whose digest is unknown is refused: reading the export to check it
// would cost the disk read the discard cache saves.
func (p *hintsPolicy) discardable(b block.ID, m *wire.HintsDiscard) string {
	if err := p.s.caps.provenance(&m.Cap, m.File, m.Version); err != nil {
		return err.Error()
	}
	sum, ok := p.s.digestKnown(b, m.Version)
	switch {
	case !ok:
		return "the server knows no digest of the block at that version"
	case !wire.DigestMatches(m.Data, sum):
		return "the block's SHA-256 differs from the server's"
	}
	return ""
}

// digestByCap answers a digest question about a file the asker may not
// hold open (a master copy was forwarded to it): it shows a capability
// this server issued for the file and version instead of a handle. Only
// digests known without reading the export are given.
func (p *hintsPolicy) digestByCap(m *wire.HintsDigest) (*wire.HintsDigestRep, error) {
	p.digestRequests.Add(1)
	if err := p.s.caps.provenance(&m.Cap, m.File, m.Version); err != nil {
		return nil, fmt.Errorf("digest of file %d: %w: %w", m.File, err, syscall.EACCES)
	}
	r := &wire.HintsDigestRep{Version: m.Version}
	end := m.Index + uint64(max(1, min(m.Count, MaxDigestRun)))
	for idx := m.Index; idx < end; idx++ {
		if sum, ok := p.s.digestKnown(block.ID{File: m.File, Index: idx}, m.Version); ok {
			r.Digests = append(r.Digests, wire.BlockDigestMsg{Index: idx, Digest: sum})
		}
	}
	return r, nil
}

// MaxDigestRun bounds the blocks one HintsDigest hashes.
const MaxDigestRun = 16

// digest answers a client's question for the digests of a run of blocks (a
// peer served the first, m.Index, and the open's hand-out had no digest
// for it): from the table, else hashed from the server's memory cache or,
// for the first block only, from the export; the others' digests come
// along when known without a read of the export (a client asks again for
// one it still lacks).
func (p *hintsPolicy) digest(c *wire.Conn, m *wire.HintsDigest) (*wire.HintsDigestRep, error) {
	p.digestRequests.Add(1)
	of := p.s.handles.get(m.Handle, c)
	if of == nil {
		return nil, fmt.Errorf("digest for unknown handle %d: %w", m.Handle, syscall.EBADF)
	}
	fi, err := of.f.Stat()
	if err != nil {
		return nil, err
	}
	a := p.s.attrOf(fi)
	if a.Ino != m.File {
		return nil, fmt.Errorf("digest of file %d through a handle of file %d: %w", m.File, a.Ino, syscall.EINVAL)
	}
	r := &wire.HintsDigestRep{Version: a.Version}
	if a.Version != m.Version {
		return r, nil
	}
	bs := uint64(p.s.cfg.BlockSize)
	end := min(m.Index+uint64(max(1, min(m.Count, MaxDigestRun))), (a.Size+bs-1)/bs)
	for idx := m.Index; idx < end; idx++ {
		id := block.ID{File: m.File, Index: idx}
		sum, known := p.s.digestKnown(id, a.Version)
		if !known && idx == m.Index {
			if sum, err = p.s.digestFor(of.f, id, a.Version, a.Size); err != nil {
				break // changed while hashed: the client reads from the server
			}
			known = true
		}
		if known {
			r.Digests = append(r.Digests, wire.BlockDigestMsg{Index: idx, Digest: sum})
		}
	}
	return r, nil
}

var hintsServerMetrics = []struct {
	name, help string
	gauge      bool
}{
	{"coopfs_hints_opens_total", "Opens that asked for the last opener's hints.", false},
	{"coopfs_hints_handouts_total", "Opens handed the last opener's hints.", false},
	{"coopfs_hints_handed_total", "Hints handed out on opens.", false},
	{"coopfs_hints_export_failures_total", "Last openers that did not hand their hints over in time (marked down).", false},
	{"coopfs_hints_discard_offered_total", "Young master copies clients sent to the discard cache.", false},
	{"coopfs_hints_discard_kept_total", "Young master copies the discard cache kept.", false},
	{"coopfs_hints_discard_refused_total", "Blocks refused for the discard cache: no capability of the server's for the file and version, or not the server's digest.", false},
	{"coopfs_hints_discard_cache_hits_total", "Misses served from the discard cache.", false},
	{"coopfs_hints_discard_cache_blocks", "Blocks in the discard cache.", true},
	{"coopfs_hints_digest_requests_total", "Digests clients asked for to check a peer's block.", false},
}

func (p *hintsPolicy) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range hintsServerMetrics {
		ch <- prometheus.NewDesc(m.name, m.help, nil, nil)
	}
}

func (p *hintsPolicy) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	n := p.hs.MemoryLen()
	p.mu.Unlock()
	vals := []float64{float64(p.opens.Load()), float64(p.handouts.Load()), float64(p.hinted.Load()),
		float64(p.exportFails.Load()), float64(p.offered.Load()), float64(p.kept.Load()), float64(p.refused.Load()),
		float64(p.discardHits.Load()), float64(n), float64(p.digestRequests.Load())}
	for i, m := range hintsServerMetrics {
		t := prometheus.CounterValue
		if m.gauge {
			t = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(m.name, m.help, nil, nil), t, vals[i])
	}
}
