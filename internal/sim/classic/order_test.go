package classic

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// Seed 002 5.2.1: N-chance's random forwarding makes more disk accesses
// than GMS when most clients are active (forwarded blocks land on active
// clients and push out useful blocks); and GMS sends fewer replacement
// messages per local miss than N-chance (5.2.4), since N-chance asks the
// manager on almost every replacement.
func TestNChanceVersusGMSWithActiveClients(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	w, err := sim.Generate(sim.GenConfig{Pattern: sim.GenOffice, Clients: 16, Accesses: 120000, Active: 0.9,
		Files: 1500, Private: 150, MaxFile: 64, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	p := params(16, 64, 128)
	p.WarmUp = 30000
	n := run(t, "nchance", w, p, false)
	g := run(t, "gms", w, p, false)
	o := run(t, "optimal", w, p, false)
	l := run(t, "globallru", w, p, false)
	t.Logf("disk accesses: nchance %d gms %d globallru %d optimal %d", n.DiskAccesses, g.DiskAccesses, l.DiskAccesses, o.DiskAccesses)
	t.Logf("replacement msgs/local miss: nchance %.3f gms %.3f", n.ReplMsgsPerLocalMiss, g.ReplMsgsPerLocalMiss)
	if n.DiskAccesses <= g.DiskAccesses {
		t.Errorf("N-chance %d disk accesses, GMS %d: want N-chance more", n.DiskAccesses, g.DiskAccesses)
	}
	if n.ReplMsgsPerLocalMiss <= g.ReplMsgsPerLocalMiss {
		t.Errorf("replacement messages per local miss: N-chance %.3f <= GMS %.3f", n.ReplMsgsPerLocalMiss, g.ReplMsgsPerLocalMiss)
	}
	if n.LookupMsgsPerMiss != 3 || g.LookupMsgsPerMiss != 3 {
		t.Errorf("lookup messages per miss: N-chance %.3f GMS %.3f, want 3", n.LookupMsgsPerMiss, g.LookupMsgsPerMiss)
	}
	if o.DiskAccesses > g.DiskAccesses || o.DiskAccesses > n.DiskAccesses {
		t.Errorf("optimal %d disk accesses, more than GMS %d or N-chance %d", o.DiskAccesses, g.DiskAccesses, n.DiskAccesses)
	}
}

// TestPickIsSearch checks GMS's branchless search against
// sort.SearchFloat64s: the first client whose cumulative weight reaches the
// draw, on weights with zeros (equal cumulative weights) and at the ends.
func TestPickIsSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 70; n++ {
		for k := range uint64(200) {
			p := sim.DefaultParams()
			p.Clients = n
			g, err := NewGMS(p)
			if err != nil {
				t.Fatal(err)
			}
			sum := 0.0
			for i := range g.cum {
				if rng.IntN(3) > 0 {
					sum += float64(rng.IntN(5))
				}
				g.cum[i] = sum
			}
			if sum == 0 {
				continue
			}
			g.c.rng = rand.New(rand.NewPCG(k, 7))
			x := rand.New(rand.NewPCG(k, 7)).Float64()*sum + 1e-12 // the draw pick makes
			want := min(sort.SearchFloat64s(g.cum, x), n-1)
			if got := g.pick(); got != want {
				t.Fatalf("%d clients, cum %v, draw %v: pick %d, want %d", n, g.cum, x, got, want)
			}
		}
	}
}
