package dirsim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// Touch only reads: a simulation handed windows ahead at random places
// (with accesses no simulation has: clients out of range, blocks never
// numbered) gives the same metrics, directory and holder counters as one
// never touched — with shared rows, with per-client tables and with a lone
// client, on workloads with sharing, writes, file changes and evictions.
func TestTouchChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    sim.GenConfig
		rows bool
	}{
		{"office-rows", sim.GenConfig{Pattern: sim.GenOffice, Clients: 8, Accesses: 60000, Seed: 3}, true},
		{"office-tables", sim.GenConfig{Pattern: sim.GenOffice, Clients: 8, Accesses: 60000, Seed: 3}, false},
		{"zipf-rows", sim.GenConfig{Pattern: sim.GenZipf, Clients: 12, Accesses: 60000, Files: 500, Seed: 5}, true},
		{"zipf-lone", sim.GenConfig{Pattern: sim.GenZipf, Clients: 1, Accesses: 60000, Files: 500, Seed: 6}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := sim.Generate(tc.g)
			if err != nil {
				t.Fatal(err)
			}
			acc, err := sim.Collect(w)
			if err != nil {
				t.Fatal(err)
			}
			p := sim.DefaultParams()
			p.Clients, p.WarmUp = tc.g.Clients, 0
			p.ClientCacheBlocks, p.ServerCacheBlocks = 300, 500
			p = p.WithOption(OptQueueLen, "20").WithOption(OptKeepOwn, "on")
			bogus := []sim.Access{{Client: tc.g.Clients, ID: 1, Op: sim.OpRead}, {Client: -1, ID: 2, Op: sim.OpRead},
				{Client: 0, ID: 1 << 30, Op: sim.OpRead}, {Client: 0, Op: sim.OpDelete, File: 7}}
			run := func(touch bool) (string, int) {
				s := newSim(t, p)
				if !tc.rows {
					withoutRows(s)
				}
				work := slices.Clone(acc)
				s.IDs().Number(work)
				rng := rand.New(rand.NewPCG(1, 2))
				rec := sim.NewRecorder(p)
				touched := 0
				for i, a := range work {
					if touch && rng.IntN(3) == 0 {
						ahead := slices.Clone(work[i:min(i+1+rng.IntN(2*touchWindow), len(work))])
						ahead = append(ahead, bogus[rng.IntN(len(bogus))])
						s.Touch(ahead)
						touched++
					}
					rec.Begin(a.Time)
					rec.Record(a.Op, s.Access(a, rec.Counters()))
				}
				return s.summary(t, rec.Metrics("directory", "t", "t", 0)), touched
			}
			with, n := run(true)
			without, _ := run(false)
			if n == 0 {
				t.Fatal("Touch never called")
			}
			if with != without {
				t.Fatalf("Touch changes the results:\nwith    %s\nwithout %s", with, without)
			}
		})
	}
}
