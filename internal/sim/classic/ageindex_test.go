package classic

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// TestRenumberingChangesNothing runs Global LRU and GMS as they are (their
// age index cuts its empty prefix when it fills) and with the index
// renumbering the ages whenever it fills (a negative slack), on generated workloads
// with writes and deletes where some blocks stay cached for long (caches
// larger than the hot set), checking the invariants after every access:
// the results must be the same, and the second run must have renumbered.
func TestRenumberingChangesNothing(t *testing.T) {
	for _, pat := range []string{sim.GenZipf, sim.GenOffice, sim.GenHotColdGlobal} {
		w := mixed(t, pat, 20000, 5, 0.2)
		p := params(6, 24, 32)
		p.GMSEpochReplacements = 10 // many epochs: MinAge is set and renumbered often
		for _, name := range []string{"globallru", "gms"} {
			var ticks [2]int64
			var got [2]sim.Metrics
			for i, slack := range []int{newAgeIndex().slack, math.MinInt32} {
				alg, err := constructors[name](p)
				if err != nil {
					t.Fatal(err)
				}
				c := cachesOf(alg)
				c.ax.slack = slack
				got[i], err = sim.Run(context.Background(), w, checked{alg, t}, p, sim.RunOptions{Algorithm: name})
				if err != nil {
					t.Fatal(err)
				}
				ticks[i] = c.tick
			}
			if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
				t.Errorf("%s on %s: renumbering %+v, without %+v", name, pat, got[1], got[0])
			}
			if ticks[1] >= ticks[0] {
				t.Errorf("%s on %s: newest age %d renumbering, %d without: never renumbered", name, pat, ticks[1], ticks[0])
			}
		}
	}
}

// TestAgeIndexBounded: a client whose one block is never evicted pins the
// oldest age while another client's hits give new ones; the index must
// stay within a small multiple of the entries, not grow with the trace.
func TestAgeIndexBounded(t *testing.T) {
	w := &sim.Slice{Label: "pinned"}
	w.Accesses = append(w.Accesses, sim.Access{Client: 0, File: 1, Block: 0, Op: sim.OpRead})
	for i := range 200000 {
		w.Accesses = append(w.Accesses, sim.Access{Client: 1, File: 2, Block: uint64(i % 3), Op: sim.OpRead})
	}
	for _, name := range []string{"globallru", "gms"} {
		alg, err := constructors[name](params(2, 4, 0))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sim.Run(context.Background(), w, alg, params(2, 4, 0), sim.RunOptions{Algorithm: name}); err != nil {
			t.Fatal(err)
		}
		if c := cachesOf(alg); cap(c.ax.at) > 4*(2*8+c.ax.slack) {
			t.Errorf("%s: age index of %d slots for at most 8 entries", name, cap(c.ax.at))
		}
	}
}
