package hintsim

import (
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// BenchmarkAccess measures simulated accesses per second on the default
// office workload with seed 002's default parameters (42 clients, 16 MB
// caches, 128 MB discard cache).
func BenchmarkAccess(b *testing.B) {
	for _, mem := range []string{"discard", "coop", "disk"} {
		b.Run(mem, func(b *testing.B) {
			w, err := sim.Generate(sim.GenConfig{Pattern: sim.GenOffice, Accesses: 300000})
			if err != nil {
				b.Fatal(err)
			}
			acc, err := sim.Collect(w)
			if err != nil {
				b.Fatal(err)
			}
			p := sim.DefaultParams().WithOption("server_memory", mem)
			a, err := New(p)
			if err != nil {
				b.Fatal(err)
			}
			c := sim.NewCounters(p)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a.Access(acc[i%len(acc)], c)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "accesses/s")
		})
	}
}
