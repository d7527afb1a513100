package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster/clustertest"
	"github.com/coopfs/coopfs/internal/sim"
)

func TestMain(m *testing.M) {
	code := m.Run()
	clustertest.Cleanup()
	os.Exit(code)
}

// tinyTrace: two clients read the same two-block file, then client 0
// re-reads it (local hits), writes a block of another file and reads it back.
func tinyTrace() *sim.Slice {
	acc := []sim.Access{
		{Client: 0, File: 7, Block: 2, Op: sim.OpOpen},
		{Client: 0, File: 7, Block: 0, Op: sim.OpRead},
		{Client: 0, File: 7, Block: 1, Op: sim.OpRead},
		{Client: 0, File: 7, Op: sim.OpClose},
		{Client: 1, File: 7, Block: 2, Op: sim.OpOpen},
		{Client: 1, File: 7, Block: 0, Op: sim.OpRead},
		{Client: 1, File: 7, Block: 1, Op: sim.OpRead},
		{Client: 1, File: 7, Op: sim.OpClose},
		{Client: 0, File: 7, Block: 2, Op: sim.OpOpen},
		{Client: 0, File: 7, Block: 0, Op: sim.OpRead},
		{Client: 0, File: 7, Block: 1, Op: sim.OpRead},
		{Client: 0, File: 7, Op: sim.OpClose},
		{Client: 1, File: 9, Block: 1, Op: sim.OpOpen},
		{Client: 1, File: 9, Block: 0, Op: sim.OpWrite},
		{Client: 1, File: 9, Block: 0, Op: sim.OpRead},
		{Client: 1, File: 9, Op: sim.OpClose},
		{Client: 1, File: 9, Block: 1, Op: sim.OpDelete},
	}
	return &sim.Slice{Label: "tiny", Accesses: acc}
}

// TestReplayE2E replays a tiny trace on a two-client testbed under every
// policy: the simulator and the live cluster must agree on where each
// read was served (the trace is deterministic enough for exact counts).
func TestReplayE2E(t *testing.T) {
	if err := Unavailable(); err != nil {
		t.Skipf("the namespace testbed cannot run here: %v", err)
	}
	bin := clustertest.Binary(t)
	var progress bytes.Buffer
	r, err := Run(context.Background(), Config{Workload: tinyTrace(), Binary: bin, Progress: &progress,
		ServerLink: "100mbit", ClientLink: "100mbit"})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if r.Clients != 2 || r.Reads != 7 || r.Files != 2 || len(r.Rows) != 3 {
		t.Fatalf("report %+v", r)
	}
	for _, row := range r.Rows {
		if row.Sim == nil {
			t.Fatalf("%s: no simulated column", row.Policy)
		}
		if row.Live == nil {
			if row.Policy == "hints" && strings.HasPrefix(row.LiveUnavailable, "not available: ") {
				t.Logf("hints live: %s", row.LiveUnavailable)
				continue
			}
			t.Fatalf("%s: no live column (%s)", row.Policy, row.LiveUnavailable)
		}
		if row.BadReads != 0 {
			t.Errorf("%s: %d reads returned the wrong block", row.Policy, row.BadReads)
		}
		l, s := row.Live, row.Sim
		// Reads 1-2 come from the disk, 3-4 from the server's memory or
		// client 0, 5-6 are local; 7 reads the block client 1 just wrote
		// (the simulator keeps the writer's copy; a live client may ask
		// the server for the new version): one read of slack.
		const one = 1.0/7 + 0.01
		if d := l.ServerDisk - 2.0/7; d < -0.01 || d > one {
			t.Errorf("%s live: server disk %.3f, want 2 or 3 of 7 reads", row.Policy, l.ServerDisk)
		}
		if d := l.LocalMemory - s.LocalMemory; d > one || d < -one {
			t.Errorf("%s: local hits live %.3f vs sim %.3f", row.Policy, l.LocalMemory, s.LocalMemory)
		}
		if d := l.Peer + l.ServerMemory - 2.0/7; d < -0.01 || d > 0.01 {
			t.Errorf("%s live: peer %.3f + server memory %.3f, want 2 of 7 reads", row.Policy, l.Peer, l.ServerMemory)
		}
		if row.Policy == "hints" && (l.HintCorrectness == nil || l.Peer < 1.0/7) {
			t.Errorf("hints live: peer %.3f, hint correctness %v: the second reader did not follow client 0's hints", l.Peer, l.HintCorrectness)
		}
		if l.AvgReadMs <= 0 || l.LookupMsgsPerMiss < 2 {
			t.Errorf("%s live: read time %.3f ms, lookup msgs %.2f", row.Policy, l.AvgReadMs, l.LookupMsgsPerMiss)
		}
	}
	var text, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"local memory hits %", "lookup msgs / miss", "avg block read ms", "none", "directory", "hints"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}
	if err := r.WriteJSON(&js); err != nil || !json.Valid(js.Bytes()) {
		t.Errorf("JSON: %v", err)
	}
	dir := t.TempDir()
	if err := r.Plot(filepath.Join(dir, "r.png")); err != nil {
		t.Error(err)
	}
	t.Logf("\n%s", text.String())
}

// TestReplayDiskLatencyE2E: with --disk-latency the live server reads its
// export through slowfs; the reads counted at the server's disk each took
// at least the latency (a lower bound of a sleep: no flake), and every
// block read is still the right one.
func TestReplayDiskLatencyE2E(t *testing.T) {
	if err := Unavailable(); err != nil {
		t.Skipf("the namespace testbed cannot run here: %v", err)
	}
	const lat = 40 * time.Millisecond
	var progress bytes.Buffer
	r, err := Run(context.Background(), Config{Workload: tinyTrace(), Binary: clustertest.Binary(t), Progress: &progress,
		Policies: []string{"none"}, DiskLatency: lat})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	l := r.Rows[0].Live
	if l == nil || r.Rows[0].BadReads != 0 {
		t.Fatalf("live %+v, bad reads %d", l, r.Rows[0].BadReads)
	}
	if min := l.ServerDisk * float64(lat) / float64(time.Millisecond); l.ServerDisk == 0 || l.AvgReadMs < min {
		t.Errorf("server disk %.3f of the reads, average read %.2f ms: want at least %.2f ms", l.ServerDisk, l.AvgReadMs, min)
	}
	var text bytes.Buffer
	r.WriteText(&text)
	if !strings.Contains(text.String(), "every read of the export costs 40ms") {
		t.Errorf("the table does not say the disk is slow:\n%s", text.String())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {Workload: tinyTrace(), Policies: []string{"nope"}}, {Workload: tinyTrace(), DiskLatency: -1},
		{Workload: tinyTrace(), BlockSize: 5000}, {Workload: tinyTrace(), ClientCache: 10}} {
		c.setDefaults()
		if err := c.validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestLoadLimitsClients(t *testing.T) {
	w := &sim.Slice{Label: "big", Accesses: []sim.Access{{Client: MaxClients, Op: sim.OpRead}}}
	if _, err := load(w, -1); err == nil || !strings.Contains(err.Error(), "client hosts") {
		t.Errorf("load: %v", err)
	}
	if _, err := load(&sim.Slice{Label: "w", Accesses: []sim.Access{{Op: sim.OpWrite}}}, -1); err == nil {
		t.Error("a trace without reads was accepted")
	}
}

func TestBlockPattern(t *testing.T) {
	buf := make([]byte, 4096)
	fillBlock(buf, 42, 3)
	if !checkBlock(buf, 42, 3) || checkBlock(buf, 42, 4) || checkBlock(buf, 41, 3) {
		t.Error("block headers do not identify blocks")
	}
}

// TestReplayCancel interrupts a replay while it plays (Ctrl-C): nothing it
// started may be left (namespaces, mounts, the run directory).
func TestReplayCancel(t *testing.T) {
	if err := Unavailable(); err != nil {
		t.Skipf("the namespace testbed cannot run here: %v", err)
	}
	bin := clustertest.Binary(t)
	// A temp dir of its own, so that testbeds running beside the test
	// cannot be taken for its leftovers.
	t.Setenv("TMPDIR", t.TempDir())
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "coopfs-replay-*"))
	w, err := sim.Generate(sim.GenConfig{Pattern: sim.GenOffice, Clients: 2, Accesses: 200000, Files: 50, MaxFile: 16, Private: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var progress syncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Config{Workload: w, MaxAccesses: -1, Binary: bin, Policies: []string{"none"}, Progress: &progress})
		done <- err
	}()
	for !strings.Contains(progress.String(), "live:") {
		select {
		case err := <-done:
			t.Fatalf("the replay ended before it was interrupted: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("interrupted replay: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the replay did not return 60s after cancel")
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "coopfs-replay-*"))
	if len(after) > len(before) {
		t.Errorf("run directories left: %v (before: %v)", after, before)
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "cfs"+strconv.Itoa(os.Getpid())+"-") {
			t.Errorf("network namespace left: %s", e.Name())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The overhead over the trace's own time: the counted accesses' span.
func TestTraceSpanOverhead(t *testing.T) {
	tr := &trace{accesses: []sim.Access{{Time: time.Second}, {Time: 3 * time.Second}, {Time: 11 * time.Second}}}
	if got := tr.span(1); got != 8*time.Second {
		t.Errorf("span after 1 warm-up access = %v, want 8s", got)
	}
	if got := tr.span(5); got != 10*time.Second {
		t.Errorf("span with a warm-up longer than the trace = %v, want the whole trace, 10s", got)
	}
	// 1 MB over 8 s on a 100 Mbit server link and one 100 Mbit client: 0.5 %.
	if got := overheadPct(1e6, 8*time.Second, "100mbit", "100mbit", 1); got < 0.499 || got > 0.501 {
		t.Errorf("overheadPct = %v, want 0.5", got)
	}
}
