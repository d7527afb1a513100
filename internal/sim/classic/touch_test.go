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
		var acc []sim.Access
		w, err := sim.Generate(g)
		if err == nil {
			acc, err = sim.Collect(w)
		}
		if err != nil {
			t.Fatal(err)
		}
		p := sim.DefaultParams()
		p.Clients, p.WarmUp, p.ClientCacheBlocks, p.ServerCacheBlocks = g.Clients, 0, 200, 300
		for _, name := range []string{"globallru", "nchance", "gms"} {
			with, n := touchedRun(t, name, p, acc, true)
			without, _ := touchedRun(t, name, p, acc, false)
			if n == 0 {
				t.Fatal("Touch never called")
			}
			if with != without {
				t.Fatalf("%s, %d clients: Touch changes the results:\nwith    %s\nwithout %s", name, g.Clients, with, without)
			}
		}
	}
}

// touchedRun replays acc through a new algorithm name, handing it (with
// touch) a window ahead every 1 to 5 accesses, and returns its
// metrics as JSON and how many windows it was handed.
func touchedRun(t *testing.T, name string, p sim.Params, acc []sim.Access, touch bool) (string, int) {
	alg, err := constructors[name](p)
	if err != nil {
		t.Fatal(err)
	}
	bogus := []sim.Access{{Client: 0, ID: 1 << 30, Op: sim.OpRead}, {Client: p.Clients, ID: 1, Op: sim.OpRead},
		{Client: 0, Op: sim.OpDelete, File: 7}}
	work := slices.Clone(acc)
	alg.(sim.Numberer).IDs().Number(work)
	rng := rand.New(rand.NewPCG(1, 2))
	rec := sim.NewRecorder(p)
	touched, next := 0, 0
	for i, a := range work {
		if touch && i == next { // then the next touch 1 to 5 accesses on
			end := min(i+1+rng.IntN(2*touchWindow), len(work))
			alg.(sim.Toucher).Touch(append(slices.Clone(work[i:end]), bogus[touched%len(bogus)]))
			next += 1 + rng.IntN(5)
			touched++
		}
		rec.Begin(a)
		rec.Record(a, alg.Access(a, rec.Counters()))
	}
	b, err := json.Marshal(rec.Metrics(name, "t", "t", 0))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), touched
}
