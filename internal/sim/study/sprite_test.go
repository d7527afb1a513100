package study

import (
	"context"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// TestSpriteQuick runs the sprite study on a tenth of each period and
// checks the thesis's orderings: the hint-based manager load is below
// GMS's and N-chance's, manager-based lookup costs 3 messages per miss and
// hint-based lookup at least 2.
func TestSpriteQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every algorithm on four workloads")
	}
	r, err := SpriteStudy(context.Background(), &Env{Quick: true, Params: sim.DefaultParams()})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tables) != 3 {
		t.Fatalf("%d tables", len(r.Tables))
	}
	for _, p := range sim.SpritePeriods() {
		h, ok1 := find(r.Rows, "hints", p.Name)
		g, ok2 := find(r.Rows, "gms", p.Name)
		n, ok3 := find(r.Rows, "nchance", p.Name)
		if !ok1 || !ok2 || !ok3 {
			t.Fatalf("%s: rows missing", p.Name)
		}
		if h.ManagerMsgsPerAccess >= g.ManagerMsgsPerAccess || h.ManagerMsgsPerAccess >= n.ManagerMsgsPerAccess {
			t.Errorf("%s: manager load hints %.4f, gms %.4f, nchance %.4f", p.Name, h.ManagerMsgsPerAccess, g.ManagerMsgsPerAccess, n.ManagerMsgsPerAccess)
		}
		if g.LookupMsgsPerMiss != 3 || n.LookupMsgsPerMiss != 3 || h.LookupMsgsPerMiss < 2 {
			t.Errorf("%s: lookup messages per miss hints %.3f, gms %.3f, nchance %.3f", p.Name, h.LookupMsgsPerMiss, g.LookupMsgsPerMiss, n.LookupMsgsPerMiss)
		}
	}
}
