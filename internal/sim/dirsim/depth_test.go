package dirsim

import (
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/sim"
)

// Clients reading one block a few microseconds apart are forwarded to
// holders whose own copies are still on their way: the chain of waits
// shows as depths above 1. Read far apart (each after the last copy
// arrived), every peer read has depth 0.
func TestForwardDepthChains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gap     time.Duration
		wantMax func(int) bool
	}{
		{"at once", 10 * time.Microsecond, func(m int) bool { return m >= 2 }},
		{"apart", time.Second, func(m int) bool { return m == 0 }},
	} {
		p := sim.DefaultParams()
		p.Clients, p.WarmUp = 16, 0
		p.ClientCacheBlocks, p.ServerCacheBlocks = 16, 16
		s := newSim(t, p)
		c := sim.NewCounters(p)
		for i := range p.Clients {
			s.Access(sim.Access{Time: time.Duration(i) * tc.gap, Client: i, File: 1, Block: 0, Op: sim.OpRead}, c)
		}
		st := s.ForwardDepth()
		if st.Reads != c.ForwardedReqs-c.ForwardMisses || st.Reads == 0 {
			t.Fatalf("%s: %d peer reads in the depths, %d forwards, %d misses", tc.name, st.Reads, c.ForwardedReqs, c.ForwardMisses)
		}
		if !tc.wantMax(st.Max) || st.Mean < 0 || st.P99 > st.Max || (st.Max > 0) != (st.Waited > 0) {
			t.Fatalf("%s: depths %+v", tc.name, st)
		}
		t.Logf("%s: %+v", tc.name, st)
	}
}

func TestDepthOf(t *testing.T) {
	st := DepthOf([]int64{98, 1, 0, 1})
	if st.Reads != 100 || st.Waited != 2 || st.Max != 3 || st.P99 != 1 || st.Mean != 0.04 {
		t.Fatalf("%+v", st)
	}
	if st := DepthOf(nil); st.Reads != 0 || st.Max != 0 || st.Mean != 0 {
		t.Fatalf("empty: %+v", st)
	}
}
