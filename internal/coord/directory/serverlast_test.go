package directory

import "testing"

// The rotation wraps after the highest holder: in the seed's rotation the
// server (holding the block in memory) takes that turn; with ServerLast a
// client does, and the server serves only blocks no client can.
func TestServerLastKeepsTheServerOutOfTheRotation(t *testing.T) {
	for _, serverLast := range []bool{false, true} {
		d := newDir(t, Config{ServerLast: serverLast})
		d.ServerCached(b0)
		a := d.Request(0, 3, b0, 1)
		if a.Kind != ActServe || !a.FromMemory {
			t.Fatalf("serverLast=%v: first request: %+v, want served from memory", serverLast, a)
		}
		wantAct(t, d.Request(0, 2, b0, 1), ActForward, 3)
		a = d.Request(0, 1, b0, 1) // holders 2 and 3, the rotation wraps
		if serverLast {
			wantAct(t, a, ActForward, 2)
		} else if a.Kind != ActServe || !a.FromMemory {
			t.Fatalf("seed rotation: wrap gave %+v, want the server from memory", a)
		}
		// A block only the server holds is still served from memory.
		if a := d.Request(0, 1, b1, 1); a.Kind != ActServe {
			t.Fatalf("serverLast=%v: block without holders: %+v", serverLast, a)
		}
	}
}

// Balanced forwarding spreads the copies of a block over the holders by
// their recent forwards, and leaves the server out while a client can serve.
func TestBalancedForwardsToTheLeastLoadedHolder(t *testing.T) {
	d := newDir(t, Config{Balanced: true})
	d.ServerCached(b0)
	d.ServerCached(b1)
	if a := d.Request(0, 1, b0, 1); a.Kind != ActServe || !a.FromMemory {
		t.Fatalf("first request: %+v", a)
	}
	wantAct(t, d.Request(0, 2, b0, 1), ActForward, 1) // 1: load 1
	wantAct(t, d.Request(0, 3, b0, 1), ActForward, 2) // 2 (load 0) beats 1 (load 1)
	wantAct(t, d.Request(0, 4, b0, 1), ActForward, 3) // 3 (load 0)
	// Now 1, 2, 3 carry one forward each and 4 none: 4 takes the next.
	wantAct(t, d.Request(0, 5, b0, 1), ActForward, 4)
	// Another block held by 1 and 4 only: 4's load (1) equals 1's; the
	// rotation breaks the tie (after the entry's last, the server).
	d.Request(0, 1, b1, 1)
	wantAct(t, d.Request(0, 4, b1, 1), ActForward, 1)
	a := d.Request(0, 6, b1, 1) // holders 1 (load 2) and 4 (load 1)
	wantAct(t, a, ActForward, 4)
	// Loads decay: long after, the tie is back to rotation order.
	st, _ := d.ClientStats(4)
	if st.Forwards != 2 {
		t.Fatalf("client 4 forwards = %d, want 2", st.Forwards)
	}
	later := 10 * d.Config().LoadHalfLife
	wantAct(t, d.Request(later, 7, b1, 1), ActForward, 6) // all loads ~0: next after 4 is 6
}
