package study

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

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

// BenchmarkZipfAlgorithm measures the algorithm alone (the trace generated,
// numbered and prescanned before the timer starts) on a Zipf workload like
// the bench traces': one client with 100 000 blocks and no server memory
// ("1": files of blocks; "obj": the same reads as objects, each block a
// file of one block, as the trace converted to oracleGeneral reads), and
// 42 clients with seed 002's table 5.2. It reports ns per access.
// Run one with -bench 'ZipfAlgorithm/hints/42'; ZIPF_ACCESSES sets the
// trace length (default 2 000 000).
func BenchmarkZipfAlgorithm(b *testing.B) {
	accesses := 2000000
	if v, err := strconv.Atoi(os.Getenv("ZIPF_ACCESSES")); err == nil && v > 0 {
		accesses = v // shorter runs under valgrind
	}
	for _, shape := range []string{"1", "obj", "42"} {
		clients := 1
		if shape == "42" {
			clients = 42
		}
		var acc []sim.Access // made by the first sub-benchmark of the shape that runs
		trace := func(b *testing.B) []sim.Access {
			if acc == nil {
				acc = zipfTrace(b, clients, accesses, shape == "obj")
			}
			return acc
		}
		p := sim.DefaultParams()
		p.WarmUp, p.Clients = 0, clients
		if clients == 1 {
			p.ClientCacheBlocks, p.ServerCacheBlocks = 100000, 0
		}
		for _, name := range []string{"baseline", "globallru", "nchance", "gms", "directory", "optimal", "hints"} {
			b.Run(name+"/"+shape, func(b *testing.B) {
				acc := trace(b)
				work := make([]sim.Access, len(acc))
				var n int64
				var cpu time.Duration
				for b.Loop() {
					b.StopTimer()
					copy(work, acc)
					alg, pp, err := Build(name, p)
					if err != nil {
						b.Fatal(err)
					}
					if nb, ok := alg.(sim.Numberer); ok {
						nb.IDs().Number(work)
					}
					if ps, ok := alg.(sim.Prescanner); ok {
						src, _ := (&sim.Slice{Accesses: work}).Open()
						if err := ps.Prescan(src); err != nil {
							b.Fatal(err)
						}
					}
					rec := sim.NewRecorder(pp)
					c0 := cpuTime()
					b.StartTimer()
					replay(alg, rec, work)
					b.StopTimer()
					cpu += cpuTime() - c0
					b.StartTimer()
					n += int64(len(work))
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/access")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/access")
			})
		}
	}
}

// cpuTime returns the process's user + system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// replay runs the accesses through alg (a function of its own so that
// callgrind can count it alone: --toggle-collect='*study.replay').
func replay(alg sim.Algorithm, rec *sim.Recorder, work []sim.Access) {
	for _, a := range work {
		rec.Begin(a.Time)
		rec.Record(a.Op, alg.Access(a, rec.Counters()))
	}
}

// zipfTrace generates the Zipf trace of the bench's shape: clients, and
// with objects the reads alone as objects (each block a file of one block).
func zipfTrace(b *testing.B, clients, accesses int, objects bool) []sim.Access {
	w, err := sim.Generate(sim.GenConfig{Pattern: sim.GenZipf, Clients: clients, Accesses: accesses, Files: 100000, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	acc, err := sim.Collect(w)
	if err != nil {
		b.Fatal(err)
	}
	if objects {
		objs := acc[:0]
		for _, a := range acc {
			if a.Op == sim.OpRead {
				a.File, a.Block = a.File<<24|a.Block, 0
				objs = append(objs, a)
			}
		}
		acc = objs
	}
	return acc
}
