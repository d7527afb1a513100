package dirsim

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/sim"
)

func tinyParams() sim.Params {
	p := sim.DefaultParams()
	p.Clients, p.BlockSize = 3, 4096
	p.ClientCacheBlocks, p.ServerCacheBlocks = 2, 10
	p.LocalMs, p.RemoteMs, p.ServerMs, p.DiskMs, p.MessageMs = 0.1, 1, 1, 10, 0.2
	p.WarmUp = 0
	return p.WithOption(OptServerLink, "0").WithOption(OptClientLink, "0")
}

func newSim(t *testing.T, p sim.Params) *Sim {
	t.Helper()
	s, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rd(c int, b uint64) sim.Access { return sim.Access{Client: c, File: 1, Block: b, Op: sim.OpRead} }

// A hand-checked trace: every hit, forward and miss counted.
func TestTinyTrace(t *testing.T) {
	p := tinyParams().WithOption(OptQueueLen, "5")
	s := newSim(t, p)
	// rotation order: the server (while the block is in its memory), then
	// the clients by id, starting after the last one that served
	tr := []sim.Access{
		rd(0, 1), // disk; block 1 in server memory; holders {c0}
		rd(1, 1), // rotation {S, c0}, none served yet: S (memory); holders {c0, c1}
		rd(2, 1), // rotation {S, c0, c1} after S: c0 sends (remote)
		rd(0, 1), // local
		rd(0, 2), // disk; holders of 2 {c0}
		rd(0, 3), // disk; c0 evicts block 1 (queued, not notified)
		rd(1, 1), // local
		rd(2, 2), // rotation {S, c0}: S (memory)
		rd(2, 1), // local
		rd(1, 2), // rotation {S, c0, c2} after S: c0 sends (remote)
	}
	for i := range tr {
		tr[i].Time = time.Duration(i) * time.Second // far apart: no queueing
	}
	m, err := sim.Run(context.Background(), &sim.Slice{Label: "tiny", Accesses: tr}, s, p, sim.RunOptions{Algorithm: "directory"})
	if err != nil {
		t.Fatal(err)
	}
	got := []int64{m.Hits.Local, m.Hits.Remote, m.Hits.Server, m.Hits.Disk}
	want := []int64{3, 2, 2, 3}
	if !slices.Equal(got, want) {
		t.Fatalf("hits local/remote/server/disk = %v, want %v", got, want)
	}
	if m.Counts.ForwardedReqs != 2 || m.Counts.ForwardMisses != 0 || m.Counts.Hops != 2 {
		t.Fatalf("forwards %d, misses %d, hops %d; want 2, 0, 2", m.Counts.ForwardedReqs, m.Counts.ForwardMisses, m.Counts.Hops)
	}
	// latency: 3 local, 2 remote + 1 hop each, 2 server memory, 3 disk
	if want := (3*0.1 + 2*(1+0.2) + 2*1 + 3*10) / 10; m.AvgAccessMs < want-1e-9 || m.AvgAccessMs > want+1e-9 {
		t.Fatalf("avg access = %v ms, want %v", m.AvgAccessMs, want)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// A forward to a client that evicted the block: negative reply, on-demand
// notification, retry served by the server; with notifications off the
// stale holder is only dropped by the retry.
func TestForwardMissAndOnDemand(t *testing.T) {
	for _, notify := range []string{"on", "off"} {
		p := tinyParams().WithOption(OptNotify, notify).WithOption(OptQueueLen, "100")
		p.ServerCacheBlocks = 0 // keep the server out of the rotation
		s := newSim(t, p)
		tr := []sim.Access{rd(0, 1), rd(0, 2), rd(0, 3), rd(0, 4), rd(1, 1), rd(1, 2)}
		m, err := sim.Run(context.Background(), &sim.Slice{Label: "miss", Accesses: tr}, s, p, sim.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// c0 evicted 1 and 2; c1's requests for them are forwarded to c0.
		// With notifications the first miss flushes the queue on demand, so
		// the request for 2 is not forwarded.
		wantFwd, wantMiss := int64(1), int64(1)
		if notify == "off" {
			wantFwd, wantMiss = 2, 2
		}
		if m.Counts.ForwardedReqs != wantFwd || m.Counts.ForwardMisses != wantMiss {
			t.Fatalf("notify=%s: forwards %d misses %d, want %d %d", notify, m.Counts.ForwardedReqs, m.Counts.ForwardMisses, wantFwd, wantMiss)
		}
		hs := s.Holder(0).Stats()
		if notify == "on" && (hs.OnDemand != 1 || hs.NotifiedBlocks != 2) {
			t.Fatalf("holder stats %+v, want one on-demand notification of 2 ids (the queue, holding the asked block)", hs)
		}
		rows := s.Clients()
		if rows[0].Misses != uint64(wantMiss) || rows[1].Served != 2 {
			t.Fatalf("client rows %+v", rows)
		}
	}
}

// Concurrent readers (closed loop): a forward reaching a client whose data
// is still on its way waits for it.
func TestPendingWait(t *testing.T) {
	p := tinyParams()
	p.ClientCacheBlocks = 100
	s := newSim(t, p)
	var tr []sim.Access
	for b := range uint64(20) {
		for c := range 3 {
			tr = append(tr, rd(c, b))
		}
	}
	m, err := sim.Run(context.Background(), ClockOrder(&sim.Slice{Label: "seq", Accesses: tr}, s), s, p, sim.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hs := s.Holder(0).Stats(); hs.Waited == 0 {
		t.Fatalf("no forward waited for pending data: %+v", hs)
	}
	if m.Hits.Remote == 0 || m.Counts.ForwardMisses != 0 {
		t.Fatalf("remote hits %d, misses %d", m.Hits.Remote, m.Counts.ForwardMisses)
	}
}

// Writes make a new version: the directory drops the file, stale local
// copies are not used, forwards carry the new version.
func TestWriteInvalidates(t *testing.T) {
	p := tinyParams()
	s := newSim(t, p)
	tr := []sim.Access{rd(0, 1), rd(1, 1), {Client: 2, File: 1, Block: 1, Op: sim.OpWrite}, rd(0, 1), rd(1, 1)}
	m, err := sim.Run(context.Background(), &sim.Slice{Label: "w", Accesses: tr}, s, p, sim.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Hits.Local != 0 || m.Counts.Invalidations != 2 {
		t.Fatalf("local hits %d invalidations %d, want 0 and 2", m.Hits.Local, m.Counts.Invalidations)
	}
	if hs := s.Directory().Stats(); hs.FileChanges != 1 {
		t.Fatalf("directory stats %+v", hs)
	}
}

// With keep_own_writes a writer's copies of the version its write replaced
// stay valid (the live agent's WriteBase); another client's write still
// makes them stale. Off (the default), only the block written does.
func TestKeepOwnWrites(t *testing.T) {
	wr := func(c int, b uint64) sim.Access { return sim.Access{Client: c, File: 1, Block: b, Op: sim.OpWrite} }
	tr := []sim.Access{rd(0, 1), wr(0, 2), rd(0, 1), rd(0, 2), wr(1, 2), rd(0, 1)}
	for _, c := range []struct {
		keep  string
		local int64
	}{{"off", 1}, {"on", 2}} {
		p := tinyParams().WithOption(OptKeepOwn, c.keep)
		s := newSim(t, p)
		m, err := sim.Run(context.Background(), &sim.Slice{Label: "k", Accesses: tr}, s, p, sim.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Hits.Local != c.local {
			t.Errorf("keep_own_writes=%s: local hits %d, want %d", c.keep, m.Hits.Local, c.local)
		}
	}
}

func TestOptions(t *testing.T) {
	for _, kv := range [][2]string{{OptPolicy, "x"}, {OptNotify, "maybe"}, {OptKeepOwn, "yes"}, {OptQueueLen, "0"}, {OptEntries, "-3"}, {OptServerLink, "fast"}, {OptContention, "maybe"}} {
		if _, err := New(tinyParams().WithOption(kv[0], kv[1])); err == nil {
			t.Errorf("%s=%s accepted", kv[0], kv[1])
		}
	}
}

// ClockOrder keeps each client's own sequence and yields times in order.
func TestClockOrder(t *testing.T) {
	p := tinyParams()
	s := newSim(t, p)
	g, err := sim.Generate(sim.GenConfig{Pattern: sim.GenRandom, Clients: 3, Accesses: 600, Blocks: 50, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := sim.Collect(g)
	per := func(as []sim.Access) [3][]uint64 {
		var r [3][]uint64
		for _, a := range as {
			r[a.Client] = append(r[a.Client], a.Block)
		}
		return r
	}
	var got []sim.Access
	w := ClockOrder(g, s)
	src, _ := w.Open()
	for {
		a, err := src.Next()
		if err != nil {
			break
		}
		if n := len(got); n > 0 && a.Time < got[n-1].Time {
			t.Fatalf("time goes back: %v after %v", a.Time, got[n-1].Time)
		}
		got = append(got, a)
		s.Access(a, sim.NewCounters(p))
	}
	pg, po := per(got), per(orig)
	for c := range pg {
		if !slices.Equal(pg[c], po[c]) {
			t.Fatalf("client %d's sequence changed", c)
		}
	}
	if tail, _ := sim.Collect(Window(g, 590, -1)); len(tail) != 10 || tail[0] != orig[590] {
		t.Fatalf("window tail = %d accesses", len(tail))
	}
}
