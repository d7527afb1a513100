package server

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/wholefile"
	"github.com/coopfs/coopfs/internal/wire"
)

// wholeFilePolicy is the server's part of the `wholefile` policy (seed
// 001, C2Cfs): per file a commit counter and a valid-cache map, kept by the
// state machine internal/coord/wholefile.Server, handed to openers
// (WholeOpen) with the peer listeners of the holders and the SHA-256 of
// every block of the current version, which the opener checks the
// holders' blocks against. Data moves from client to client; the server
// serves only what no holder has.
//
// Counters survive a restart safely: they start at the server's boot id
// (nanoseconds at start), so a counter handed out before a restart never
// equals one after it. Every entry of the map is tied to the file's data
// version, which names one content for good (versions.go: derived from the
// file's stat, the same after a restart while the file is unchanged). A
// restarted server starts with empty maps; clients rejoin them as they
// open files they hold whole at the current version.
type wholeFilePolicy struct {
	s *Server

	mu      sync.Mutex
	ws      *wholefile.Server
	members map[uint32]string // connected clients with a peer listener: id → listener

	hashing chan struct{} // the background hasher's slot (hashAhead)

	opens, handouts, partialHandouts, haves, commits, validCommits, drops, digestRequests atomic.Uint64
}

func newWholeFilePolicy(s *Server) (policy, error) {
	s.digests = newDigests(DefaultDigestEntries)
	ws, err := wholefile.NewServer(wholefile.Config{Epoch: s.bootID})
	if err != nil {
		return nil, err
	}
	p := &wholeFilePolicy{s: s, ws: ws, members: make(map[uint32]string), hashing: make(chan struct{}, 1)}
	if err := s.cfg.Metrics.Register(p); err != nil {
		return nil, fmt.Errorf("register wholefile metrics: %w", err)
	}
	return p, nil
}

func (p *wholeFilePolicy) joined(cl *client, _ *wire.Conn) {
	if cl.listen == "" {
		return // not a peer: it reads through the server only
	}
	p.mu.Lock()
	p.members[cl.id] = cl.listen
	p.mu.Unlock()
}

func (p *wholeFilePolicy) left(cl *client) {
	p.mu.Lock()
	delete(p.members, cl.id)
	p.ws.Left(wholefile.ClientID(cl.id))
	p.mu.Unlock()
}

// fileChanged: the file has a new version (or left the version table):
// the map and the fetchers of any other version empty. The version table
// says which version is current now: the call comes after the change, and
// a commit at the new version may have made its map in between (under a
// load that delays this call past the writer's close), which stands.
func (p *wholeFilePolicy) fileChanged(ino uint64) {
	v := p.s.versions.current(ino)
	p.mu.Lock()
	p.ws.Changed(ino, v)
	p.mu.Unlock()
}

func (p *wholeFilePolicy) memEvicted(block.ID) {}
func (p *wholeFilePolicy) read(*wire.Conn, *client, *wire.ReadBlock, *os.File, block.ID, uint64, *wire.BlockReply) bool {
	return false
}
func (p *wholeFilePolicy) served(*os.File, block.ID, uint64, []byte, bool) {}

func (p *wholeFilePolicy) serve(_ context.Context, c *wire.Conn, cl *client, m wire.Msg) (wire.Msg, error, bool) {
	switch m := m.(type) {
	case *wire.WholeOpen:
		r, err := p.open(c, cl, m)
		return r, err, true
	case *wire.WholeCommit:
		r, err := p.commit(c, cl, m)
		return r, err, true
	case *wire.WholeDigests:
		r, err := p.digests(c, m)
		return r, err, true
	case *wire.WholeHave:
		// Answered (OK) once the map has the client: an opener after the
		// client's close finds it.
		if cl != nil {
			p.mu.Lock()
			joined := p.ws.Have(wholefile.ClientID(cl.id), m.File, m.Version)
			p.mu.Unlock()
			if joined {
				p.haves.Add(1)
				p.hashAhead(c, m)
			}
		}
		return nil, nil, true
	case *wire.WholeDrop:
		if cl != nil {
			p.drops.Add(1)
			p.mu.Lock()
			p.ws.Dropped(wholefile.ClientID(cl.id), m.File)
			p.mu.Unlock()
		}
		return nil, nil, true
	case *wire.Discard, *wire.Held, *wire.PeerReport, *wire.HintsDiscard:
		return nil, nil, true // one-way notes of another policy: nothing to do
	}
	return nil, nil, false
}

// attrOfHandle is the current attributes of the file open as h on c.
func (p *wholeFilePolicy) attrOfHandle(c *wire.Conn, h, file uint64) (*openFile, wire.Attr, error) {
	of := p.s.handles.get(h, c)
	if of == nil {
		return nil, wire.Attr{}, fmt.Errorf("wholefile: unknown handle %d: %w", h, syscall.EBADF)
	}
	fi, err := of.f.Stat()
	if err != nil {
		return nil, wire.Attr{}, err
	}
	a := p.s.attrOf(fi)
	if a.Ino != file {
		return nil, wire.Attr{}, fmt.Errorf("wholefile: file %d through a handle of file %d: %w", file, a.Ino, syscall.EINVAL)
	}
	return of, a, nil
}

// open hands an opener the counter, the holders and the fetchers of the
// current version with the digests of its first blocks; a client whose
// copy is current (Have, at the version the server has) joins the
// holders, and one that reads without a current copy joins the fetchers.
func (p *wholeFilePolicy) open(c *wire.Conn, cl *client, m *wire.WholeOpen) (*wire.WholeOpenReply, error) {
	of, a, err := p.attrOfHandle(c, m.Handle, m.File)
	if err != nil || cl == nil {
		return nil, err
	}
	p.opens.Add(1)
	p.mu.Lock()
	_, peer := p.members[cl.id]
	have := peer && m.Have && m.Version == a.Version
	id := wholefile.ClientID(cl.id)
	r := p.ws.Open(id, a.Ino, a.Version, have)
	if peer && !have && !m.NoData && m.Version == a.Version {
		p.ws.Fetching(id, a.Ino, a.Version)
	}
	reply := &wire.WholeOpenReply{Version: a.Version, Commit: r.Commit}
	if !m.NoData {
		reply.Holders = p.listeners(r.Holders)
		reply.Fetchers = p.listeners(r.Fetchers)
	}
	p.mu.Unlock()
	if len(reply.Holders)+len(reply.Fetchers) == 0 {
		return reply, nil
	}
	reply.Digests = p.digestRun(of, a, 0, WholeDigestPage)
	if reply.Digests == nil {
		// Changed while hashed: the holders hold an older version now.
		reply.Holders, reply.Fetchers = nil, nil
		return reply, nil
	}
	p.handouts.Add(1)
	if len(reply.Holders) == 0 {
		p.partialHandouts.Add(1)
	}
	return reply, nil
}

// listeners names clients by their peer listeners (p.mu held).
func (p *wholeFilePolicy) listeners(ids []wholefile.ClientID) []wire.WholeHolder {
	var out []wire.WholeHolder
	for _, h := range ids {
		if addr, ok := p.members[uint32(h)]; ok {
			out = append(out, wire.WholeHolder{ID: uint32(h), Listen: addr})
		}
	}
	return out
}

// digestRun returns the digests of count blocks of the file open as of
// (attributes a) from block first on, up to its end; nil when the file
// changed while they were hashed (none at all when first is past the end:
// an empty, non-nil run).
func (p *wholeFilePolicy) digestRun(of *openFile, a wire.Attr, first, count uint64) []wire.BlockDigestMsg {
	bs := uint64(p.s.cfg.BlockSize)
	end := min((a.Size+bs-1)/bs, first+count)
	out := make([]wire.BlockDigestMsg, 0, end-min(first, end))
	for idx := first; idx < end; idx++ {
		sum, err := p.s.digestFor(of.f, block.ID{File: a.Ino, Index: idx}, a.Version, a.Size)
		if err != nil {
			return nil
		}
		out = append(out, wire.BlockDigestMsg{Index: idx, Digest: sum})
	}
	return out
}

// digests answers a fetcher's WholeDigests: the digests of a run of blocks
// of the version it fetches, or none when the file has another version
// now (it then reads from the server).
func (p *wholeFilePolicy) digests(c *wire.Conn, m *wire.WholeDigests) (*wire.WholeDigestsRep, error) {
	of, a, err := p.attrOfHandle(c, m.Handle, m.File)
	if err != nil {
		return nil, err
	}
	p.digestRequests.Add(1)
	r := &wire.WholeDigestsRep{Version: a.Version}
	if a.Version != m.Version {
		return r, nil
	}
	if r.Digests = p.digestRun(of, a, m.Index, uint64(max(1, min(m.Count, MaxWholeDigestRun)))); r.Digests == nil {
		r.Version = 0 // changed while hashed
	}
	return r, nil
}

// WholeDigestPage is how many blocks' digests an open's reply carries (a
// file of up to 64 blocks needs no more; hashing more would delay the
// open's reply, and the fetch's start, by what it costs); a fetch asks for
// the others (WholeDigests) as it goes. MaxWholeDigestRun bounds one
// WholeDigests.
const (
	WholeDigestPage   = 64
	MaxWholeDigestRun = 4096
)

// hashAhead hashes the blocks of a file a client just joined the map of,
// through its handle, in the background, so that the next opener's reply
// finds the digests in the table. One file at a time; a busy hasher skips
// (the next open hashes what is missing).
func (p *wholeFilePolicy) hashAhead(c *wire.Conn, m *wire.WholeHave) {
	of := p.s.handles.get(m.Handle, c)
	if m.Handle == 0 || of == nil {
		return
	}
	select {
	case p.hashing <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-p.hashing }()
		fi, err := of.f.Stat()
		if err != nil {
			return
		}
		a := p.s.attrOf(fi)
		bs := uint64(p.s.cfg.BlockSize)
		n := (a.Size + bs - 1) / bs
		if a.Ino != m.File || a.Version != m.Version {
			return
		}
		for idx := uint64(0); idx < n; idx++ {
			if _, err := p.s.digestFor(of.f, block.ID{File: a.Ino, Index: idx}, a.Version, a.Size); err != nil {
				return // changed, or the handle was released meanwhile
			}
		}
	}()
}

// commit is a close after writes: the counter grows, and the closer is the
// map if no one committed since its open and it holds the version the
// server has now whole.
func (p *wholeFilePolicy) commit(c *wire.Conn, cl *client, m *wire.WholeCommit) (*wire.WholeCommitRep, error) {
	_, a, err := p.attrOfHandle(c, m.Handle, m.File)
	if err != nil || cl == nil {
		return nil, err
	}
	p.mu.Lock()
	_, peer := p.members[cl.id]
	r := p.ws.Commit(wholefile.ClientID(cl.id), a.Ino, m.Opened, a.Version, peer && m.Whole && m.Version == a.Version)
	p.mu.Unlock()
	p.commits.Add(1)
	if r.Valid {
		p.validCommits.Add(1)
	}
	return &wire.WholeCommitRep{Commit: r.Commit, Valid: r.Valid}, nil
}

var wholeFileServerMetrics = []struct{ name, help string }{
	{"coopfs_wholefile_opens_total", "Opens that asked for a file's commit counter and valid-cache map."},
	{"coopfs_wholefile_handouts_total", "Opens handed holders or fetchers of the current version (with the digests of its first blocks)."},
	{"coopfs_wholefile_partial_handouts_total", "Opens handed only fetchers of the current version (clients whose copy is still arriving)."},
	{"coopfs_wholefile_haves_total", "Clients that joined a valid-cache map after fetching a file whole."},
	{"coopfs_wholefile_commits_total", "Closes after writes (the commit counter grew)."},
	{"coopfs_wholefile_valid_commits_total", "Commits that left the closer as the only holder (no commit since its open)."},
	{"coopfs_wholefile_drops_total", "Clients that left a valid-cache map or the fetchers (their copy is no longer whole, or they stopped reading)."},
	{"coopfs_wholefile_digest_requests_total", "WholeDigests requests: digests of blocks past an open's first page."},
}

func (p *wholeFilePolicy) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range wholeFileServerMetrics {
		ch <- prometheus.NewDesc(m.name, m.help, nil, nil)
	}
	ch <- prometheus.NewDesc("coopfs_wholefile_files", "Files whose counter and map the server tracks.", nil, nil)
}

func (p *wholeFilePolicy) Collect(ch chan<- prometheus.Metric) {
	vals := []uint64{p.opens.Load(), p.handouts.Load(), p.partialHandouts.Load(), p.haves.Load(), p.commits.Load(),
		p.validCommits.Load(), p.drops.Load(), p.digestRequests.Load()}
	for i, m := range wholeFileServerMetrics {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(m.name, m.help, nil, nil), prometheus.CounterValue, float64(vals[i]))
	}
	p.mu.Lock()
	n := p.ws.Len()
	p.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("coopfs_wholefile_files", "Files whose counter and map the server tracks.", nil, nil),
		prometheus.GaugeValue, float64(n))
}
