package directory

import (
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/block"
)

// chainDepths asks for b0 from clients 1..n at once (nobody has it yet)
// and returns each requester's depth: 1 when the server served it, the
// holder's depth + 1 when it was forwarded to a holder still waiting.
func chainDepths(t *testing.T, d *Directory, n int) map[ClientID]int {
	t.Helper()
	depth := map[ClientID]int{}
	for c := ClientID(1); c <= ClientID(n); c++ {
		a := d.Request(0, c, b0, 1)
		switch a.Kind {
		case ActServe:
			depth[c] = 1
		case ActForward:
			depth[c] = depth[a.To] + 1
		}
	}
	return depth
}

func maxDepth(m map[ClientID]int) int {
	deepest := 0
	for _, v := range m {
		deepest = max(deepest, v)
	}
	return deepest
}

// Sixteen clients asking for one block at once: the balanced choice alone
// sends each to the newest requester (the least loaded, still waiting
// itself), a chain as deep as the readers; swarm forwarding bounds the
// waits at MaxDepth, with no holder given more than a few copies to send.
func TestSwarmSimultaneousRequestsFormATree(t *testing.T) {
	const n = 16
	if got := maxDepth(chainDepths(t, newDir(t, Config{Balanced: true}), n)); got < n/2 {
		t.Fatalf("balanced without swarm: deepest wait %d; the chain this test guards against is gone", got)
	}
	d := newDir(t, Config{Balanced: true, Swarm: true})
	depth := chainDepths(t, d, n)
	if got := maxDepth(depth); got > DefaultMaxDepth {
		t.Fatalf("swarm: deepest wait %d, want at most %d (%v)", got, DefaultMaxDepth, depth)
	}
	for c := ClientID(1); c <= n; c++ {
		if got := d.Depth(0, c, b0); got != depth[c] {
			t.Errorf("Depth(%d) = %d, want %d", c, got, depth[c])
		}
		if cs, _ := d.ClientStats(c); cs.Forwards > n/2 {
			t.Errorf("client %d has %d forwards of one block to serve", c, cs.Forwards)
		}
	}
	if s := d.Stats(); s.ServedByServer != 1 {
		t.Errorf("server served %d, want 1 (the first request only)", s.ServedByServer)
	}
}

// A holder that confirmed the block (Held) wins over one still receiving
// it at equal outstanding copies: without the confirmation the least
// loaded one, still receiving, is chosen.
func TestSwarmForwardsToTheHolderThatHasTheBlock(t *testing.T) {
	for _, confirm := range []bool{false, true} {
		d := newDir(t, Config{Balanced: true, Swarm: true})
		wantAct(t, d.Request(0, 1, b0, 1), ActServe, 0)
		wantAct(t, d.Request(0, 2, b0, 1), ActForward, 1)
		d.Confirm(0, 2, []block.ID{b0})
		wantAct(t, d.Request(0, 3, b0, 1), ActForward, 2) // 1 and 2 have no copy to send; 2 the lower load
		if confirm {
			d.Confirm(0, 1, []block.ID{b0})
		}
		// 1: no copy to send, depth 1 (0 confirmed); 2: one copy; 3: depth 1.
		want := ClientID(3)
		if confirm {
			want = 1
		}
		wantAct(t, d.Request(0, 4, b0, 1), ActForward, want)
		if confirm && d.Depth(0, 1, b0) != 0 {
			t.Errorf("confirmed holder at depth %d, want 0", d.Depth(0, 1, b0))
		}
	}
}

// Confirm records no holder: a client cannot make itself one for a block
// it never asked for (it could not be forwarded to it otherwise either).
func TestSwarmConfirmRecordsNoHolder(t *testing.T) {
	d := newDir(t, Config{Balanced: true, Swarm: true})
	d.Confirm(0, 5, []block.ID{b0, b1})
	if h := d.Holders(b0); h != nil {
		t.Fatalf("holders of b0 after an unasked Confirm: %v", h)
	}
	wantAct(t, d.Request(0, 1, b0, 1), ActServe, 0)
}

// An unconfirmed record counts as a holder that has the block once
// PendingTTL has passed (a client that never confirms); and the records
// are bounded by Entries.
func TestSwarmPendingRecordsExpireAndAreBounded(t *testing.T) {
	d := newDir(t, Config{Balanced: true, Swarm: true, Entries: 4})
	wantAct(t, d.Request(0, 1, b0, 1), ActServe, 0)
	if got := d.Depth(0, 1, b0); got != 1 {
		t.Fatalf("depth = %d, want 1", got)
	}
	if got := d.Depth(DefaultPendingTTL+time.Second, 1, b0); got != 0 {
		t.Fatalf("depth after the TTL = %d, want 0", got)
	}
	for i := uint64(0); i < 20; i++ {
		d.Request(time.Duration(i)*DefaultPendingTTL, 2, block.ID{File: 3, Index: i}, 1)
		if len(d.pend) > 4 {
			t.Fatalf("%d pending records, want at most Entries = 4", len(d.pend))
		}
	}
}

// Swarm off (the simulator's configurations): Confirm does nothing and
// the decisions are balanced forwarding's.
func TestSwarmOffLeavesBalancedAlone(t *testing.T) {
	a, b := newDir(t, Config{Balanced: true}), newDir(t, Config{Balanced: true})
	for c := ClientID(1); c <= 8; c++ {
		b.Confirm(0, c-1, []block.ID{b0})
		x, y := a.Request(0, c, b0, 1), b.Request(0, c, b0, 1)
		if x != y {
			t.Fatalf("request %d: %+v vs %+v", c, x, y)
		}
	}
}

func TestSwarmConfigRejectsBadDepth(t *testing.T) {
	if _, err := New(Config{MaxDepth: -1}); err == nil {
		t.Fatal("max depth -1 accepted")
	}
}

// A forward is outstanding at its holder until the requester confirms the
// block or asks again; a holder that has fallen behind (copies to send,
// unconfirmed) is passed over for one that has not, though the latter had
// more forwards lately.
func TestSwarmOutstandingForwards(t *testing.T) {
	d := newDir(t, Config{Balanced: true, Swarm: true})
	wantAct(t, d.Request(0, 1, b0, 1), ActServe, 0)
	d.Confirm(0, 1, []block.ID{b0})
	wantAct(t, d.Request(0, 2, b0, 1), ActForward, 1)
	d.Confirm(0, 2, []block.ID{b0})
	// 2 serves six copies of other blocks, each confirmed: busy, not behind.
	for i := range uint64(6) {
		id := block.ID{File: 8, Index: i}
		wantAct(t, d.Request(0, 2, id, 1), ActServe, 0)
		d.Confirm(0, 2, []block.ID{id})
		wantAct(t, d.Request(0, ClientID(10+i), id, 1), ActForward, 2)
		d.Confirm(0, ClientID(10+i), []block.ID{id})
	}
	// 1 has two copies to send that have not arrived.
	var late []block.ID
	for i := range uint64(2) {
		id := block.ID{File: 9, Index: i}
		wantAct(t, d.Request(0, 1, id, 1), ActServe, 0)
		d.Confirm(0, 1, []block.ID{id})
		wantAct(t, d.Request(0, ClientID(20+i), id, 1), ActForward, 1)
		late = append(late, id)
	}
	if o1, o2 := d.Outstanding(1), d.Outstanding(2); o1 != 2 || o2 != 0 {
		t.Fatalf("outstanding = %d at 1, %d at 2; want 2 and 0", o1, o2)
	}
	wantAct(t, d.Request(0, 5, b0, 1), ActForward, 2)
	d.Retry(0, 20, late[0], 1, 1)
	d.Confirm(0, 21, late[1:])
	if got := d.Outstanding(1); got != 0 {
		t.Fatalf("outstanding at 1 after a retry and a confirmation = %d, want 0", got)
	}
}
