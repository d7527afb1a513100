package hints

import (
	"testing"

	"github.com/coopfs/coopfs/internal/block"
)

func blk(f, i uint64) block.ID { return block.ID{File: f, Index: i} }

// newClients makes n clients (ids 0..n-1, boot 1) with caches of size cap
// that all know each other.
func newClients(t *testing.T, n, cap int, test DiscardTest) []*Client {
	t.Helper()
	ids := make([]ClientID, n)
	for i := range ids {
		ids[i] = ClientID(i)
	}
	cs := make([]*Client, n)
	for i := range cs {
		c, err := NewClient(ClientConfig{ID: ClientID(i), Boot: 1, CacheBlocks: cap, Peers: ids, Discard: test})
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	return cs
}

func checkAll(t *testing.T, cs ...*Client) {
	t.Helper()
	for _, c := range cs {
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConfigRejectsEmptyCache(t *testing.T) {
	if _, err := NewClient(ClientConfig{ID: 0, CacheBlocks: 0}); err == nil {
		t.Fatal("a client with no cache was accepted")
	}
	if _, err := NewServer(ServerConfig{Memory: MemoryCoop, CoopID: 1, Clients: []ClientID{0, 1}}); err == nil {
		t.Fatal("a coop id equal to a client id was accepted")
	}
}

func TestHintHandoffOnOpen(t *testing.T) {
	cs := newClients(t, 2, 4, DiscardPessimistic)
	a, b := cs[0], cs[1]
	s, err := NewServer(ServerConfig{MemoryBlocks: 4})
	if err != nil {
		t.Fatal(err)
	}
	// A opens first: nobody to take hints from.
	if r := s.Open(1, 0, 1, 7, false); r.HintsFrom != NoClient {
		t.Fatalf("first open got hints from %d", r.HintsFrom)
	}
	if r := a.Read(2, blk(7, 0), 0); r.Kind != RouteServer || r.HintUsed {
		t.Fatalf("cold miss routed %+v, want server", r)
	}
	if f := s.Fetch(2, blk(7, 0)); f.Memory || !f.Master {
		t.Fatalf("cold fetch %+v, want disk and master", f)
	}
	a.Fill(2, blk(7, 0), 0, true, NoClient, 0, false)
	// B opens: the manager hands B the hints of A, the last opener.
	r := s.Open(3, 1, 1, 7, false)
	if r.HintsFrom != 0 || r.HintsBoot != 1 {
		t.Fatalf("second open: hints from %d boot %d, want 0 boot 1", r.HintsFrom, r.HintsBoot)
	}
	if n := b.ImportHints(7, 0, a.ExportHints(7, nil)); n != 1 {
		t.Fatalf("imported %d hints, want 1", n)
	}
	rt := b.Read(4, blk(7, 0), 0)
	if rt.Kind != RoutePeer || rt.Peer != 0 || !rt.HintUsed {
		t.Fatalf("B's miss routed %+v, want peer 0", rt)
	}
	sv := a.ServeRequest(4, blk(7, 0), 0, 1, 1)
	if sv.Kind != RouteLocal || !sv.Master {
		t.Fatalf("A answered %+v, want to serve its master copy", sv)
	}
	b.Fill(4, blk(7, 0), 0, false, 0, 1, true)
	if _, m := b.Has(blk(7, 0)); m {
		t.Fatal("a copy from a peer became a master copy")
	}
	if h, _ := b.HintFor(blk(7, 0)); h.Holder != 0 {
		t.Fatalf("B hints %d, want 0", h.Holder)
	}
	// A opens again: hints come from B now.
	if r := s.Open(5, 0, 1, 7, false); r.HintsFrom != 1 {
		t.Fatalf("third open: hints from %d, want 1", r.HintsFrom)
	}
	checkAll(t, a, b)
}

func TestChainLookup(t *testing.T) {
	cs := newClients(t, 3, 1, DiscardNever)
	a, b, c := cs[0], cs[1], cs[2]
	x, y := blk(1, 0), blk(1, 1)
	a.Fill(1, x, 0, true, NoClient, 0, false)
	b.ImportHints(1, 0, a.ExportHints(1, nil)) // B: x at A
	// A fills y: x (master) is forwarded; everyone is Free, ties go to the
	// first peer in order, which for A is B... make C the oldest instead.
	a.ForwardAcked(1, BootAge{Age: 100, Boot: 1})
	ev := a.Fill(2, y, 0, true, NoClient, 0, false)
	if ev.Kind != EvictForward || ev.To != 2 || ev.Block != x || ev.Stamp != 1 {
		t.Fatalf("eviction %+v, want forward of x to 2", ev)
	}
	ack := c.AcceptForward(2, 0, 1, x, 0, ev.Stamp, ev.FromOldest)
	a.ForwardAcked(2, ack.Oldest)
	// B still believes A: A follows its own hint to C, C serves.
	r := b.Read(3, x, 0)
	if r.Kind != RoutePeer || r.Peer != 0 {
		t.Fatalf("B routed %+v, want A", r)
	}
	r = a.ServeRequest(3, x, 0, 1, 1)
	if r.Kind != RoutePeer || r.Peer != 2 {
		t.Fatalf("A routed %+v, want C", r)
	}
	r = c.ServeRequest(3, x, 0, 1, 2)
	if r.Kind != RouteLocal || !r.Master {
		t.Fatalf("C answered %+v, want to serve the master", r)
	}
	// A request that reaches a holder without a hint goes to the server.
	if r := b.ServeRequest(4, blk(9, 9), 0, 0, 1); r.Kind != RouteServer {
		t.Fatalf("hintless holder routed %+v, want server", r)
	}
	// Hop limit.
	if r := a.ServeRequest(4, x, 0, 1, DefaultMaxHops); r.Kind != RouteServer {
		t.Fatalf("request past the hop limit routed %+v", r)
	}
	checkAll(t, a, b, c)
}

func TestStaleBootIDDropsHint(t *testing.T) {
	cs := newClients(t, 2, 2, DiscardNever)
	a, b := cs[0], cs[1]
	x := blk(3, 0)
	a.Fill(1, x, 0, true, NoClient, 0, false)
	b.ImportHints(3, 0, a.ExportHints(3, nil))
	// A restarts (boot 2); B hears of it.
	b.Observe(0, 2)
	r := b.Read(2, x, 0)
	if r.Kind != RouteServer || !r.StaleHint {
		t.Fatalf("stale hint routed %+v, want server and StaleHint", r)
	}
	if _, ok := b.HintFor(x); ok {
		t.Fatal("stale hint was kept")
	}
	// Hints from the old life are refused on import too.
	if n := b.ImportHints(3, 0, []BlockHint{{Index: 0, Hint: Hint{Holder: 0, Boot: 1, Since: 1}}}); n != 0 {
		t.Fatalf("imported %d stale hints", n)
	}
	if n := b.ImportHints(3, 0, []BlockHint{{Index: 0, Hint: Hint{Holder: 0, Boot: 2, Since: 3}}}); n != 1 {
		t.Fatalf("imported %d current hints, want 1", n)
	}
	// A restarted peer has free memory again.
	if o, _ := b.OldestOf(0); o != Free {
		t.Fatalf("restarted peer's oldest = %d, want Free", o)
	}
	// A failed peer's hints are ignored; hearing from it again restores it.
	b.PeerFailed(0)
	b.ImportHints(3, 0, []BlockHint{{Index: 1, Hint: Hint{Holder: 0, Boot: 2, Since: 4}}})
	if r := b.Read(5, blk(3, 1), 0); r.Kind != RouteServer {
		t.Fatalf("hint to a failed peer routed %+v", r)
	}
}

func TestForwardOnlyMasterCopies(t *testing.T) {
	cs := newClients(t, 2, 1, DiscardNever)
	a := cs[0]
	a.Fill(1, blk(1, 0), 0, false, 1, 1, true) // a copy served by B
	ev := a.Fill(2, blk(1, 1), 0, true, NoClient, 0, false)
	if ev.Kind != EvictDrop || ev.Master {
		t.Fatalf("evicting a non-master copy gave %+v, want drop", ev)
	}
	ev = a.Fill(3, blk(1, 2), 0, true, NoClient, 0, false)
	if ev.Kind != EvictForward || !ev.Master || ev.To != 1 || ev.Block != blk(1, 1) {
		t.Fatalf("evicting a master copy gave %+v, want forward to 1", ev)
	}
	if h, _ := a.HintFor(blk(1, 1)); h.Holder != 1 {
		t.Fatalf("forwarder hints %d, want 1", h.Holder)
	}
	// A victim older than every entry of the list is dropped (it is the
	// probable globally oldest block).
	a.ForwardAcked(1, BootAge{Age: 50, Boot: 1})
	ev = a.Fill(60, blk(1, 3), 0, true, NoClient, 0, false)
	if ev.Kind != EvictDrop || ev.Block != blk(1, 2) {
		t.Fatalf("globally oldest victim gave %+v, want drop", ev)
	}
	checkAll(t, a)
}

func TestAgeExchangeAndBestGuessTarget(t *testing.T) {
	cs := newClients(t, 4, 2, DiscardNever)
	a, c := cs[0], cs[2]
	// A's list: B 45, C 30, D 70 (smaller = older): C is the target.
	a.ForwardAcked(1, BootAge{Age: 45, Boot: 1})
	a.ForwardAcked(2, BootAge{Age: 30, Boot: 1})
	a.ForwardAcked(3, BootAge{Age: 70, Boot: 1})
	a.Fill(100, blk(1, 0), 0, true, NoClient, 0, false)
	a.Fill(101, blk(1, 1), 0, true, NoClient, 0, false)
	ev := a.Fill(102, blk(1, 2), 0, true, NoClient, 0, false)
	if ev.Kind != EvictForward || ev.To != 2 {
		t.Fatalf("eviction %+v, want forward to 2 (oldest entry)", ev)
	}
	if ev.FromOldest != 101 {
		t.Fatalf("sender's oldest = %d, want 101", ev.FromOldest)
	}
	// C has free memory: it keeps the block at its age and answers Free.
	ack := c.AcceptForward(102, 0, 1, ev.Block, 0, ev.Stamp, ev.FromOldest)
	if ack.Victim.Kind != EvictNone || ack.Oldest.Age != Free {
		t.Fatalf("ack %+v, want no victim and Free", ack)
	}
	if o, _ := c.OldestOf(0); o != 101 {
		t.Fatalf("target's entry for sender = %d, want 101", o)
	}
	a.ForwardAcked(2, ack.Oldest)
	if o, _ := a.OldestOf(2); o != Free {
		t.Fatalf("sender's entry for target = %d, want Free", o)
	}
	// C fills up with its own young blocks; the forwarded block (age 100) is
	// its oldest and C reports that age.
	c.Fill(200, blk(2, 0), 0, true, NoClient, 0, false)
	if got := c.Oldest().Age; got != 100 {
		t.Fatalf("C's oldest = %d, want 100 (forwarded blocks keep their age)", got)
	}
	checkAll(t, a, c)
}

func TestDiscardDecision(t *testing.T) {
	for _, tc := range []struct {
		name  string
		test  DiscardTest
		list  [2]Time // target's entries for peers 0 and 1
		want  EvictKind
		young bool
	}{
		{"pessimistic: one older entry makes it young", DiscardPessimistic, [2]Time{5, 500}, EvictDiscard, true},
		{"pessimistic: all entries younger: old", DiscardPessimistic, [2]Time{400, 500}, EvictDrop, false},
		{"optimistic: needs all entries older", DiscardOptimistic, [2]Time{5, 500}, EvictDrop, false},
		{"optimistic: all older", DiscardOptimistic, [2]Time{5, 6}, EvictDiscard, true},
		{"never", DiscardNever, [2]Time{5, 6}, EvictDrop, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newClients(t, 3, 1, tc.test)
			tgt := cs[2]
			tgt.ForwardAcked(0, BootAge{Age: tc.list[0], Boot: 1})
			tgt.ForwardAcked(1, BootAge{Age: tc.list[1], Boot: 1})
			tgt.Fill(300, blk(1, 0), 0, true, NoClient, 0, false) // a master copy of age 300
			// Peer 1 forwards a block of age 350 (younger than the victim);
			// it tells its oldest is 500.
			ack := tgt.AcceptForward(360, 1, 1, blk(2, 0), 0, 350, tc.list[1])
			if ack.Victim.Kind != tc.want || ack.Victim.Block != blk(1, 0) {
				t.Fatalf("victim %+v, want %v of 1:0", ack.Victim, tc.want)
			}
			if ack.Oldest.Age != 350 {
				t.Fatalf("ack oldest %d, want 350", ack.Oldest.Age)
			}
			checkAll(t, tgt)
		})
	}
	// A non-master victim is always dropped.
	cs := newClients(t, 3, 1, DiscardPessimistic)
	tgt := cs[2]
	tgt.ForwardAcked(0, BootAge{Age: 5, Boot: 1})
	tgt.Fill(300, blk(1, 0), 0, false, 0, 1, true)
	if ack := tgt.AcceptForward(360, 1, 1, blk(2, 0), 0, 350, 500); ack.Victim.Kind != EvictDrop {
		t.Fatalf("non-master victim %+v, want drop", ack.Victim)
	}
	// A forwarded block older than everything at the target is itself the
	// victim.
	cs = newClients(t, 3, 1, DiscardPessimistic)
	tgt = cs[2]
	tgt.Fill(300, blk(1, 0), 0, true, NoClient, 0, false)
	ack := tgt.AcceptForward(360, 1, 1, blk(2, 0), 0, 10, 500)
	if ack.Victim.Block != blk(2, 0) || ack.Victim.Kind != EvictDrop {
		t.Fatalf("old forwarded block: victim %+v, want drop of 2:0 (Free entries are not blocks)", ack.Victim)
	}
	tgt.ForwardAcked(0, BootAge{Age: 5, Boot: 1})
	ack = tgt.AcceptForward(361, 1, 1, blk(2, 1), 0, 10, 500)
	if ack.Victim.Block != blk(2, 1) || ack.Victim.Kind != EvictDiscard {
		t.Fatalf("old forwarded block: victim %+v, want discard of 2:1 (peer 0's block is older)", ack.Victim)
	}
	if ok, _ := tgt.Has(blk(1, 0)); !ok {
		t.Fatal("target lost its younger block")
	}
	checkAll(t, tgt)
}

func TestForwardToFailedPeerSkipped(t *testing.T) {
	cs := newClients(t, 3, 1, DiscardNever)
	a := cs[0]
	a.Fill(1, blk(1, 0), 0, true, NoClient, 0, false)
	a.PeerFailed(1)
	ev := a.Fill(2, blk(1, 1), 0, true, NoClient, 0, false)
	if ev.Kind != EvictForward || ev.To != 2 {
		t.Fatalf("eviction %+v, want forward to 2 (1 failed)", ev)
	}
	a.ForwardFailed(2, ev.Block)
	if _, ok := a.HintFor(ev.Block); ok {
		t.Fatal("hint to a peer that timed out was kept")
	}
	ev = a.Fill(3, blk(1, 2), 0, true, NoClient, 0, false)
	if ev.Kind != EvictDrop {
		t.Fatalf("with every peer failed, eviction %+v, want drop", ev)
	}
	a.PeerBooted(1, 2)
	if o, _ := a.OldestOf(1); o != Free {
		t.Fatalf("rebooted peer's entry %d, want Free", o)
	}
	checkAll(t, a)
}

func TestInvalidateDropsBlocksAndHints(t *testing.T) {
	cs := newClients(t, 2, 4, DiscardNever)
	a := cs[0]
	a.Fill(1, blk(1, 0), 0, true, NoClient, 0, false)
	a.Fill(2, blk(1, 1), 0, false, 1, 1, true)
	a.Fill(3, blk(2, 0), 0, true, NoClient, 0, false)
	got := a.Invalidate(1)
	if len(got) != 2 || a.Len() != 1 {
		t.Fatalf("invalidate dropped %v, %d left; want 2 dropped, 1 left", got, a.Len())
	}
	if _, ok := a.HintFor(blk(1, 1)); ok {
		t.Fatal("hints of an invalidated file were kept")
	}
	checkAll(t, a)
}

func TestVersionsMakeOldCopiesStale(t *testing.T) {
	cs := newClients(t, 2, 4, DiscardNever)
	a, b := cs[0], cs[1]
	x := blk(1, 0)
	a.Fill(1, x, 1, true, NoClient, 0, false)
	b.ImportHints(1, 0, a.ExportHints(1, nil))
	if r := a.Read(2, x, 1); r.Kind != RouteLocal {
		t.Fatalf("current copy: %+v", r)
	}
	// Version 2 exists: A's copy is stale when B asks for it.
	if r := a.ServeRequest(3, x, 2, 1, 1); r.Kind != RouteServer || !r.Stale {
		t.Fatalf("stale copy served: %+v", r)
	}
	if ok, _ := a.Has(x); ok {
		t.Fatal("stale copy kept")
	}
	// A writer revalidates its own copies of the file.
	a.Fill(4, blk(1, 1), 1, true, NoClient, 0, false)
	a.Revalidate(1, 3)
	if r := a.Read(5, blk(1, 1), 3); r.Kind != RouteLocal {
		t.Fatalf("revalidated copy: %+v", r)
	}
	// A forward of an older version than the copy held is refused.
	b.Fill(6, x, 3, false, 0, 1, false)
	if ack := b.AcceptForward(7, 0, 1, x, 2, 6, Free); ack.Victim.Kind != EvictDrop || ack.Victim.Block != x {
		t.Fatalf("older forward: %+v", ack)
	}
	checkAll(t, a, b)
}
