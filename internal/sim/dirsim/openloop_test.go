package dirsim

import (
	"context"
	"math"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
	"github.com/coopfs/coopfs/internal/sim/classic"
)

// An open-loop generated trace (accesses at nominal times, one a
// millisecond over all clients) is what `sim run --gen zipf` replays. On it
// the directory's default cost model must be the classic algorithms' —
// each read its layer's latency and hops, no queueing — or a single disk of
// 15.85 ms, asked every few milliseconds, queues without bound and the
// average grows with the trace (hundreds of seconds an access at 42 to
// 1,000 clients). So: NFS on dirsim's cost model equals the classic
// baseline exactly, and no directory read costs more than its worst path
// (a forward miss, then the disk).
func TestOpenLoopDefaultCostModel(t *testing.T) {
	for _, clients := range []int{42, 300} {
		p := sim.DefaultParams()
		p.Clients, p.WarmUp = clients, 0
		p.ClientCacheBlocks, p.ServerCacheBlocks = 256, 4096
		gen := sim.GenConfig{Pattern: sim.GenZipf, Clients: clients, Accesses: 60000, Files: 4000, MaxFile: 16, Seed: 3}
		run := func(alg sim.Algorithm) sim.Metrics {
			t.Helper()
			g, err := sim.Generate(gen)
			if err != nil {
				t.Fatal(err)
			}
			m, err := sim.Run(context.Background(), g, alg, p, sim.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		base, err := classic.NewBaseline(p)
		if err != nil {
			t.Fatal(err)
		}
		nfs := run(newSim(t, p.WithOption(OptPolicy, "none")))
		want := run(base)
		if math.Abs(nfs.AvgAccessMs-want.AvgAccessMs) > 1e-9*want.AvgAccessMs {
			t.Errorf("%d clients: nfs %.6f ms an access, the classic baseline %.6f: the cost models differ", clients, nfs.AvgAccessMs, want.AvgAccessMs)
		}
		dir := run(newSim(t, p))
		worst := p.DiskMs + 3*p.MessageMs
		if dir.AvgAccessMs <= 0 || dir.AvgAccessMs > worst {
			t.Errorf("%d clients: directory %.3f ms an access, above the worst read (%.2f ms): reads queue on an open-loop trace", clients, dir.AvgAccessMs, worst)
		}
		if dir.Breakdown.Extra != 0 {
			t.Errorf("%d clients: %.3f ms of queueing without contention=on", clients, dir.Breakdown.Extra)
		}
		t.Logf("%d clients: nfs %.3f ms, baseline %.3f ms, directory %.3f ms an access", clients, nfs.AvgAccessMs, want.AvgAccessMs, dir.AvgAccessMs)
	}
}
