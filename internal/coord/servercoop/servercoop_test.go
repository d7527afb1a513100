package servercoop

import (
	"errors"
	"testing"
)

func mustGroup(t *testing.T, cfg Config) *Group[int] {
	t.Helper()
	g, err := New[int](cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestNonCoopDropsEverything(t *testing.T) {
	g := mustGroup(t, Config{Members: 3, CacheEntries: 4})
	if e := g.Evict(0, 7, true, 0); e.Action != Drop {
		t.Fatalf("noncoop evict = %+v, want drop", e)
	}
	if l := g.Locate(0, 7); l.Where != Nowhere {
		t.Fatalf("noncoop locate = %+v", l)
	}
}

func TestGlobalSendsToOverflow(t *testing.T) {
	g := mustGroup(t, Config{Members: 3, Scheme: Global, CacheEntries: 4})
	if e := g.Evict(1, 7, true, 0); e.Action != ToOverflow {
		t.Fatalf("global evict = %+v", e)
	}
	if l := g.Locate(1, 7); l.Where != Overflow {
		t.Fatalf("global locate = %+v", l)
	}
}

func TestOneChanceForwardOnceAndReference(t *testing.T) {
	g := mustGroup(t, Config{Members: 3, Scheme: OneChance, Target: Better, CacheEntries: 2})
	g.Observe(1, 5) // member 1 busy: 2 is the least busy peer of 0
	e := g.Evict(0, 7, true, 0)
	if e.Action != ToPeer || e.Peer != 2 || e.AskedManager {
		t.Fatalf("evict = %+v, want forward to 2 without manager", e)
	}
	if l := g.Locate(0, 7); l.Where != Peer || l.Peer != 2 {
		t.Fatalf("locate = %+v, want peer 2", l)
	}
	// The receiver drops the block when it evicts it: forwarded once.
	if e := g.Evict(2, 7, false, 0); e.Action != Drop {
		t.Fatalf("foreign victim = %+v, want drop", e)
	}
	g.RemoteMiss(0, 7)
	if l := g.Locate(0, 7); l.Where != Nowhere {
		t.Fatalf("stale reference not forgotten: %+v", l)
	}
	// The cascade bound.
	if e := g.Evict(0, 8, true, g.Config().MaxChain); e.Action != Drop {
		t.Fatalf("victim at the chain bound = %+v, want drop", e)
	}
	s := g.Stats()
	if s.Forwards != 1 || s.ForeignDrops != 1 || s.ChainDrops != 1 || s.StaleRefs != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestManagerAsksAndLeastBusy(t *testing.T) {
	g := mustGroup(t, Config{Members: 4, Scheme: OneChance, CacheEntries: 8})
	g.Observe(1, 3)
	g.Observe(2, 1)
	g.Observe(3, 2)
	e := g.Evict(0, 1, true, 0)
	if e.Peer != 2 || !e.AskedManager {
		t.Fatalf("manager target = %+v, want 2 asked", e)
	}
	// Receiving counts as load: for member 3, 0 is idle (0), 2 has 2.
	g.Observe(0, 3)
	e = g.Evict(3, 2, true, 0)
	if e.Peer != 2 {
		t.Fatalf("second target = %+v, want 2 (load 2 < 3)", e)
	}
}

func TestHintsTarget(t *testing.T) {
	g := mustGroup(t, Config{Members: 3, Scheme: OneChance, Target: Hints, CacheEntries: 8})
	// 0 sends to 1 (tie, scan from 1), then to 2, then to 1 again.
	want := []int{1, 2, 1, 2}
	for i, w := range want {
		if e := g.Evict(0, 10+i, true, 0); e.Peer != w {
			t.Fatalf("forward %d went to %d, want %d", i, e.Peer, w)
		}
	}
	// 1 has received two blocks from 0: its hints favour 2.
	if e := g.Evict(1, 99, true, 0); e.Peer != 2 {
		t.Fatalf("member 1 forwarded to %d, want 2", e.Peer)
	}
}

func TestRandomNeverSelf(t *testing.T) {
	g := mustGroup(t, Config{Members: 4, Scheme: OneChance, Target: Random, CacheEntries: 1000, Seed: 3})
	seen := map[int]bool{}
	for i := range 200 {
		e := g.Evict(2, i, true, 0)
		if e.Peer == 2 {
			t.Fatal("forwarded to itself")
		}
		seen[e.Peer] = true
	}
	if len(seen) != 3 {
		t.Fatalf("random targets %v, want all three peers", seen)
	}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestReturnOnHit(t *testing.T) {
	g := mustGroup(t, Config{Members: 2, Scheme: OneChance, ReturnOnHit: true, CacheEntries: 4})
	g.Evict(0, 5, true, 0)
	if !g.RemoteHit(0, 1, 5) {
		t.Fatal("return on hit not requested")
	}
	if l := g.Locate(0, 5); l.Where != Nowhere {
		t.Fatal("reference kept after return")
	}
	h := mustGroup(t, Config{Members: 2, Scheme: OneChance, CacheEntries: 4})
	h.Evict(0, 5, true, 0)
	if h.RemoteHit(0, 1, 5) {
		t.Fatal("returned without return on hit")
	}
}

func TestReferenceListBounded(t *testing.T) {
	g := mustGroup(t, Config{Members: 2, Scheme: OneChance, CacheEntries: 2, RefRatio: 2})
	for k := range 10 {
		g.Evict(0, k, true, 0)
		if g.RefLen(0) > 4 {
			t.Fatalf("reference list grew to %d", g.RefLen(0))
		}
	}
	if g.Locate(0, 5).Where != Nowhere || g.Locate(0, 9).Where != Peer {
		t.Fatal("reference list did not keep the newest 4")
	}
	if s := g.Stats(); s.RefForgotten != 6 {
		t.Fatalf("forgotten = %d, want 6", s.RefForgotten)
	}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigErrorsAndParse(t *testing.T) {
	if _, err := New[int](Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("zero members: %v", err)
	}
	for _, s := range []string{"noncoop", "global", "1chance"} {
		if sc, err := ParseScheme(s); err != nil || sc.String() != s {
			t.Fatalf("ParseScheme(%q) = %v, %v", s, sc, err)
		}
	}
	for _, s := range []string{"manager", "random", "hints", "better"} {
		if tg, err := ParseTarget(s); err != nil || tg.String() != s {
			t.Fatalf("ParseTarget(%q) = %v, %v", s, tg, err)
		}
	}
	if _, err := ParseScheme("x"); err == nil {
		t.Fatal("bad scheme accepted")
	}
}
