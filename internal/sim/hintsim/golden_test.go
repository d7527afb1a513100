package hintsim

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from this version's results")

// goldenCase is one fixed run whose results are pinned.
type goldenCase struct {
	name string
	gen  sim.GenConfig
	p    func(sim.Params) sim.Params
}

func goldenCases() []goldenCase {
	office := sim.GenConfig{Pattern: sim.GenOffice, Accesses: 150000, Seed: 3}
	zipf := sim.GenConfig{Pattern: sim.GenZipf, Clients: 8, Accesses: 120000, Files: 3000, MaxFile: 16, Seed: 5}
	small := func(cache, server int) func(sim.Params) sim.Params {
		return func(p sim.Params) sim.Params {
			p.Clients, p.ClientCacheBlocks, p.ServerCacheBlocks = 8, cache, server
			return p
		}
	}
	var cs []goldenCase
	for _, mem := range []string{"discard", "coop", "disk"} {
		cs = append(cs, goldenCase{"office-" + mem, office, func(p sim.Params) sim.Params {
			p.ClientCacheBlocks, p.ServerCacheBlocks = 400, 2000
			return p.WithOption("server_memory", mem)
		}})
		cs = append(cs, goldenCase{"zipf-" + mem, zipf, func(p sim.Params) sim.Params {
			return small(300, 900)(p).WithOption("server_memory", mem)
		}})
	}
	cs = append(cs,
		goldenCase{"office-optimistic", office, func(p sim.Params) sim.Params {
			p.ClientCacheBlocks, p.ServerCacheBlocks = 300, 1000
			return p.WithOption("discard_test", "optimistic")
		}},
		goldenCase{"zipf-hops2", zipf, func(p sim.Params) sim.Params {
			return small(200, 0)(p).WithOption("max_hops", "2")
		}},
		goldenCase{"zipf-1client", sim.GenConfig{Pattern: sim.GenZipf, Clients: 1, Accesses: 200000, Files: 20000, MaxFile: 4, Seed: 7},
			func(p sim.Params) sim.Params {
				p.Clients, p.ClientCacheBlocks, p.ServerCacheBlocks = 1, 2000, 0
				return p
			}},
	)
	return cs
}

// TestGolden pins the results of fixed runs (every Metrics field and the
// second-master count) to those recorded before the age cache and the hint
// store were rewritten for speed: a faster version must simulate exactly
// the same thing. Regenerate with -update only for an intended change of
// the algorithm.
func TestGolden(t *testing.T) {
	got := map[string]json.RawMessage{}
	for _, gc := range goldenCases() {
		p := sim.DefaultParams()
		p.WarmUp = 0
		p = gc.p(p)
		gen := gc.gen
		if gen.Clients == 0 {
			gen.Clients = p.Clients
		}
		w, err := sim.Generate(gen)
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := sim.Run(context.Background(), w, a, p, sim.RunOptions{Algorithm: Name, Config: gc.name})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Check(); err != nil {
			t.Fatalf("%s: %v", gc.name, err)
		}
		b, err := json.Marshal(struct {
			M             sim.Metrics
			SecondMasters int64
		}{m, a.SecondMasters})
		if err != nil {
			t.Fatal(err)
		}
		got[gc.name] = b
	}
	path := filepath.Join("testdata", "golden.json")
	if *update {
		b, _ := json.MarshalIndent(got, "", " ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	for name, g := range got {
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no recorded result", name)
			continue
		}
		if gs, ws := compact(g), compact(w); gs != ws {
			t.Errorf("%s: results differ from the recorded ones\n got %s\nwant %s", name, gs, ws)
		}
	}
}

func compact(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Sprint(err)
	}
	out, _ := json.Marshal(v)
	return strings.TrimSpace(string(out))
}
