package agent_test

import (
	"bytes"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/obs"
)

// wholeServer starts a wholefile server on a new export holding data as
// "f": its address, the export and the server's metrics.
func wholeServer(t *testing.T, data []byte) (addr, export string, sm *obs.Metrics) {
	t.Helper()
	export, sm = t.TempDir(), obs.NewMetrics()
	writeExport(t, export, "f", data)
	return startPolicyServer(t, export, "wholefile", sm, 0), export, sm
}

// newWholeAgent mounts (without FUSE) a client of a wholefile server with
// a disk tier in disk and a memory tier of 8 blocks (files live on disk),
// every file whole (no minimum size).
//
// Its forward timeout is long: a holder slowed down by a loaded machine
// must not count as failed (the tests check where the bytes came from).
func newWholeAgent(t *testing.T, addr, disk, listen string) *hintsAgent {
	return newWholeAgentTimeout(t, addr, disk, listen, 30*time.Second)
}

// newWholeAgentTimeout is newWholeAgent with the forward timeout given.
func newWholeAgentTimeout(t *testing.T, addr, disk, listen string, timeout time.Duration) *hintsAgent {
	t.Helper()
	if listen == "" {
		listen = freeAddr(t)
	}
	m := obs.NewMetrics()
	a, err := agent.New(asRoot(), agent.Config{Server: addr, Policy: "wholefile", Metrics: m, CacheSize: 8 * hbs,
		Listen: listen, ReadAhead: 1, ForwardTimeout: timeout, ReconnectTimeout: time.Second,
		Disk: agent.DiskConfig{Dir: disk, Size: 16 << 20}, WholeFileMinSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := &hintsAgent{Agent: a, m: m, listen: listen}
	t.Cleanup(func() { h.close() })
	return h
}

func (h *hintsAgent) close() {
	if !h.closed {
		h.closed = true
		h.Agent.Close()
	}
}

func (h *hintsAgent) serverReads(t *testing.T) float64 {
	return h.layer(t, obs.LayerServerDisk) + h.layer(t, obs.LayerServerMemory)
}

func (h *hintsAgent) attr(t *testing.T, path string) (ino, version uint64) {
	t.Helper()
	at, err := h.Lookup(asRoot(), path)
	if err != nil {
		t.Fatal(err)
	}
	return at.Ino, at.Version
}

// TestWholeFileStaggered: staggered readers; the first reads from the
// server and becomes a holder, a reopen is a whole-file hit, and the later
// readers fetch the whole file from the holders without the server.
func TestWholeFileStaggered(t *testing.T) {
	data := pattern(32*hbs+100, 3)
	addr, _, sm := wholeServer(t, data)
	c0 := newWholeAgent(t, addr, t.TempDir(), "")
	c0.mustRead(t, "f", data)
	before := c0.serverReads(t)
	c0.mustRead(t, "f", data)
	if c0.count(t, "coopfs_wholefile_hits_total") != 1 || c0.serverReads(t) != before {
		t.Errorf("reopen: %v hits, server reads %v → %v", c0.count(t, "coopfs_wholefile_hits_total"), before, c0.serverReads(t))
	}
	for i := 1; i <= 3; i++ {
		c := newWholeAgent(t, addr, t.TempDir(), "")
		c.mustRead(t, "f", data)
		if n := c.serverReads(t); n != 0 {
			t.Errorf("reader %d: %v reads from the server, want none", i, n)
		}
		if c.count(t, "coopfs_wholefile_segments_total") == 0 || c.layer(t, obs.LayerPeer) == 0 {
			t.Errorf("reader %d fetched nothing from holders", i)
		}
	}
	if got := scrape(t, sm).Sum("coopfs_wholefile_haves_total", nil); got != 4 {
		t.Errorf("server: %v clients joined the map, want 4", got)
	}
}

// TestWholeFileFailingPeer: a holder that lost blocks in the middle of
// the file (a holder failing mid-segment), one whose copy is corrupt, and
// holders whose peer side is dead: the reader always gets the right bytes.
// Which chunks go to which holder depends on scheduling, so each step
// checks only what holds under any schedule: with a good holder beside the
// failing one, nothing comes from the server; with the failing one alone,
// it is certain to fail and the server serves the rest.
func TestWholeFileFailingPeer(t *testing.T) {
	data := pattern(64*hbs, 4)
	addr, _, _ := wholeServer(t, data)
	c0 := newWholeAgent(t, addr, t.TempDir(), "")
	c1 := newWholeAgent(t, addr, t.TempDir(), "")
	c0.mustRead(t, "f", data)
	c1.mustRead(t, "f", data)
	ino, v := c1.attr(t, "f")
	for _, idx := range []uint64{12, 44} {
		agent.WholeFileTamper(c1.Agent, ino, v, idx, true)
	}

	// A good holder beside the failing one takes over whatever it failed.
	c2 := newWholeAgent(t, addr, t.TempDir(), "")
	c2.mustRead(t, "f", data)
	if c2.serverReads(t) != 0 || c2.layer(t, obs.LayerPeer) != 64 {
		t.Errorf("%v blocks from the server, %v from peers: the good holder should have taken the failed work (%s)",
			c2.serverReads(t), c2.layer(t, obs.LayerPeer), c2.wholeCounts(t))
	}

	// The failing holder alone: it fails, the server serves the rest.
	c0.close()
	c2.close()
	c3 := newWholeAgent(t, addr, t.TempDir(), "")
	c3.mustRead(t, "f", data)
	if c3.count(t, "coopfs_wholefile_peer_failures_total") == 0 || c3.serverReads(t) == 0 {
		t.Errorf("a holder missing blocks: %v failures, %v server reads",
			c3.count(t, "coopfs_wholefile_peer_failures_total"), c3.serverReads(t))
	}

	// A corrupt copy alone: checked against the server's digests, refetched.
	for idx := uint64(0); idx < 64; idx++ {
		agent.WholeFileTamper(c3.Agent, ino, v, idx, false)
	}
	c1.close()
	c4 := newWholeAgent(t, addr, t.TempDir(), "")
	c4.mustRead(t, "f", data)
	if c4.count(t, "coopfs_wholefile_bad_blocks_total") == 0 || c4.serverReads(t) == 0 {
		t.Errorf("a corrupt holder: %v bad blocks, %v server reads", c4.count(t, "coopfs_wholefile_bad_blocks_total"), c4.serverReads(t))
	}

	// Every holder's peer side dead: the reader falls back to the server.
	for _, c := range []*hintsAgent{c3, c4} {
		agent.ClosePeerListener(c.Agent)
	}
	c5 := newWholeAgent(t, addr, t.TempDir(), "")
	c5.mustRead(t, "f", data)
	if c5.count(t, "coopfs_wholefile_peer_failures_total") == 0 || c5.serverReads(t) == 0 {
		t.Errorf("dead holders: %v failures, %v server reads", c5.count(t, "coopfs_wholefile_peer_failures_total"), c5.serverReads(t))
	}
}

// TestWholeFileRestart: a client restarted with a current copy on disk
// uses it without moving data and serves it; restarted with a stale copy
// (the file changed while it was down) it reads the new version, and
// nobody is handed its old copy.
func TestWholeFileRestart(t *testing.T) {
	v1, v2 := pattern(24*hbs, 5), pattern(24*hbs, 6)
	addr, export, _ := wholeServer(t, v1)
	disk, listen := t.TempDir(), freeAddr(t)
	c0 := newWholeAgent(t, addr, disk, listen)
	c0.mustRead(t, "f", v1)
	c0.close()

	c0 = newWholeAgent(t, addr, disk, listen)
	c0.mustRead(t, "f", v1)
	if c0.count(t, "coopfs_wholefile_hits_total") != 1 || c0.serverReads(t) != 0 || c0.layer(t, obs.LayerPeer) != 0 {
		t.Errorf("restart with a current copy: %v hits, %v server reads, %v peer reads",
			c0.count(t, "coopfs_wholefile_hits_total"), c0.serverReads(t), c0.layer(t, obs.LayerPeer))
	}
	c1 := newWholeAgent(t, addr, t.TempDir(), "")
	c1.mustRead(t, "f", v1)
	if c1.serverReads(t) != 0 {
		t.Errorf("the restarted holder did not serve: %v server reads", c1.serverReads(t))
	}
	c0.close()

	writeExport(t, export, "f", v2) // changed while c0 is down
	c0 = newWholeAgent(t, addr, disk, listen)
	c0.mustRead(t, "f", v2)
	if c0.count(t, "coopfs_wholefile_hits_total") != 0 {
		t.Error("a stale copy counted as current")
	}
	c1.mustRead(t, "f", v2) // c1 holds v1: revalidated, then served v2
	c2 := newWholeAgent(t, addr, t.TempDir(), "")
	c2.mustRead(t, "f", v2)
}

// TestWholeFileFigure1 is seed 001's figure 1 through three clients: c1
// and c2 open and read a 4 KB file, c1 writes "X" at 0 and closes, c2
// writes "Y" at 1 and closes, c3 opens and reads "XY". The first commit
// leaves c1's copy valid (the counter did not move since its open; its own
// writes kept its blocks current); the second follows another since c2's
// open: it leaves no valid copy (commit race).
func TestWholeFileFigure1(t *testing.T) {
	addr, _, sm := wholeServer(t, bytes.Repeat([]byte("."), 4096))
	c1 := newWholeAgent(t, addr, t.TempDir(), "")
	c2 := newWholeAgent(t, addr, t.TempDir(), "")
	c3 := newWholeAgent(t, addr, t.TempDir(), "")
	f1, _, err := c1.Open(asRoot(), "f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	f2, _, err := c2.Open(asRoot(), "f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if _, err := f1.ReadAt(asRoot(), buf, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f2.ReadAt(asRoot(), buf, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f1.WriteAt(asRoot(), []byte("X"), 0); err != nil {
		t.Fatal(err)
	}
	f1.Flush(asRoot())
	f1.Release(asRoot())
	if _, err := f2.WriteAt(asRoot(), []byte("Y"), 1); err != nil {
		t.Fatal(err)
	}
	f2.Flush(asRoot())
	f2.Release(asRoot())
	got, err := readAll(asRoot(), c3.Agent, "f")
	if err != nil || len(got) < 2 || string(got[:2]) != "XY" {
		t.Fatalf("c3 read %q (%v), want XY…", got[:min(2, len(got))], err)
	}
	s := scrape(t, sm)
	if s.Sum("coopfs_wholefile_commits_total", nil) != 2 || s.Sum("coopfs_wholefile_valid_commits_total", nil) != 1 {
		t.Errorf("commits %v, valid %v; want 2 and 1", s.Sum("coopfs_wholefile_commits_total", nil), s.Sum("coopfs_wholefile_valid_commits_total", nil))
	}
	// Everyone reads the committed content, holders of the older copies
	// included.
	for _, c := range []*hintsAgent{c1, c2, c3} {
		got, err := readAll(asRoot(), c.Agent, "f")
		if err != nil || string(got[:2]) != "XY" {
			t.Errorf("reread: %q (%v)", got[:min(2, len(got))], err)
		}
	}
}
