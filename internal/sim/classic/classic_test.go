package classic

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

func params(clients, k, s int) sim.Params {
	p := sim.DefaultParams()
	p.Clients, p.ClientCacheBlocks, p.ServerCacheBlocks, p.WarmUp = clients, k, s, 0
	return p
}

// reads builds a trace of reads from (client, block) pairs.
func reads(pairs ...int) *sim.Slice {
	w := &sim.Slice{Label: "tiny"}
	for i := 0; i < len(pairs); i += 2 {
		w.Accesses = append(w.Accesses, sim.Access{Client: pairs[i], File: 1, Block: uint64(pairs[i+1]), Op: sim.OpRead})
	}
	return w
}

// checked calls Check after every access.
type checked struct {
	sim.Algorithm
	t *testing.T
}

func (c checked) Access(a sim.Access, cnt *sim.Counters) sim.Outcome {
	o := c.Algorithm.Access(a, cnt)
	if err := c.Algorithm.(sim.Checker).Check(); err != nil {
		c.t.Fatalf("after %+v: %v", a, err)
	}
	return o
}

func (c checked) Prescan(src sim.Source) error {
	if ps, ok := c.Algorithm.(sim.Prescanner); ok {
		return ps.Prescan(src)
	}
	return nil
}

var constructors = map[string]func(sim.Params) (sim.Algorithm, error){
	"baseline":  func(p sim.Params) (sim.Algorithm, error) { return NewBaseline(p) },
	"globallru": func(p sim.Params) (sim.Algorithm, error) { return NewGlobalLRU(p) },
	"optimal":   func(p sim.Params) (sim.Algorithm, error) { return NewOptimal(p) },
	"nchance":   func(p sim.Params) (sim.Algorithm, error) { return NewNChance(p) },
	"gms":       func(p sim.Params) (sim.Algorithm, error) { return NewGMS(p) },
}

func run(t *testing.T, name string, w sim.Workload, p sim.Params, check bool) sim.Metrics {
	t.Helper()
	alg, err := constructors[name](p)
	if err != nil {
		t.Fatal(err)
	}
	if check {
		alg = checked{alg, t}
	}
	m, err := sim.Run(context.Background(), w, alg, p, sim.RunOptions{Algorithm: name})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBaselineTiny(t *testing.T) {
	m := run(t, "baseline", reads(0, 1, 0, 1, 1, 1, 0, 2, 0, 3, 0, 1), params(2, 2, 2), true)
	if m.Hits != (sim.Hits{Local: 1, Server: 1, Disk: 4}) || m.Counts.LookupMsgs != 10 {
		t.Errorf("hits %+v lookups %d", m.Hits, m.Counts.LookupMsgs)
	}
}

func TestNChanceTiny(t *testing.T) {
	// A=1 B=2 C=3; clients 0 and 1, one block each, no server memory.
	m := run(t, "nchance", reads(0, 1, 0, 2, 1, 3, 0, 2, 1, 2), params(2, 1, 0), true)
	c := m.Counts
	if m.Hits != (sim.Hits{Remote: 1, Disk: 4}) {
		t.Errorf("hits %+v", m.Hits)
	}
	if c.LookupMsgs != 15 || c.Forwards != 3 || c.ManagerMsgs != 20 {
		t.Errorf("lookup %d forwards %d manager %d", c.LookupMsgs, c.Forwards, c.ManagerMsgs)
	}
	if r := m.ReplByCause; r.Duplicate*5 != 4 || r.Delete*5 != 3 || r.Forward*5 != 6 {
		t.Errorf("replacement per miss %+v (misses 5)", r)
	}
}

func TestGMSTiny(t *testing.T) {
	p := params(2, 2, 0)
	p.GMSEpochReplacements = 2
	alg, _ := NewGMS(p)
	// A B C to client 0; client 1 reads B; client 0 reads D; client 1 reads E.
	w := reads(0, 1, 0, 2, 0, 3, 1, 2, 0, 4, 1, 5)
	m, err := sim.Run(context.Background(), w, checked{alg, t}, p, sim.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Hits != (sim.Hits{Remote: 1, Disk: 5}) || alg.Epochs() != 2 {
		t.Errorf("hits %+v epochs %d", m.Hits, alg.Epochs())
	}
	// manager: lookups 6×2; epochs 2×4; forward notice 1; deletes 2; singlet notice 1.
	if m.Counts.ManagerMsgs != 12+8+1+2+1 || m.Counts.Forwards != 1 {
		t.Errorf("manager %d forwards %d", m.Counts.ManagerMsgs, m.Counts.Forwards)
	}
	if r := m.ReplByCause; r.Duplicate*6 != 1 || r.Delete*6 != 2 || r.Forward*6 != 2 {
		t.Errorf("replacement per miss %+v (misses 6)", r)
	}
}

func TestGlobalLRUTiny(t *testing.T) {
	m := run(t, "globallru", reads(0, 1, 0, 2, 0, 1, 1, 2, 1, 1), params(2, 1, 0), true)
	if m.Hits != (sim.Hits{Local: 1, Remote: 2, Disk: 2}) {
		t.Errorf("hits %+v", m.Hits)
	}
}

func TestOptimalTiny(t *testing.T) {
	// One client, 2 blocks: 1 2 3 1 2 3 4 1. Belady keeps {1,3} at the
	// third access (2 is needed later than 1), then {3,2}: hits on 1 and 3.
	w := reads(0, 1, 0, 2, 0, 3, 0, 1, 0, 2, 0, 3, 0, 4, 0, 1)
	m := run(t, "optimal", w, params(1, 2, 0), true)
	if want := belady(w.Accesses, 2); m.Hits.Local != int64(want) || want != 2 {
		t.Errorf("optimal local hits %d, reference %d (want 2)", m.Hits.Local, want)
	}
}

// refLRU is the reference LRU hit count for one cache of k blocks.
func refLRU(acc []sim.Access, k int) int {
	var stack []sim.Key
	hits := 0
	for _, a := range acc {
		key := a.Key()
		i := -1
		for j, x := range stack {
			if x == key {
				i = j
			}
		}
		if i >= 0 {
			hits++
			stack = append(stack[:i], stack[i+1:]...)
		} else if len(stack) == k {
			stack = stack[1:]
		}
		if k > 0 {
			stack = append(stack, key)
		}
	}
	return hits
}

// belady is the reference Belady hit count for one cache of k blocks.
func belady(acc []sim.Access, k int) int {
	set := map[sim.Key]bool{}
	hits := 0
	nextUse := func(i int, key sim.Key) int {
		for j := i + 1; j < len(acc); j++ {
			if acc[j].Key() == key {
				return j
			}
		}
		return 1 << 30
	}
	for i, a := range acc {
		key := a.Key()
		if set[key] {
			hits++
			continue
		}
		if k == 0 {
			continue
		}
		if len(set) == k {
			var victim sim.Key
			far := -1
			for x := range set {
				if n := nextUse(i, x); n > far || n == far && fmt.Sprint(x) < fmt.Sprint(victim) {
					far, victim = n, x
				}
			}
			delete(set, victim)
		}
		set[key] = true
	}
	return hits
}

func TestSingleClientIsLRUAndBelady(t *testing.T) {
	for _, pat := range []string{sim.GenRandom, sim.GenHotColdGlobal, sim.GenZipf} {
		w, err := sim.Generate(sim.GenConfig{Pattern: pat, Clients: 1, Accesses: 1500, Blocks: 60, Files: 30, MaxFile: 6, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		acc, _ := sim.Collect(w)
		var rd []sim.Access
		for _, a := range acc {
			if a.Op == sim.OpRead {
				rd = append(rd, a)
			}
		}
		tr := &sim.Slice{Label: pat, Accesses: rd}
		for _, k := range []int{1, 4, 16} {
			p := params(1, k, 0)
			if m, want := run(t, "baseline", tr, p, false), refLRU(rd, k); m.Hits.Local != int64(want) {
				t.Errorf("%s k=%d: baseline %d hits, LRU %d", pat, k, m.Hits.Local, want)
			}
			if m, want := run(t, "optimal", tr, p, false), belady(rd, k); m.Hits.Local != int64(want) {
				t.Errorf("%s k=%d: optimal %d hits, Belady %d", pat, k, m.Hits.Local, want)
			}
		}
	}
}

// memHits is the reads served by some client memory.
func memHits(m sim.Metrics) int64 { return m.Hits.Local + m.Hits.Remote }

func TestProperties(t *testing.T) {
	for _, pat := range sim.Patterns() {
		for seed := int64(1); seed <= 2; seed++ {
			cfg := sim.GenConfig{Pattern: pat, Clients: 6, Accesses: 6000, Blocks: 300, Files: 200,
				Private: 40, MaxFile: 20, Seed: seed, Servers: 2}
			w, err := sim.Generate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := params(6, 16, 32)
			res := map[string]sim.Metrics{}
			for name := range constructors {
				res[name] = run(t, name, w, p, seed == 1)
			}
			opt := memHits(res["optimal"])
			for name, m := range res {
				if memHits(m) > opt {
					t.Errorf("%s seed %d: %s has %d client-memory hits, optimal only %d", pat, seed, name, memHits(m), opt)
				}
				if m.Hits.Local+m.Hits.Remote+m.Hits.Server+m.Hits.Disk != m.Reads {
					t.Errorf("%s: %s hits do not add up", pat, name)
				}
			}
			if g, b := memHits(res["globallru"]), memHits(res["baseline"]); g < b {
				t.Errorf("%s seed %d: global LRU %d client-memory hits < baseline %d", pat, seed, g, b)
			}
		}
	}
}

// TestFarthest checks the next-use set against a map under random adds,
// deletes and max queries, at sizes that need one to four levels.
func TestFarthest(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 63, 64, 4097, 300000} {
		f := newFarthest(n)
		ref := map[int32]bool{}
		for step := range 20000 {
			p := int32(rng.IntN(n))
			if rng.IntN(3) == 0 {
				p = int32(n - 1 - rng.IntN(min(n, 70))) // crowd the top
			}
			if ref[p] {
				f.del(p)
				delete(ref, p)
			} else {
				f.add(p)
				ref[p] = true
			}
			want := int32(-1)
			for q := range ref {
				want = max(want, q)
			}
			if got := f.max(); got != want || f.has(p) != ref[p] {
				t.Fatalf("n %d step %d: max %d, want %d", n, step, got, want)
			}
		}
		if f.len() != len(ref) {
			t.Fatalf("n %d: %d positions, want %d", n, f.len(), len(ref))
		}
	}
}

// TestMasksChangeNothing runs every classic algorithm with and without the
// blocks' holder masks (kept up to 64 clients) on generated workloads with
// writes and deletes, checking the invariants after every access: the
// results must be the same.
func TestMasksChangeNothing(t *testing.T) {
	for _, pat := range []string{sim.GenZipf, sim.GenOffice, sim.GenHotColdGlobal} {
		w := mixed(t, pat, 4000, 3, 0.3)
		p := params(6, 16, 32)
		for _, name := range []string{"baseline", "globallru", "nchance", "gms"} {
			want := run(t, name, w, p, true)
			alg, err := constructors[name](p)
			if err != nil {
				t.Fatal(err)
			}
			cachesOf(alg).masks = false
			got, err := sim.Run(context.Background(), w, checked{alg, t}, p, sim.RunOptions{Algorithm: name})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s on %s: without masks %+v, with %+v", name, pat, got, want)
			}
		}
	}
}

// mixed generates pattern pat for 6 clients on 300 blocks with writes and
// deletes.
func mixed(t *testing.T, pat string, accesses int, seed int64, write float64) sim.Workload {
	t.Helper()
	w, err := sim.Generate(sim.GenConfig{Pattern: pat, Clients: 6, Accesses: accesses, Blocks: 300, Files: 200,
		Private: 40, MaxFile: 20, Seed: seed, Write: write})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func cachesOf(alg sim.Algorithm) *caches {
	switch a := alg.(type) {
	case *Baseline:
		return a.c
	case *GlobalLRU:
		return a.c
	case *NChance:
		return a.c
	case *GMS:
		return a.c
	}
	panic(fmt.Sprintf("no caches in %T", alg))
}

// TestEntryLimits: an entry names its client in 16 bits and N-chance's
// count in 8, so larger settings are refused with ErrConfig, and the
// largest allowed are accepted.
func TestEntryLimits(t *testing.T) {
	p := params(maxClients+1, 4, 4)
	for _, name := range []string{"baseline", "globallru", "nchance", "gms"} {
		if _, err := constructors[name](p); !errors.Is(err, sim.ErrConfig) {
			t.Errorf("%s with %d clients: %v, want ErrConfig", name, p.Clients, err)
		}
	}
	p = params(4, 4, 4)
	p.NChance = 256
	if _, err := NewNChance(p); !errors.Is(err, sim.ErrConfig) {
		t.Errorf("nchance n=256: %v, want ErrConfig", err)
	}
	p.NChance = 255
	w := reads(0, 1, 1, 1, 2, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6)
	run(t, "nchance", w, p, true)
	if _, err := constructors["gms"](params(maxClients, 1, 0)); err != nil {
		t.Errorf("gms with %d clients: %v", maxClients, err)
	}
}
