package classic

import (
	"context"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// BenchmarkAlgorithms measures accesses per second of each algorithm on an
// office workload with the seed's parameters (42 clients, 16 MB caches),
// the workload held in memory so only the algorithm is timed.
func BenchmarkAlgorithms(b *testing.B) {
	w, err := sim.Generate(sim.GenConfig{Pattern: sim.GenOffice, Clients: 42, Accesses: 500000, Seed: 1})
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
	for _, name := range []string{"baseline", "globallru", "nchance", "gms", "optimal"} {
		b.Run(name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				alg, _ := constructors[name](p)
				if _, err := sim.Run(context.Background(), tr, alg, p, sim.RunOptions{}); err != nil {
					b.Fatal(err)
				}
				n += int64(len(acc))
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "accesses/s")
		})
	}
}

// BenchmarkBaselineLRU is the baseline's LRU path alone: one client, a
// random pattern with mostly hits and misses mixed.
func BenchmarkBaselineLRU(b *testing.B) {
	w, _ := sim.Generate(sim.GenConfig{Pattern: sim.GenHotColdGlobal, Clients: 1, Accesses: 1000000, Blocks: 20000, Seed: 1})
	acc, _ := sim.Collect(w)
	tr := &sim.Slice{Accesses: acc}
	p := sim.DefaultParams()
	p.Clients, p.WarmUp, p.ServerCacheBlocks = 1, 0, 0
	var n int64
	for b.Loop() {
		alg, _ := NewBaseline(p)
		sim.Run(context.Background(), tr, alg, p, sim.RunOptions{})
		n += int64(len(acc))
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "accesses/s")
}
