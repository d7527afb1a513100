package dirsim

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/sim"
)

// seedRun replays one seed-000 pattern twice (cold, then warm client
// caches), closed loop, 12 clients, at 1/div of the seed's size: a data
// set of 25600/div blocks, as many reads per client per run, client caches
// of 40 % of the data set, discard queues of 400/div, the server holding
// the whole file in memory.
func seedRun(t *testing.T, div int, pattern string, opts map[string]string) [2]sim.Metrics {
	t.Helper()
	const clients = 12
	blocks := 25600 / div
	p := sim.DefaultParams()
	p.Clients, p.BlockSize, p.WarmUp = clients, 4096, 0
	p.ClientCacheBlocks, p.ServerCacheBlocks = blocks*4/10, 2*blocks
	p.LocalMs, p.RemoteMs, p.ServerMs, p.DiskMs, p.MessageMs = 0.02, 0.6, 0.6, 10, 0.1
	p = p.WithOption(OptQueueLen, strconv.Itoa(400/div)).WithOption(OptContention, "on")
	for k, v := range opts {
		p = p.WithOption(k, v)
	}
	g, err := sim.Generate(sim.GenConfig{Pattern: pattern, Clients: clients, Accesses: 2 * clients * blocks, Blocks: blocks, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, p)
	s.PreloadServer(1, blocks)
	var out [2]sim.Metrics
	for run := range 2 {
		w := ClockOrder(Window(g, run*clients*blocks, clients*blocks), s)
		if out[run], err = sim.Run(context.Background(), w, s, p, sim.RunOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Seed 000 tables 4 and 5: the forward miss rate stays under 1.5 % with
// discard notifications and is many times higher without them, in the
// second run of every pattern (in the first run, the patterns other than
// random hardly evict anything that is asked for again).
func TestSeedForwardMissRate(t *testing.T) {
	const div = 2 // below half scale the batch granularity shows: keep it
	for _, pat := range []string{sim.GenSequential, sim.GenRandom, sim.GenHotColdLocal, sim.GenHotColdGlobal} {
		with := seedRun(t, div, pat, map[string]string{OptNotify: "on"})
		without := seedRun(t, div, pat, map[string]string{OptNotify: "off"})
		for run := range 2 {
			w, wo := with[run].ForwardMissRate, without[run].ForwardMissRate
			t.Logf("%s run %d: forward miss rate %.2f %% with notifications, %.2f %% without", pat, run+1, 100*w, 100*wo)
			if w >= 0.015 {
				t.Errorf("%s run %d: miss rate %.2f %% with notifications, want < 1.5 %%", pat, run+1, 100*w)
			}
		}
		if w, wo := with[1].ForwardMissRate, without[1].ForwardMissRate; wo < 0.05 || wo < 5*w {
			t.Errorf("%s second run: %.2f %% without notifications against %.2f %% with: want many times more", pat, 100*wo, 100*w)
		}
	}
}

// Seed 000 figure 6: the directory cuts the average block read time by
// 50-80 % against NFS (none) when the server's link is the bottleneck.
func TestSeedAccessTime(t *testing.T) {
	for _, pat := range []string{sim.GenSequential, sim.GenRandom, sim.GenHotColdLocal, sim.GenHotColdGlobal} {
		none := seedRun(t, 10, pat, map[string]string{OptPolicy: "none"})
		dir := seedRun(t, 10, pat, nil)
		for run := range 2 {
			cut := 1 - dir[run].AvgAccessMs/none[run].AvgAccessMs
			t.Logf("%s run %d: %.3f ms (none) -> %.3f ms (directory): -%.0f %%", pat, run+1, none[run].AvgAccessMs, dir[run].AvgAccessMs, 100*cut)
			if cut < 0.4 {
				t.Errorf("%s run %d: directory cuts the average read time by %.0f %%, want at least 40 %%", pat, run+1, 100*cut)
			}
		}
	}
}

// Two reads from the server at once: the second queues for the link.
func TestServerLinkQueue(t *testing.T) {
	p := tinyParams().WithOption(OptContention, "on").WithOption(OptServerLink, "100").WithOption(OptPolicy, "none")
	s := newSim(t, p)
	s.PreloadServer(1, 4)
	c := sim.NewCounters(p)
	o1 := s.Access(rd(0, 1), c)
	o2 := s.Access(rd(1, 2), c)
	xfer := 4096 * 8 / 100e6 * 1000 // ms
	if o1.ExtraMs != 0 || o2.ExtraMs < xfer*0.99 || o2.ExtraMs > xfer*1.01 {
		t.Fatalf("queueing %v then %v ms, want 0 then %v", o1.ExtraMs, o2.ExtraMs, xfer)
	}
	if s.Clock(1) != time.Duration((1+xfer)*float64(time.Millisecond)) {
		t.Fatalf("clock of client 1 = %v", s.Clock(1))
	}
}

// BenchmarkAccess measures simulated accesses per second (random pattern,
// seed 000 setup, closed loop).
func BenchmarkAccess(b *testing.B) {
	p := sim.DefaultParams().WithOption(OptContention, "on")
	p.Clients, p.BlockSize, p.WarmUp = 12, 4096, 0
	p.ClientCacheBlocks, p.ServerCacheBlocks = 10240, 25600
	g, err := sim.Generate(sim.GenConfig{Pattern: sim.GenRandom, Clients: 12, Accesses: b.N, Blocks: 25600, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if _, err := sim.Run(context.Background(), ClockOrder(g, s), s, p, sim.RunOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "accesses/s")
}
