package hints

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

func TestDiscardCacheEvictsOldestFirst(t *testing.T) {
	s, err := NewServer(ServerConfig{MemoryBlocks: 2, Memory: MemoryDiscard})
	if err != nil {
		t.Fatal(err)
	}
	// Arrival order differs from age order: the oldest block goes first.
	s.AcceptDiscard(blk(1, 0), 1, 50)
	s.AcceptDiscard(blk(1, 1), 1, 10)
	s.AcceptDiscard(blk(1, 2), 1, 30) // evicts 1:1 (age 10), not 1:0
	if s.InMemory(blk(1, 1)) || !s.InMemory(blk(1, 0)) || !s.InMemory(blk(1, 2)) {
		t.Fatal("discard cache did not evict its oldest block")
	}
	if s.AcceptDiscard(blk(1, 3), 1, 5) {
		t.Fatal("a block older than a full discard cache was stored")
	}
	f := s.Fetch(60, blk(1, 0))
	if !f.Memory || !f.Discard || !f.Master {
		t.Fatalf("discard hit %+v", f)
	}
	if s.InMemory(blk(1, 0)) {
		t.Fatal("a discard-cache hit did not move the block out")
	}
	if f := s.Fetch(61, blk(1, 0)); f.Memory {
		t.Fatalf("second fetch %+v, want disk", f)
	}
	// Disk reads are not cached by a discard cache.
	if s.InMemory(blk(1, 0)) {
		t.Fatal("discard cache kept a block read from disk")
	}
	s.WriteThrough(62, blk(1, 2))
	if s.InMemory(blk(1, 2)) {
		t.Fatal("a stale block stayed in the discard cache after a write")
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestDiskCacheIsLRU(t *testing.T) {
	s, _ := NewServer(ServerConfig{MemoryBlocks: 2, Memory: MemoryDiskCache})
	s.Fetch(1, blk(1, 0))
	s.Fetch(2, blk(1, 1))
	if f := s.Fetch(3, blk(1, 0)); !f.Memory || f.Discard || !f.Master {
		t.Fatalf("disk cache hit %+v", f)
	}
	s.Fetch(4, blk(1, 2)) // evicts 1:1
	if s.InMemory(blk(1, 1)) || !s.InMemory(blk(1, 0)) {
		t.Fatal("disk cache is not LRU")
	}
	if s.AcceptDiscard(blk(9, 9), 1, 5) {
		t.Fatal("a disk cache accepted a discard")
	}
}

func TestCoopServerMemoryIsAParticipant(t *testing.T) {
	s, err := NewServer(ServerConfig{MemoryBlocks: 2, Memory: MemoryCoop, CoopID: 9, Clients: []ClientID{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewClient(ClientConfig{ID: 0, Boot: 1, CacheBlocks: 1, Peers: []ClientID{0, 1, 9}})
	a.ForwardAcked(1, BootAge{Age: 1000, Boot: 1}) // B is young, the server memory is Free
	a.Fill(1, blk(1, 0), 0, true, NoClient, 0, false)
	ev := a.Fill(2, blk(1, 1), 0, true, NoClient, 0, false)
	if ev.Kind != EvictForward || ev.To != 9 {
		t.Fatalf("eviction %+v, want forward to the server memory", ev)
	}
	ack := s.Coop().AcceptForward(2, 0, 1, ev.Block, 0, ev.Stamp, ev.FromOldest)
	a.ForwardAcked(9, ack.Oldest)
	if f := s.Fetch(3, blk(1, 0)); !f.Memory || f.Master {
		t.Fatalf("coop hit %+v, want memory, master kept by the server", f)
	}
	if f := s.Fetch(4, blk(5, 0)); f.Memory || !f.Master || s.InMemory(blk(5, 0)) {
		t.Fatalf("coop server memory cached a disk read: %+v", f)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTokens(t *testing.T) {
	s, _ := NewServer(ServerConfig{})
	s.Open(1, 0, 1, 5, false)
	s.Open(2, 1, 1, 5, false)
	s.Open(3, 2, 1, 6, false)
	r := s.Open(4, 2, 1, 5, true)
	if len(r.Revoke) != 2 || r.Revoke[0] != 0 || r.Revoke[1] != 1 {
		t.Fatalf("write open revoked %v, want [0 1]", r.Revoke)
	}
	if r.HintsFrom != 1 {
		t.Fatalf("hints from %d, want 1", r.HintsFrom)
	}
	if !s.Holds(2, 5, true) || s.Holds(0, 5, false) {
		t.Fatal("token state wrong after a write open")
	}
	if r := s.Open(5, 2, 1, 5, true); len(r.Revoke) != 0 {
		t.Fatalf("writer reopening revoked %v", r.Revoke)
	}
	r = s.Open(6, 0, 1, 5, false)
	if r.Downgraded != 2 || len(r.Revoke) != 0 {
		t.Fatalf("read open after a writer: %+v, want downgrade of 2", r)
	}
	if s.Holds(2, 5, true) || !s.Holds(2, 5, false) {
		t.Fatal("downgraded writer's tokens wrong")
	}
	// A restarted last opener hands out no hints.
	s.ClientSeen(0, 2)
	if r := s.Open(7, 1, 1, 5, false); r.HintsFrom != NoClient {
		t.Fatalf("hints from a restarted client %d", r.HintsFrom)
	}
	s.ClientFailed(1)
	if r := s.Open(8, 2, 1, 5, false); r.HintsFrom != NoClient {
		t.Fatalf("hints from a failed client %d", r.HintsFrom)
	}
	if got := s.Delete(5); len(got) != 3 {
		t.Fatalf("delete revoked %v, want 3 holders", got)
	}
}

// TestAgeCacheAgainstReference drives the age cache (its list and heap)
// with random operations — references, inserts with old ages, touches
// from a clock behind, setAge, removals, file drops — and compares
// evictions with a simple linear-scan reference.
func TestAgeCacheAgainstReference(t *testing.T) {
	for _, size := range []int{16, 100} { // heaps of two and four levels
		testAgeCacheAgainstReference(t, size)
	}
}

func testAgeCacheAgainstReference(t *testing.T, size int) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := newAgeCache(size, nil, nil)
	ref := map[uint64]Time{}
	refSeq := map[uint64]uint64{}
	var seq uint64
	for step := 0; step < 20000; step++ {
		id := blk(uint64(rng.IntN(3)), uint64(rng.IntN(40*size/16)))
		key := id.File*1000 + id.Index
		now := Time(step)
		if rng.IntN(8) == 0 {
			now -= Time(rng.IntN(30)) // a clock behind
		}
		switch rng.IntN(5) {
		case 0, 1: // reference
			if e := c.get(id); e != 0 {
				c.touch(e, now)
				if now >= ref[key] {
					seq++
					ref[key], refSeq[key] = now, seq
				}
				continue
			}
			if c.full() {
				v, _ := c.popOldest()
				var wk uint64
				first := true
				for k, st := range ref {
					if first || st < ref[wk] || (st == ref[wk] && refSeq[k] < refSeq[wk]) {
						wk, first = k, false
					}
				}
				if v.id.File*1000+v.id.Index != wk {
					t.Fatalf("step %d: evicted %v, reference says %d", step, v.id, wk)
				}
				delete(ref, wk)
			}
			st := now - Time(rng.IntN(50)) // some arrive with old ages
			c.insert(id, 1, st, false, false)
			seq++
			ref[key], refSeq[key] = st, seq
		case 2: // drop a file
			if rng.IntN(20) == 0 {
				for _, id := range c.dropFile(id.File, nil) {
					delete(ref, id.File*1000+id.Index)
				}
			}
		case 3:
			if e := c.get(id); e != 0 {
				c.remove(e)
				delete(ref, key)
			}
		case 4:
			if e := c.get(id); e != 0 {
				st := now - Time(rng.IntN(60))
				c.setAge(e, st)
				ref[key] = st
			}
		}
		if err := c.check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if c.len() != len(ref) {
			t.Fatalf("step %d: %d entries, reference %d", step, c.len(), len(ref))
		}
	}
}

func TestServerForgetDropsTheLastOpener(t *testing.T) {
	for _, dense := range []bool{false, true} {
		s, err := NewServer(ServerConfig{DenseFiles: dense})
		if err != nil {
			t.Fatal(err)
		}
		s.Open(1, 1, 1, 7, false)
		if r := s.Open(2, 2, 1, 7, false); r.HintsFrom != 1 {
			t.Fatalf("dense %v: hints from %d, want 1", dense, r.HintsFrom)
		}
		s.Open(3, 1, 1, 2000, false) // another page when dense
		if s.Files() != 2 {
			t.Fatalf("dense %v: %d files, want 2", dense, s.Files())
		}
		s.Forget(7)
		s.Forget(8) // never opened: nothing to forget
		if s.Files() != 1 || s.Holds(1, 7, false) || !s.Holds(1, 2000, false) {
			t.Fatalf("dense %v: %d files remembered after Forget, want 1 (file 2000)", dense, s.Files())
		}
		if r := s.Open(3, 3, 1, 7, false); r.HintsFrom != NoClient || r.Version != 1 {
			t.Fatalf("dense %v: hints from %d, version %d after Forget, want none, 1", dense, r.HintsFrom, r.Version)
		}
	}
}

// TestHolderSet checks the token holder set: membership, the order
// revocations list holders in (first, then the others as they came), and
// an emptied set's list reused; a file's state stays 32 pointer-free bytes.
func TestHolderSet(t *testing.T) {
	if n := unsafe.Sizeof(fileState{}); n != 32 {
		t.Fatalf("fileState is %d bytes, want 32", n)
	}
	var more holderLists
	var h, g holderSet
	for _, c := range []ClientID{7, 0, 3, 12} {
		if h.has(c, &more) {
			t.Fatalf("%d in the set before it was added", c)
		}
		h.add(c, &more)
	}
	g.add(5, &more)
	g.add(6, &more)
	for _, c := range []ClientID{7, 0, 3, 12} {
		if !h.has(c, &more) || g.has(c, &more) {
			t.Fatalf("%d: in h %v, in g %v", c, h.has(c, &more), g.has(c, &more))
		}
	}
	if h.has(NoClient, &more) || h.has(4, &more) {
		t.Fatal("the set holds a client never added")
	}
	if got := h.appendExcept(nil, 3, &more); !slices.Equal(got, []ClientID{7, 0, 12}) {
		t.Fatalf("appendExcept(3) = %v, want [7 0 12]", got)
	}
	if got := g.appendExcept(nil, NoClient, &more); !slices.Equal(got, []ClientID{5, 6}) {
		t.Fatalf("appendExcept(NoClient) = %v, want [5 6]", got)
	}
	list := h.more
	h.reset(&more)
	if h.has(7, &more) || h.has(0, &more) || len(h.appendExcept(nil, NoClient, &more)) != 0 {
		t.Fatal("a reset set still holds clients")
	}
	h.add(0, &more)
	h.add(9, &more)
	if h.more != list || !slices.Equal(h.appendExcept(nil, NoClient, &more), []ClientID{0, 9}) {
		t.Fatalf("after reset: list %d (was %d), holders %v", h.more, list, h.appendExcept(nil, NoClient, &more))
	}
}

// TestTokenMatchesHoldsAndVersion checks Token, whose reads a simulation's
// server answers from bits while every version is 1, against Holds and
// Version after every step of random opens, forgets, and (once the read
// phase is over) writes and deletes; and the answers of that server
// against those of a server without the bits (the live system's), which
// keeps every holder in the files' states all along.
func TestTokenMatchesHoldsAndVersion(t *testing.T) {
	for _, clients := range []int{1, 3, 42} {
		ids := make([]ClientID, clients)
		for i := range ids {
			ids[i] = ClientID(i)
		}
		s, err := NewServer(ServerConfig{Clients: ids, DenseFiles: true})
		if err != nil {
			t.Fatal(err)
		}
		live, _ := NewServer(ServerConfig{Clients: ids})
		rng := rand.New(rand.NewPCG(uint64(clients), 7))
		for step := range 2000 {
			c, f := ClientID(rng.IntN(clients)), uint64(rng.IntN(100))
			switch op := rng.IntN(20); {
			case op == 0:
				s.Forget(f)
				live.Forget(f)
			case step > 1500 && op == 1:
				if got, want := s.Delete(f), live.Delete(f); !slices.Equal(got, want) {
					t.Fatalf("%d clients, step %d: Delete(%d) revokes %v, live server %v", clients, step, f, got, want)
				}
			case step > 1500 && op == 2:
				s.NewVersion(f)
				live.NewVersion(f)
			default:
				w := step > 1500 && op == 3
				got, want := s.Open(Time(step), c, 1, f, w), live.Open(Time(step), c, 1, f, w)
				if !slices.Equal(got.Revoke, want.Revoke) || got.HintsFrom != want.HintsFrom ||
					got.Downgraded != want.Downgraded || got.Version != want.Version || got.NewVersion != want.NewVersion {
					t.Fatalf("%d clients, step %d: Open(%d, %d, %v) = %+v, live server %+v", clients, step, c, f, w, got, want)
				}
			}
			if step == 1500 && !s.quick.on {
				t.Fatalf("%d clients: the bits went off in the read phase", clients)
			}
			for cc := range ClientID(clients) {
				for ff := range uint64(100) {
					v, held := s.Token(cc, ff, false)
					if v != s.Version(ff) || held != s.Holds(cc, ff, false) {
						t.Fatalf("%d clients, step %d: Token(%d, %d) = %d, %v; Version %d, Holds %v",
							clients, step, cc, ff, v, held, s.Version(ff), s.Holds(cc, ff, false))
					}
					if v != live.Version(ff) || held != live.Holds(cc, ff, false) || s.Holds(cc, ff, true) != live.Holds(cc, ff, true) {
						t.Fatalf("%d clients, step %d: Token(%d, %d) = %d, %v; live server %d, %v",
							clients, step, cc, ff, v, held, live.Version(ff), live.Holds(cc, ff, false))
					}
				}
			}
		}
		if s.quick.on {
			t.Fatalf("%d clients: the bits stayed on after new versions", clients)
		}
	}
}
