package study

import (
	"context"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// BenchmarkRegistered measures accesses per second of every registered
// algorithm on the same in-memory office workload with the seed 002
// parameters (algorithms that reject them are skipped).
func BenchmarkRegistered(b *testing.B) {
	w, err := sim.Generate(sim.GenConfig{Pattern: sim.GenOffice, Clients: 42, Accesses: 300000, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	acc, err := sim.Collect(w)
	if err != nil {
		b.Fatal(err)
	}
	tr := &sim.Slice{Label: "office", Accesses: acc}
	p := sim.DefaultParams()
	p.WarmUp = 0
	for _, a := range Algorithms() {
		b.Run(a.Name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				alg, pp, err := Build(a.Name, p)
				if err != nil {
					b.Skip(err)
				}
				if _, err := sim.Run(context.Background(), tr, alg, pp, sim.RunOptions{}); err != nil {
					b.Skip(err)
				}
				n += int64(len(acc))
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "accesses/s")
		})
	}
}
