package classic

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// Touch only prefetches: runs handed windows ahead at random places (with
// accesses no run has: blocks never numbered, clients out of range) give
// the same metrics as runs never touched, for every algorithm that
// touches, with many clients and with one, on workloads with sharing,
// writes and deletes.
func TestTouchChangesNothing(t *testing.T) {
	for _, g := range []sim.GenConfig{
		{Pattern: sim.GenOffice, Clients: 8, Accesses: 40000, Seed: 3},
		{Pattern: sim.GenZipf, Clients: 12, Accesses: 40000, Files: 500, Seed: 5},
		{Pattern: sim.GenZipf, Clients: 1, Accesses: 20000, Files: 500, Seed: 6},
	} {
		w, err := sim.Generate(g)
		if err != nil {
			t.Fatal(err)
		}
		acc, err := sim.Collect(w)
		if err != nil {
			t.Fatal(err)
		}
		p := sim.DefaultParams()
		p.Clients, p.WarmUp, p.ClientCacheBlocks, p.ServerCacheBlocks = g.Clients, 0, 200, 300
		bogus := []sim.Access{{Client: 0, ID: 1 << 30, Op: sim.OpRead}, {Client: g.Clients, ID: 1, Op: sim.OpRead},
			{Client: 0, Op: sim.OpDelete, File: 7}}
		for _, name := range []string{"globallru", "nchance", "gms"} {
			run := func(touch bool) (string, int) {
				alg, err := constructors[name](p)
				if err != nil {
					t.Fatal(err)
				}
				tc := alg.(sim.Toucher)
				work := slices.Clone(acc)
				alg.(sim.Numberer).IDs().Number(work)
				rng := rand.New(rand.NewPCG(1, 2))
				rec := sim.NewRecorder(p)
				touched := 0
				for i, a := range work {
					if touch && rng.IntN(3) == 0 {
						ahead := slices.Clone(work[i:min(i+1+rng.IntN(2*touchWindow), len(work))])
						tc.Touch(append(ahead, bogus[rng.IntN(len(bogus))]))
						touched++
					}
					rec.Begin(a)
					rec.Record(a, alg.Access(a, rec.Counters()))
				}
				b, _ := json.Marshal(rec.Metrics(name, "t", "t", 0))
				return string(b), touched
			}
			with, n := run(true)
			without, _ := run(false)
			if n == 0 {
				t.Fatal("Touch never called")
			}
			if with != without {
				t.Fatalf("%s, %d clients: Touch changes the results:\nwith    %s\nwithout %s", name, g.Clients, with, without)
			}
		}
	}
}
