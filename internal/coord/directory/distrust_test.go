package directory

import (
	"slices"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
)

// A distrusted client is purged, is never forwarded to again — not after
// its own requests, retries or discards, which clear Failed — and is still
// served.
func TestDistrustedIsNeverAHolder(t *testing.T) {
	for _, balanced := range []bool{false, true} {
		d := newDir(t, Config{Balanced: balanced})
		wantAct(t, d.Request(0, 1, b0, 1), ActServe, 0)
		wantAct(t, d.Request(0, 2, b0, 1), ActForward, 1)
		d.Distrust(1)
		if got := d.Holders(b0); !slices.Equal(got, []ClientID{2}) {
			t.Fatalf("holders after Distrust(1) = %v, want [2]", got)
		}
		// Client 1 keeps reading: served, never recorded.
		for _, bid := range []block.ID{b0, b1} {
			a := d.Request(0, 1, bid, 1)
			if a.Kind == ActForward && a.To == 1 {
				t.Fatal("a request was forwarded to the distrusted client")
			}
		}
		d.Retry(0, 1, b1, 1, NoClient)
		d.Discarded(1, nil)
		for c := ClientID(3); c < 8; c++ {
			for _, bid := range []block.ID{b0, b1} {
				a := d.Request(0, c, bid, 1)
				if a.Kind == ActForward && a.To == 1 {
					t.Fatalf("balanced=%v: request from %d forwarded to the distrusted client", balanced, c)
				}
			}
		}
		if st, _ := d.ClientStats(1); !st.Distrusted {
			t.Error("ClientStats does not say distrusted")
		}
		if d.Stats().Distrusted != 1 {
			t.Errorf("Stats.Distrusted = %d, want 1", d.Stats().Distrusted)
		}
		d.ServerCached(b0) // the served-from-memory path with no entry
		d.Distrust(9)
		d.Request(0, 9, c0, 1)
		if d.Request(0, 9, c0, 1).Kind != ActServe {
			t.Error("a distrusted client's own block was forwarded")
		}
	}
}
