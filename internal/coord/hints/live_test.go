package hints

import "testing"

// The additions the live policy needs: peers that join after the client
// was made, hints dropped without a failure, the hint bound.

func TestJoinAddsAPeerWithFreeMemory(t *testing.T) {
	c, err := NewClient(ClientConfig{ID: 1, Boot: 1, CacheBlocks: 2})
	if err != nil {
		t.Fatal(err)
	}
	c.Join(2, 5)
	if o, ok := c.OldestOf(2); !ok || o != Free {
		t.Fatalf("joined peer: oldest %v, known %v", o, ok)
	}
	// A hint naming its current life is usable; an older life is not.
	if n := c.ImportHints(7, 0, []BlockHint{{Index: 0, Hint: Hint{Holder: 2, Boot: 5, Since: 1}}, {Index: 1, Hint: Hint{Holder: 2, Boot: 4, Since: 1}}}); n != 1 {
		t.Fatalf("imported %d hints, want 1", n)
	}
	c.Join(2, 6) // a new life: the old hints are stale
	if r := c.Read(10, blk(7, 0), 0); r.Kind != RouteServer || !r.StaleHint {
		t.Fatalf("read after the holder restarted: %+v", r)
	}
	c.Join(1, 9) // itself: ignored
	if _, ok := c.OldestOf(1); ok {
		t.Fatal("the client joined itself")
	}
	checkAll(t, c)
}

func TestDropHintKeepsSelfHints(t *testing.T) {
	c, err := NewClient(ClientConfig{ID: 1, Boot: 1, CacheBlocks: 2, Peers: []ClientID{2}})
	if err != nil {
		t.Fatal(err)
	}
	c.Fill(1, blk(1, 0), 1, true, NoClient, 0, false)
	c.ImportHints(1, 0, []BlockHint{{Index: 1, Hint: Hint{Holder: 2, Since: 1}}})
	c.DropHint(blk(1, 0))
	c.DropHint(blk(1, 1))
	if h, ok := c.HintFor(blk(1, 0)); !ok || h.Holder != 1 {
		t.Fatal("DropHint dropped a self hint")
	}
	if _, ok := c.HintFor(blk(1, 1)); ok {
		t.Fatal("DropHint kept a hint naming a peer")
	}
	checkAll(t, c)
}

func TestMaxHintsBoundsHintsOfOthers(t *testing.T) {
	c, err := NewClient(ClientConfig{ID: 1, Boot: 1, CacheBlocks: 4, Peers: []ClientID{2, 3}, MaxHints: 100})
	if err != nil {
		t.Fatal(err)
	}
	c.Fill(1, blk(99, 0), 1, true, NoClient, 0, false) // a self hint, never pruned
	for f := uint64(0); f < 30; f++ {
		var hs []BlockHint
		for i := uint64(0); i < 10; i++ {
			hs = append(hs, BlockHint{Index: i, Hint: Hint{Holder: ClientID(2 + i%2), Since: Time(f)}})
		}
		c.ImportHints(f, 0, hs)
		checkAll(t, c)
		if c.Hints() > 100 {
			t.Fatalf("%d hints past the bound", c.Hints())
		}
	}
	if _, ok := c.HintFor(blk(29, 9)); !ok {
		t.Fatal("the file imported last lost its hints")
	}
	if h, ok := c.HintFor(blk(99, 0)); !ok || h.Holder != 1 {
		t.Fatal("a self hint was pruned")
	}
	if _, err := NewClient(ClientConfig{ID: 1, CacheBlocks: 1, MaxHints: -1}); err == nil {
		t.Fatal("negative MaxHints accepted")
	}
}

// The first guess among peers believed alike is the lowest id, whatever the
// order they became known in: a live client learns its peers from pushes
// that may arrive in any order, and its choices must not depend on that.
func TestFirstGuessIsLowestIDWhateverTheJoinOrder(t *testing.T) {
	joined, err := NewClient(ClientConfig{ID: 1, Boot: 1, CacheBlocks: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []ClientID{4, 3, 2} {
		joined.Join(p, 1)
	}
	listed, err := NewClient(ClientConfig{ID: 1, Boot: 1, CacheBlocks: 1, Peers: []ClientID{4, 1, 3, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Client{"joined": joined, "listed": listed} {
		c.Fill(1, blk(1, 0), 1, true, NoClient, 0, false)
		ev := c.Fill(2, blk(1, 1), 1, true, NoClient, 0, false)
		if ev.Kind != EvictForward || ev.To != 2 {
			t.Errorf("%s: eviction %+v, want a forward to peer 2", name, ev)
		}
		// 2's entry is now the evicted block's age; 3 (free) is next.
		ev = c.Fill(3, blk(1, 2), 1, true, NoClient, 0, false)
		if ev.Kind != EvictForward || ev.To != 3 {
			t.Errorf("%s: second eviction %+v, want a forward to peer 3", name, ev)
		}
		checkAll(t, c)
	}
}
