package nasd

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/coopfs/coopfs/internal/coord/servercoop"
	"github.com/coopfs/coopfs/internal/sim"
)

// quick is the default system and workload at 1/8 scale (caches and working
// sets alike), small enough for tests.
func quick(spread int) (Config, *Workload) {
	c := DefaultConfig()
	c.ServerCacheBlocks, c.ClientCacheBlocks = 1024, 256
	wc := DefaultWorkload()
	wc.Spread, wc.Scale = spread, 0.125
	w, err := NewWorkload(wc)
	if err != nil {
		panic(err)
	}
	return c, w
}

const quickWarm = 12000

func TestWorkloadReplaysAndPlaces(t *testing.T) {
	_, w := quick(3)
	a, err := sim.Collect(w)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := sim.Collect(w)
	if len(a) != len(b) || len(a) < 40000 {
		t.Fatalf("lengths %d, %d", len(a), len(b))
	}
	perClient := map[int]int{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("access %d differs between replays", i)
		}
		if got, want := w.ServerOf(a[i]), a[i].Client%3; got != want {
			t.Fatalf("client %d's block on server %d, want %d", a[i].Client, got, want)
		}
		perClient[a[i].Client]++
	}
	if len(perClient) != 20 {
		t.Fatalf("%d clients", len(perClient))
	}
	// Lottery merge: every trace spans the run (each client appears in the
	// last tenth).
	seen := map[int]bool{}
	for _, x := range a[len(a)*9/10:] {
		seen[x.Client] = true
	}
	if len(seen) < 18 {
		t.Fatalf("only %d clients in the last tenth", len(seen))
	}
	if _, err := NewWorkload(WorkloadConfig{Servers: 8, Clients: 20, Spread: 9}); !errors.Is(err, sim.ErrConfig) {
		t.Fatalf("spread 9 of 8: %v", err)
	}
}

var allSides = []Side{
	{Scheme: servercoop.NonCoop},
	{Scheme: servercoop.Global},
	{Scheme: servercoop.OneChance, Target: servercoop.Manager},
	{Scheme: servercoop.OneChance, Target: servercoop.Random},
	{Scheme: servercoop.OneChance, Target: servercoop.Hints},
	{Scheme: servercoop.OneChance, Target: servercoop.Better},
	{Scheme: servercoop.OneChance, Target: servercoop.Manager, ReturnOnHit: true},
}

// clientOf recovers the client whose working set holds a block of the
// generated workload.
func clientOf(k sim.Key, servers int) int { return int((k.File / uint64(servers)) >> 16) }

// Every forward moves a block its sender owns (a block is forwarded at most
// once per stay away from its owner), and caches never overflow.
func TestInvariantsOnGeneratedWorkload(t *testing.T) {
	for _, sv := range []Side{allSides[1], allSides[2], allSides[3], allSides[4], allSides[6]} {
		for _, cl := range []Side{allSides[0], allSides[1], allSides[2], allSides[6]} {
			cfg, w := quick(2)
			bad := 0
			cfg.Observe = func(e Event) {
				var owner int
				if e.Side == "server" {
					owner = int(e.Key.File % uint64(cfg.Servers))
				} else {
					owner = clientOf(e.Key, cfg.Servers)
				}
				if e.To >= 0 && (!e.Owned || e.From != owner || e.Chain != 0 || e.To == e.From) {
					bad++
				}
			}
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			src, _ := w.Open()
			for n := 0; ; n++ {
				a, err := src.Next()
				if err == io.EOF {
					break
				}
				s.Access(a, nil)
				if n%5000 == 0 {
					if err := s.Check(); err != nil {
						t.Fatalf("%s-%s after %d: %v", sv.Label(), cl.Label(), n, err)
					}
				}
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			if bad > 0 {
				t.Fatalf("%s-%s: %d forwards of blocks not owned by the sender", sv.Label(), cl.Label(), bad)
			}
		}
	}
}

func avg(t *testing.T, cfg Config, w *Workload) float64 {
	t.Helper()
	st, err := Run(context.Background(), cfg, w, quickWarm)
	if err != nil {
		t.Fatal(err)
	}
	return st.AvgMs()
}

// Seed 004 figure 3: with servers only (no client caches), the cooperative
// server schemes beat the non-cooperative one, the more so the more uneven
// the workload.
func TestCooperativeServersBeatNonCoop(t *testing.T) {
	var gains []float64
	for _, spread := range []int{1, 2, 4, 8} {
		cfg, w := quick(spread)
		cfg.ClientCacheBlocks = 0
		res := map[servercoop.Scheme]float64{}
		for _, sc := range []servercoop.Scheme{servercoop.NonCoop, servercoop.Global, servercoop.OneChance} {
			cfg.Server = Side{Scheme: sc}
			res[sc] = avg(t, cfg, w)
		}
		t.Logf("config %d: noncoop %.2f global %.2f 1chance %.2f", spread, res[0], res[1], res[2])
		if res[servercoop.Global] >= res[servercoop.NonCoop] || res[servercoop.OneChance] >= res[servercoop.NonCoop] {
			t.Fatalf("config %d: cooperative servers do not beat noncoop: %v", spread, res)
		}
		if res[servercoop.OneChance] > res[servercoop.Global] {
			t.Fatalf("config %d: 1-Chance worse than Global: %v", spread, res)
		}
		gains = append(gains, res[servercoop.NonCoop]-res[servercoop.OneChance])
	}
	if gains[0] <= gains[len(gains)-1] {
		t.Fatalf("1-Chance gains %v: not larger on the uneven workload", gains)
	}
}

// Seed 004 figure 4: Better never loses to Manager (same choices, no manager
// messages).
func TestBetterNeverLosesToManager(t *testing.T) {
	for _, spread := range []int{1, 4, 8} {
		cfg, w := quick(spread)
		cfg.ClientCacheBlocks = 0
		cfg.Server = allSides[2]
		m := avg(t, cfg, w)
		cfg.Server = allSides[5]
		if b := avg(t, cfg, w); b > m {
			t.Fatalf("config %d: better %.3f > manager %.3f", spread, b, m)
		}
	}
}

// Seed 004 figure 5: of the nine combinations, 1-Chance on the servers and
// non-cooperative clients is best at the default parameters, and whatever
// the clients do, cooperative servers beat non-cooperative ones.
func TestOneChanceNonCoopBestOfNine(t *testing.T) {
	schemes := []servercoop.Scheme{servercoop.NonCoop, servercoop.Global, servercoop.OneChance}
	for _, spread := range []int{1, 4, 8} {
		cfg, w := quick(spread)
		res := map[[2]servercoop.Scheme]float64{}
		for _, sv := range schemes {
			for _, cl := range schemes {
				cfg.Server, cfg.Client = Side{Scheme: sv}, Side{Scheme: cl}
				res[[2]servercoop.Scheme{sv, cl}] = avg(t, cfg, w)
			}
		}
		best := res[[2]servercoop.Scheme{servercoop.OneChance, servercoop.NonCoop}]
		for k, v := range res {
			if v < best {
				t.Fatalf("config %d: %s-%s (%.3f) beats 1-N (%.3f)", spread, k[0].Letter(), k[1].Letter(), v, best)
			}
		}
		for _, cl := range schemes {
			n := res[[2]servercoop.Scheme{servercoop.NonCoop, cl}]
			for _, sv := range schemes[1:] {
				if res[[2]servercoop.Scheme{sv, cl}] >= n {
					t.Fatalf("config %d, client %s: server %s does not beat N", spread, cl.Letter(), sv.Letter())
				}
			}
		}
	}
}

// Seed 004 figures 6 and 7: 1-Chance on the clients loses at the default
// client cache but wins with twice the cache; more hops between clients and
// servers narrow its loss.
func TestClientSideSensitivity(t *testing.T) {
	cfg, w := quick(8)
	cfg.Server = allSides[2]
	run := func(clientBlocks, hops int) (n, one float64) {
		c := cfg
		c.ClientCacheBlocks, c.Hops = clientBlocks, hops
		c.Client = allSides[0]
		n = avg(t, c, w)
		c.Client = allSides[2]
		return n, avg(t, c, w)
	}
	n, one := run(256, 1)
	if one <= n {
		t.Fatalf("default client cache: 1-1 %.3f <= 1-N %.3f", one, n)
	}
	if n2, one2 := run(512, 1); one2 >= n2 {
		t.Fatalf("doubled client cache: 1-1 %.3f >= 1-N %.3f", one2, n2)
	}
	n16, one16 := run(256, 16)
	if one16-n16 >= one-n {
		t.Fatalf("16 hops: 1-1 - 1-N = %.3f, not below %.3f at 1 hop", one16-n16, one-n)
	}
}
