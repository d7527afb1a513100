package agent_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/server/servertest"
	"github.com/coopfs/coopfs/internal/wire"
)

// Scenario tests of the live `hints` policy (seed 002): real server, real
// agents, real TCP on loopback. Blocks are 4 KiB.

const hbs = 4096

func startPolicyServer(t *testing.T, export, policy string, m *obs.Metrics, discard int64) string {
	t.Helper()
	return servertest.Serve(t, server.Config{Export: export, BlockSize: hbs, Policy: policy, Metrics: m,
		Squash: server.SquashNone, DiscardCacheSize: discard})
}

// hintsAgent is one client under test.
type hintsAgent struct {
	*agent.Agent
	m      *obs.Metrics
	listen string
	closed bool // close ran (wholefile_test.go restarts agents)
}

// freeAddr returns a loopback address nobody listens on (a client's fixed
// peer listener, so that a restart keeps its identity).
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func newHintsAgent(t *testing.T, addr, policy string, cacheBlocks int, listen string) *hintsAgent {
	t.Helper()
	if listen == "" {
		listen = freeAddr(t)
	}
	m := obs.NewMetrics()
	cfg := agent.Config{Server: addr, Policy: policy, Metrics: m, CacheSize: int64(cacheBlocks * hbs),
		Listen: listen, ReadAhead: 1, ForwardTimeout: 2 * time.Second, ReconnectTimeout: time.Second, WarmupAccept: true}
	if policy == "wholefile" {
		// Whole files live in the disk tier; the tests' files are small.
		cfg.Disk, cfg.WholeFileMinSize = agent.DiskConfig{Dir: t.TempDir(), Size: 1 << 20}, -1
		cfg.ForwardTimeout = 30 * time.Second // a slow holder on a loaded machine is not a failed one
	}
	a, err := agent.New(asRoot(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return &hintsAgent{Agent: a, m: m, listen: listen}
}

func (h *hintsAgent) count(t *testing.T, name string) float64 {
	t.Helper()
	return scrape(t, h.m).Sum(name, nil)
}

func (h *hintsAgent) layer(t *testing.T, layer string) float64 {
	t.Helper()
	return scrape(t, h.m).Sum(obs.MetricReads, map[string]string{"layer": layer})
}

func (h *hintsAgent) mustRead(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := readAll(asRoot(), h.Agent, path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %s: %d bytes (want %d), equal %v, err %v", path, len(got), len(want), bytes.Equal(got, want), err)
	}
}

// waitFor polls cond for up to 5 s (asynchronous forwards and lists).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func writeExport(t *testing.T, export, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(export, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A reader's misses go straight to the holder its hints name: the last
// opener's master copies. The server serves none of the second reader's
// blocks.
func TestHintsFollowed(t *testing.T) {
	export := t.TempDir()
	data := pattern(16*hbs, 1)
	writeExport(t, export, "f", data)
	sm := obs.NewMetrics()
	addr := startPolicyServer(t, export, "hints", sm, 0)
	a := newHintsAgent(t, addr, "hints", 64, "")
	b := newHintsAgent(t, addr, "hints", 64, "")
	a.mustRead(t, "f", data)
	b.mustRead(t, "f", data)
	if n := b.layer(t, obs.LayerPeer); n != 16 {
		t.Errorf("second reader: %v blocks from the peer, want 16", n)
	}
	if n := b.layer(t, obs.LayerServerDisk) + b.layer(t, obs.LayerServerMemory); n != 0 {
		t.Errorf("second reader: %v blocks from the server, want 0", n)
	}
	if hits, lookups := b.count(t, "coopfs_hints_hint_hits_total"), b.count(t, "coopfs_hints_lookups_total"); hits != 16 || lookups != 16 {
		t.Errorf("hint hits %v of %v lookups, want 16 of 16", hits, lookups)
	}
	if n := b.count(t, "coopfs_hints_lookup_messages_total") / b.count(t, "coopfs_hints_misses_total"); n != 2 {
		t.Errorf("%v lookup messages per miss, want 2", n)
	}
	if n := b.count(t, "coopfs_hints_digest_requests_total"); n != 0 {
		t.Errorf("second reader asked for digests %v times, want 0 (the server hashed the master copies as it served them; the hand-out carries the digests)", n)
	}
	// A third reader gets the second's hints (naming the first client, the
	// holder of the master copies) and the digests with them.
	c := newHintsAgent(t, addr, "hints", 64, "")
	c.mustRead(t, "f", data)
	if n := c.layer(t, obs.LayerPeer); n != 16 {
		t.Errorf("third reader: %v blocks from a peer, want 16", n)
	}
	if n := c.count(t, "coopfs_hints_digest_requests_total"); n != 0 {
		t.Errorf("third reader asked for digests %v times; the hand-out carries them", n)
	}
	if n := scrape(t, sm).Sum("coopfs_hints_handouts_total", nil); n != 2 {
		t.Errorf("server handed hints out %v times, want 2 (the second and third opens)", n)
	}
}

// A hint that names a holder which no longer has the block, nor a hint for
// it: the holder sends the requester to the server.
func TestHintsStale(t *testing.T) {
	export := t.TempDir()
	f1, f2 := pattern(4*hbs, 2), pattern(4*hbs, 3)
	writeExport(t, export, "f", f1)
	addr := startPolicyServer(t, export, "hints", obs.NewMetrics(), 0)
	a := newHintsAgent(t, addr, "hints", 64, "")
	b := newHintsAgent(t, addr, "hints", 64, "")
	a.mustRead(t, "f", f1)
	// The file changes behind the cluster's back; a reopens it, drops its
	// copies of the old version and reads none of the new one.
	writeExport(t, export, "f", f2)
	h, _, err := a.Open(asRoot(), "f", 0)
	if err != nil {
		t.Fatal(err)
	}
	h.Release(asRoot())
	b.mustRead(t, "f", f2) // b's hints (from a, the last opener) name a
	if n := b.count(t, "coopfs_hints_hint_hits_total"); n != 0 {
		t.Errorf("%v hint hits on stale hints", n)
	}
	if n := b.layer(t, obs.LayerServerDisk) + b.layer(t, obs.LayerServerMemory); n != 4 {
		t.Errorf("%v blocks from the server, want all 4", n)
	}
}

// A file that changes while hinted: b holds hints (from a's open) that
// name a's copies of the old version. Reopened, b sees the new version and
// drops its blocks and hints of the old one; the server, which saw the
// change, forgets the file's last opener, so b gets no hints to stale
// copies either and reads the new version from the server. Nobody is
// served a block of the old version.
func TestHintsFileChangedWhileHinted(t *testing.T) {
	export := t.TempDir()
	f1, f2 := pattern(4*hbs, 4), pattern(4*hbs, 5)
	writeExport(t, export, "f", f1)
	sm := obs.NewMetrics()
	addr := startPolicyServer(t, export, "hints", sm, 0)
	a := newHintsAgent(t, addr, "hints", 64, "")
	b := newHintsAgent(t, addr, "hints", 64, "")
	c := newHintsAgent(t, addr, "hints", 64, "")
	a.mustRead(t, "f", f1)
	fb, _, err := b.Open(asRoot(), "f", 0) // hinted: a holds the blocks of f1
	if err != nil {
		t.Fatal(err)
	}
	fb.Release(asRoot())
	time.Sleep(10 * time.Millisecond) // a distinct mtime
	writeExport(t, export, "f", f2)
	b.mustRead(t, "f", f2)
	c.mustRead(t, "f", f2)
	if n := b.layer(t, obs.LayerPeer); n != 0 {
		t.Errorf("b: %v blocks served by a peer after the change", n)
	}
	if n := a.count(t, "coopfs_hints_lookups_served_total"); n != 0 {
		t.Errorf("the holder of the old version was asked %v times", n)
	}
	// c opened after b's reopen: b is the last opener, with master copies
	// of the new version, which c reads from it.
	if n := c.layer(t, obs.LayerPeer); n != 4 {
		t.Errorf("c: %v of 4 blocks from b", n)
	}
	for _, x := range []*hintsAgent{b, c} {
		if n := x.count(t, "coopfs_hints_bad_blocks_total"); n != 0 {
			t.Errorf("%v bad blocks", n)
		}
	}
	if n := scrape(t, sm).Sum("coopfs_hints_handouts_total", nil); n != 2 {
		t.Errorf("%v hint hand-outs, want 2 (b's open before the change, c's from b after it)", n)
	}
}

// A holder whose peer listener is gone (the server has not noticed): the
// lookup fails, the holder is marked failed, the server serves the block,
// and later misses skip the dead holder.
func TestHintsHolderDead(t *testing.T) {
	export := t.TempDir()
	data := pattern(4*hbs, 6)
	writeExport(t, export, "f", data)
	addr := startPolicyServer(t, export, "hints", obs.NewMetrics(), 0)
	a := newHintsAgent(t, addr, "hints", 64, "")
	b := newHintsAgent(t, addr, "hints", 64, "")
	a.mustRead(t, "f", data)
	agent.ClosePeerListener(a.Agent)
	b.mustRead(t, "f", data)
	if n := b.count(t, "coopfs_hints_holder_failures_total"); n != 1 {
		t.Errorf("%v holder failures, want 1 (then the holder is skipped)", n)
	}
	if n := b.layer(t, obs.LayerServerDisk) + b.layer(t, obs.LayerServerMemory); n != 4 {
		t.Errorf("%v blocks from the server, want 4", n)
	}
}

// A holder that restarted (same peer listener, new boot id) has an empty
// cache: hints naming its old life are dropped without asking it.
func TestHintsBootIDChanged(t *testing.T) {
	export := t.TempDir()
	data := pattern(4*hbs, 7)
	writeExport(t, export, "f", data)
	addr := startPolicyServer(t, export, "hints", obs.NewMetrics(), 0)
	a := newHintsAgent(t, addr, "hints", 64, "")
	b := newHintsAgent(t, addr, "hints", 64, "")
	a.mustRead(t, "f", data)
	// b opens f now: it gets a's hints (a's first life).
	fb, _, err := b.Open(asRoot(), "f", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Release(asRoot())
	a.Close()
	time.Sleep(2 * time.Millisecond) // boot ids are start times in ns
	a2 := newHintsAgent(t, addr, "hints", 64, a.listen)
	waitFor(t, "the restarted client to rejoin", func() bool { return agent.HintsPeerBoot(b.Agent, a.listen) == agent.BootID(a2.Agent) })
	buf := make([]byte, len(data))
	if n, err := fb.ReadAt(asRoot(), buf, 0); err != nil || !bytes.Equal(buf[:n], data) {
		t.Fatalf("read after the holder restarted: %d bytes, %v", n, err)
	}
	if n := a2.count(t, "coopfs_hints_lookups_served_total"); n != 0 {
		t.Errorf("the restarted holder was asked %v times on hints of its old life", n)
	}
	if n := b.count(t, "coopfs_hints_stale_total"); n < 1 {
		t.Errorf("no stale hint dropped (%v)", n)
	}
}

// Best-guess replacement: a client whose cache is full forwards its
// evicted master copies to the peer its oldest-block list says has the
// oldest block — an idle peer with free memory rather than a busy one —
// and the two exchange ages. A later reader finds the forwarded blocks
// there through the hints.
func TestHintsForwardToOldestBlockPeer(t *testing.T) {
	export := t.TempDir()
	g, f := pattern(4*hbs, 8), pattern(8*hbs, 9)
	writeExport(t, export, "g", g)
	writeExport(t, export, "f", f)
	addr := startPolicyServer(t, export, "hints", obs.NewMetrics(), 0)
	busy := newHintsAgent(t, addr, "hints", 4, "") // full of g: its oldest block is old
	idle := newHintsAgent(t, addr, "hints", 64, "")
	a := newHintsAgent(t, addr, "hints", 4, "")
	reader := newHintsAgent(t, addr, "hints", 64, "")
	busy.mustRead(t, "g", g)
	// a reads f backwards, one block at a time (no read-ahead), and each
	// forward completes (the ack carries the age exchange) before the next
	// eviction: blocks 7, 6, 5 and 4 fill its cache; 3, 2 and 1 evict 7, 6
	// and 5. The first guess is the first peer (all are believed free);
	// busy's answer says its oldest block is old, idle's says free memory.
	fa, _, err := a.Open(asRoot(), "f", 0)
	if err != nil {
		t.Fatal(err)
	}
	for idx := 7; idx >= 1; idx-- {
		buf := make([]byte, hbs)
		if n, err := fa.ReadAt(asRoot(), buf, int64(idx*hbs)); err != nil || !bytes.Equal(buf[:n], f[idx*hbs:(idx+1)*hbs]) {
			t.Fatalf("block %d: %d bytes, %v", idx, n, err)
		}
		if want := float64(max(0, 4-idx)); want > 0 {
			waitFor(t, "the forward", func() bool {
				return a.count(t, "coopfs_hints_forwards_total")+a.count(t, "coopfs_hints_forward_failures_total") >= want
			})
		}
	}
	fa.Release(asRoot())
	toBusy, toIdle := busy.count(t, "coopfs_hints_forwards_received_total"), idle.count(t, "coopfs_hints_forwards_received_total")
	if toBusy != 1 || toIdle != 2 {
		t.Errorf("forwards: %v to the busy peer, %v to the idle one; want 1 (the first guess) and 2 (free memory)", toBusy, toIdle)
	}
	reader.mustRead(t, "f", f)
	if n := reader.layer(t, obs.LayerPeer); n != 7 {
		t.Errorf("reader: %v of 8 blocks from peers, want 7 (the forwarded ones from their new holders; a never read block 0)", n)
	}
}

// The discard cache: a forward makes its target evict a master copy that
// the pessimistic test finds young (a peer is believed to hold an older
// block); it goes to the server's memory, and a later miss of it is served
// from there.
func TestHintsDiscardCacheHit(t *testing.T) {
	export := t.TempDir()
	qf, tf, pf := pattern(2*hbs, 10), pattern(3*hbs, 11), pattern(3*hbs, 12)
	writeExport(t, export, "q", qf)
	writeExport(t, export, "t", tf)
	writeExport(t, export, "p", pf)
	sm := obs.NewMetrics()
	addr := startPolicyServer(t, export, "hints", sm, 1<<20)
	// Ids follow the join order: T < Q < P, so that T's first guess is Q
	// and P's is T.
	tc := newHintsAgent(t, addr, "hints", 2, "")
	q := newHintsAgent(t, addr, "hints", 2, "")
	p := newHintsAgent(t, addr, "hints", 2, "")
	q.mustRead(t, "q", qf)  // Q: the oldest blocks of the cluster
	tc.mustRead(t, "t", tf) // T evicts one master copy to Q, learns Q's (old) oldest block
	waitFor(t, "T's forward", func() bool { return tc.count(t, "coopfs_hints_forwards_total") >= 1 })
	p.mustRead(t, "p", pf) // P evicts one to T: T's victim is young by the pessimistic test
	waitFor(t, "P's forward", func() bool { return p.count(t, "coopfs_hints_forwards_total") >= 1 })
	waitFor(t, "the discard", func() bool { return scrape(t, sm).Sum("coopfs_hints_discard_kept_total", nil) >= 1 })
	r := newHintsAgent(t, addr, "hints", 64, "")
	r.mustRead(t, "t", tf)
	if n := scrape(t, sm).Sum("coopfs_hints_discard_cache_hits_total", nil); n != 1 {
		t.Errorf("%v discard cache hits, want 1", n)
	}
	if n := r.layer(t, obs.LayerServerMemory); n < 1 {
		t.Errorf("the reader counted %v reads from server memory", n)
	}
}

// A member that serves wrong bytes: a raw client joins, opens the file
// (becoming its last opener), hands out hints naming itself for every
// block and answers lookups with garbage. The reader drops every such block
// (it fails the server's SHA-256), reads it from the server, ignores the
// liar from then on, and gets the export's bytes.
func TestHintsPeerServingWrongBytes(t *testing.T) {
	export := t.TempDir()
	data := pattern(4*hbs, 13)
	writeExport(t, export, "f", data)
	addr := startPolicyServer(t, export, "hints", obs.NewMetrics(), 0)
	ctx := asRoot()
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	sec := wire.MustSecurity(wire.SecurityConfig{Insecure: true})
	liar := func(ctx context.Context, c *wire.Conn, m wire.Msg) (wire.Msg, error) {
		switch m := m.(type) {
		case *wire.HintsExport:
			r := &wire.HintsReply{}
			for i := uint64(0); i < 4; i++ {
				r.Hints = append(r.Hints, wire.BlockHintMsg{Index: i, Holder: 1, Boot: 1, Since: 1})
			}
			return r, nil
		case *wire.HintsRead:
			return &wire.HintsBlock{Kind: wire.HintsHere, Version: m.Version, Master: true, Holder: 1, Boot: 1,
				Data: bytes.Repeat([]byte{0xee}, hbs)}, nil
		}
		return nil, nil
	}
	go func() { // the liar's peer listener
		for {
			nc, err := pl.Accept()
			if err != nil {
				return
			}
			go func() {
				hs, err := wire.ServerHandshake(nc, sec, wire.HelloReply{BlockSize: hbs, Policy: "hints"},
					func(*wire.Handshake) (wire.Welcome, error) { return wire.Welcome{}, nil })
				if err != nil {
					nc.Close()
					return
				}
				c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Handler: wire.HandlerFunc(liar)})
				<-c.Done()
			}()
		}
	}()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := wire.ClientHandshake(ctx, nc, sec, "", wire.Hello{Role: wire.RoleClient, Name: "liar",
		BootID: 1, Listen: pl.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	conn := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Handler: wire.HandlerFunc(liar)})
	defer conn.Close()
	r, err := conn.Call(ctx, &wire.Open{Path: "f"})
	if err != nil {
		t.Fatal(err)
	}
	or := r.(*wire.OpenReply)
	if _, err := conn.Call(ctx, &wire.HintsOpen{Handle: or.Handle, File: or.Attr.Ino, Version: or.Attr.Version}); err != nil {
		t.Fatal(err)
	}
	b := newHintsAgent(t, addr, "hints", 64, "")
	b.mustRead(t, "f", data)
	if n := b.count(t, "coopfs_hints_bad_blocks_total"); n != 1 {
		t.Errorf("%v bad blocks dropped, want 1 (then the liar is ignored)", n)
	}
	if n := b.count(t, "coopfs_hints_stale_total"); n != 3 {
		t.Errorf("%v hints naming the liar dropped, want 3", n)
	}
	if n := b.layer(t, obs.LayerPeer); n != 0 {
		t.Errorf("%v blocks admitted from the liar", n)
	}
}

// A client that missed membership changes (here: it forgot its peers and
// the changes it had heard of) finds out at the next change, whose number
// is not the one after its own, and asks the server for the whole list: it
// knows every peer again, not only the one the change names.
func TestHintsMissedChangeAsksForTheList(t *testing.T) {
	export := t.TempDir()
	addr := startPolicyServer(t, export, "hints", obs.NewMetrics(), 0)
	a := newHintsAgent(t, addr, "hints", 4, "")
	b := newHintsAgent(t, addr, "hints", 4, "")
	waitFor(t, "a to know b", func() bool { return agent.HintsPeerBoot(a.Agent, b.listen) != 0 })
	agent.ForgetHintsPeers(a.Agent)
	c := newHintsAgent(t, addr, "hints", 4, "")
	waitFor(t, "a to know b and c again", func() bool {
		return agent.HintsPeerBoot(a.Agent, b.listen) != 0 && agent.HintsPeerBoot(a.Agent, c.listen) != 0
	})
}
