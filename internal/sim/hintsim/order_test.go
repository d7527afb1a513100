package hintsim_test

import (
	"context"
	"sync"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
	"github.com/coopfs/coopfs/internal/sim/hintsim"
	"github.com/coopfs/coopfs/internal/sim/study"
)

// The seed's qualitative results (seed 002 chapter 5) as orderings on
// generated office/engineering workloads, at a quarter of the seed's system
// (12 clients; caches scaled like the sarkar study's quick mode: 16 MB →
// 512 blocks, 4 MB → 128 blocks, 16 MB server → 512 blocks).

const (
	clients  = 12
	accesses = 150000
	warmUp   = 40000
)

// workload is an office workload; private sets the per-client private
// files (fewer: a working set that fits the client memories, as in the
// Sprite traces).
func workload(t *testing.T, private int) sim.Workload {
	t.Helper()
	w, err := sim.Generate(sim.GenConfig{Pattern: sim.GenOffice, Clients: clients, Accesses: accesses, Seed: 7,
		Files: 500, Private: private, MaxFile: 64})
	if err != nil {
		t.Fatal(err)
	}
	// Generated once, replayed by every algorithm.
	acc, err := sim.Collect(w)
	if err != nil {
		t.Fatal(err)
	}
	return &sim.Slice{Label: w.Name(), Accesses: acc}
}

func params(clientBlocks, serverBlocks int) sim.Params {
	p := sim.DefaultParams()
	p.Clients, p.ClientCacheBlocks, p.ServerCacheBlocks, p.WarmUp = clients, clientBlocks, serverBlocks, warmUp
	return p
}

type result struct {
	name string
	m    sim.Metrics
}

// runAll runs the named registry algorithms on w (two at a time: the
// machine has 2 CPUs).
func runAll(t *testing.T, w sim.Workload, p sim.Params, names ...string) map[string]sim.Metrics {
	t.Helper()
	out := make(map[string]sim.Metrics)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, n := range names {
		alg, pp, err := study.Build(n, p)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			m, err := sim.Run(context.Background(), w, alg, pp, sim.RunOptions{Algorithm: n})
			if err != nil {
				t.Errorf("%s: %v", n, err)
				return
			}
			if c, ok := alg.(sim.Checker); ok {
				if err := c.Check(); err != nil {
					t.Errorf("%s: %v", n, err)
				}
			}
			mu.Lock()
			out[n] = m
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("generated-workload orderings: skipped with -short")
	}
}

// Seed 002 5.2.3 and 5.2.7.1 (figures 5.2, 5.9): the hint-based manager
// load is far below N-chance's and GMS's (30× in the seed with 4 MB
// caches); we assert at least 10×, with small client caches where the
// seed's gap is widest.
func TestManagerLoadTenTimesBelowNChanceAndGMS(t *testing.T) {
	skipShort(t)
	ms := runAll(t, workload(t, 75), params(128, 4096), hintsim.Name, "nchance", "gms")
	h := ms[hintsim.Name]
	for _, n := range []string{"nchance", "gms"} {
		t.Logf("manager msgs/access: hints %.4f, %s %.4f (%.1f×)", h.ManagerMsgsPerAccess, n, ms[n].ManagerMsgsPerAccess,
			ms[n].ManagerMsgsPerAccess/h.ManagerMsgsPerAccess)
		if h.ManagerMsgsPerAccess*10 > ms[n].ManagerMsgsPerAccess {
			t.Errorf("hints manager load %.4f is not 10× below %s's %.4f", h.ManagerMsgsPerAccess, n, ms[n].ManagerMsgsPerAccess)
		}
	}
	if h.ManagerByCause.Lookup != 0 || h.ManagerByCause.Replacement != 0 {
		t.Errorf("hints puts lookup or replacement load on the manager: %+v", h.ManagerByCause)
	}
}

// Seed 002 5.2.2 and table 5.4: with the seed's default 16 MB caches and a
// working set that fits the client memories (as in the Sprite traces),
// hints are correct for > 99 % of the misses they name a client for, and a
// lookup takes about 2 messages against 3 for manager-based lookup.
func TestLookupMessagesAndHintAccuracy(t *testing.T) {
	skipShort(t)
	ms := runAll(t, workload(t, 25), params(1024, 4096), hintsim.Name, "nchance", "gms")
	h := ms[hintsim.Name]
	t.Logf("hints: lookup msgs/miss %.4f, hint correctness %.4f, absolute %.4f, false negatives %.5f, unnecessary forwards %.4f",
		h.LookupMsgsPerMiss, h.HintCorrectness, h.AbsoluteCorrectness, h.FalseNegatives, h.UnnecessaryForwards)
	if h.LookupMsgsPerMiss < 2 || h.LookupMsgsPerMiss > 2.1 {
		t.Errorf("hints lookup msgs/miss %.4f, want about 2 (2..2.1)", h.LookupMsgsPerMiss)
	}
	for _, n := range []string{"nchance", "gms"} {
		if l := ms[n].LookupMsgsPerMiss; l < 2.99 || l > 3.01 {
			t.Errorf("%s lookup msgs/miss %.4f, want 3", n, l)
		}
	}
	if h.HintCorrectness < 0.99 {
		t.Errorf("hint correctness %.4f, want > 0.99", h.HintCorrectness)
	}
	// The seed has 99.93 %; here a master copy moves (is forwarded) more
	// often relative to hand-outs, and about 5 % of correct hints take a
	// second hop.
	if h.AbsoluteCorrectness < 0.9 {
		t.Errorf("absolute correctness %.4f, want > 0.9", h.AbsoluteCorrectness)
	}
	if h.FalseNegatives > 0.001 {
		t.Errorf("false negatives %.5f, want < 0.1 %%", h.FalseNegatives)
	}
	if h.UnnecessaryForwards > 0.05 {
		t.Errorf("unnecessary forwards %.4f, want few (seed: 1.97 %%)", h.UnnecessaryForwards)
	}
}

// Seed 002 5.2.6, table 5.7: with small client caches (4 MB) and a small
// server memory (16 MB), using the server memory as a discard cache gives
// the lowest block access time, then the cooperative-cache use, then the
// disk cache; the discard cache's hit ratio beats the disk cache's.
//
// Known divergence (docs/sim.md, table 5.7, with the variants tried): on
// our generated workloads the cooperative-cache use has a HIGHER
// server-memory hit ratio than the discard cache, though more disk accesses
// and a higher access time. The skipped subtest states it.
func TestServerMemoryUses(t *testing.T) {
	skipShort(t)
	ms := runAll(t, workload(t, 75), params(128, 512), hintsim.Name, "hints-coop", "hints-disk")
	disc, coop, disk := ms[hintsim.Name], ms["hints-coop"], ms["hints-disk"]
	for _, r := range []result{{"discard", disc}, {"coop", coop}, {"disk", disk}} {
		t.Logf("%-7s server hit ratio %.4f, access %.3f ms, disk accesses %d", r.name, r.m.ServerHitRatio, r.m.AvgAccessMs, r.m.DiskAccesses)
	}
	if !(disc.AvgAccessMs < coop.AvgAccessMs && coop.AvgAccessMs < disk.AvgAccessMs) {
		t.Errorf("access time: discard %.3f, coop %.3f, disk %.3f; want discard < coop < disk",
			disc.AvgAccessMs, coop.AvgAccessMs, disk.AvgAccessMs)
	}
	if disc.DiskAccesses >= coop.DiskAccesses {
		t.Errorf("disk accesses: discard %d, coop %d; want fewer with the discard cache", disc.DiskAccesses, coop.DiskAccesses)
	}
	if disc.ServerHitRatio <= disk.ServerHitRatio {
		t.Errorf("server hit ratio: discard %.4f, disk cache %.4f; want discard higher", disc.ServerHitRatio, disk.ServerHitRatio)
	}
	if disc.DiscardHitRatio != disc.ServerHitRatio {
		t.Errorf("discard hit ratio %.4f differs from the server hit ratio %.4f", disc.DiscardHitRatio, disc.ServerHitRatio)
	}
	t.Run("discard hit ratio above coop", func(t *testing.T) {
		if disc.ServerHitRatio > coop.ServerHitRatio {
			return
		}
		t.Skipf("known divergence from seed 002 table 5.7: server hit ratio discard %.4f <= coop %.4f. On these workloads "+
			"only ~20 %% of the blocks sent to the discard cache are hit again (few genuine replacement mistakes), while "+
			"the cooperative server memory keeps the master copies it serves and is hit once per sharing client; a more "+
			"selective discard test lowers the discard hits further. See docs/sim.md (table 5.7)",
			disc.ServerHitRatio, coop.ServerHitRatio)
	})
}
