package classic

import (
	"context"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/coopfs/coopfs/internal/sim"
)

// untouched hides an algorithm's sim.Toucher, so that Run never touches
// ahead.
type untouched struct{ sim.Algorithm }

func (u untouched) IDs() *sim.IDs { return u.Algorithm.(sim.Numberer).IDs() }

// BenchmarkTouchAB replays the 42-client oracleGeneralOpNS trace named by
// $COOPFS_TOUCH_TRACE (the suite's z42.oracleGeneralOpNS, or a prefix of
// it) through Global LRU, N-chance and GMS with and without their
// prefetches ahead (Touch), alternating the two in one process (untouched
// first in even pairs) so that both see the same load and the same build.
// Per access it reports the medians of the wall time and of the
// simulating thread's own CPU time (the thread is locked while Run
// simulates; the reader's goroutine runs on another), the median ratios
// touched/untouched and in how many pairs the touched run was faster.
func BenchmarkTouchAB(b *testing.B) {
	path := os.Getenv("COOPFS_TOUCH_TRACE")
	if path == "" {
		b.Skip("set COOPFS_TOUCH_TRACE to a 42-client oracleGeneralOpNS trace")
	}
	w := &sim.File{Path: path, Format: sim.FormatOracleNS, Options: sim.ReadOptions{Sizes: sim.SizesIgnore}}
	p := sim.DefaultParams()
	p.WarmUp = 0
	for _, name := range []string{"globallru", "nchance", "gms"} {
		b.Run(name, func(b *testing.B) {
			var cpu, wall [2][]float64 // [0] untouched, [1] touched
			for i := 0; b.Loop(); i++ {
				for k := range 2 {
					touch := (k+i)%2 == 1
					c, w := timedRun(b, name, w, p, touch)
					v := 0
					if touch {
						v = 1
					}
					cpu[v], wall[v] = append(cpu[v], c), append(wall[v], w)
				}
			}
			reportAB(b, "cpu", cpu)
			reportAB(b, "wall", wall)
		})
	}
}

// timedRun runs a new algorithm name on w (its Toucher hidden unless
// touch) and returns the simulating thread's CPU time and the wall time,
// in nanoseconds an access.
func timedRun(b *testing.B, name string, w sim.Workload, p sim.Params, touch bool) (cpu, wall float64) {
	alg, err := constructors[name](p)
	if err != nil {
		b.Fatal(err)
	}
	if !touch {
		alg = untouched{alg}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, t0 := threadCPU(), time.Now()
	m, err := sim.Run(context.Background(), w, alg, p, sim.RunOptions{})
	if err != nil {
		b.Fatal(err)
	}
	n := float64(m.Accesses)
	return float64(threadCPU()-c0) / n, float64(time.Since(t0)) / n
}

// reportAB reports the medians of x[0] (untouched) and x[1] (touched),
// the median of the pairs' ratios x[1]/x[0] and in how many pairs x[1]
// was lower.
func reportAB(b *testing.B, unit string, x [2][]float64) {
	r := make([]float64, len(x[0]))
	faster := 0
	for i := range r {
		r[i] = x[1][i] / x[0][i]
		if r[i] < 1 {
			faster++
		}
	}
	b.ReportMetric(median(x[0]), unit+"-ns/acc-plain")
	b.ReportMetric(median(x[1]), unit+"-ns/acc-touched")
	b.ReportMetric(median(r), unit+"-touched/plain")
	b.ReportMetric(float64(faster), unit+"-pairs-faster")
}

// threadCPU returns the calling thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}
