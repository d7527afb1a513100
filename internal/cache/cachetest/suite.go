package cachetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
)

// Option adjusts what the suite assumes about the tier under test.
type Option func(*options)

type options struct {
	lru       bool
	blockSize int
	reopen    func(cache.Tier) cache.Tier
}

// WithLRU runs the eviction-order tests too: the tier evicts the least
// recently used blocks first (a hit or a Put makes a block most recent; a
// miss does not), and only as many as needed to fit the new block.
func WithLRU() Option { return func(o *options) { o.lru = true } }

// WithBlockSize sets the largest data length the suite stores (default
// 4096): a tier with fixed-size frames is given blocks no larger than this,
// and capacities that are multiples of it.
func WithBlockSize(n int) Option { return func(o *options) { o.blockSize = n } }

// WithReopen runs the persistence test too, for tiers that keep their
// blocks across restarts: reopen closes the tier and returns a new one
// opened on the same storage.
func WithReopen(reopen func(cache.Tier) cache.Tier) Option {
	return func(o *options) { o.reopen = reopen }
}

// Run runs the whole suite against tiers made by newTier.
func Run(t *testing.T, newTier func(capacity int64) cache.Tier, opts ...Option) {
	o := options{blockSize: 4096}
	for _, f := range opts {
		f(&o)
	}
	s := suite{newTier: newTier, bs: o.blockSize, reopen: o.reopen}
	t.Run("EmptyMisses", s.testEmptyMisses)
	t.Run("PutGetVersion", s.testPutGetVersion)
	t.Run("Replace", s.testReplace)
	t.Run("Remove", s.testRemove)
	t.Run("RemoveFile", s.testRemoveFile)
	t.Run("TooBig", s.testTooBig)
	t.Run("CapacityBound", s.testCapacityBound)
	t.Run("ReferenceModel", s.testReferenceModel)
	t.Run("Concurrent", s.testConcurrent)
	if o.reopen != nil {
		t.Run("Reopen", s.testReopen)
	}
	if o.lru {
		t.Run("LRU", s.testLRU)
		t.Run("LRUReplaceTouches", s.testLRUReplaceTouches)
		t.Run("LRUMissDoesNotTouch", s.testLRUMissDoesNotTouch)
		t.Run("LRUBytes", s.testLRUBytes)
	}
}

type suite struct {
	newTier func(capacity int64) cache.Tier // an empty tier bounded by capacity bytes
	bs      int
	reopen  func(cache.Tier) cache.Tier // nil for tiers that do not persist
}

// Data returns n bytes that depend on id and v, so that a hit can be checked
// against the exact (id, v) it must belong to.
func Data(id block.ID, v block.Version, n int) []byte {
	b := make([]byte, n)
	x := id.File*0x9E3779B97F4A7C15 ^ id.Index*0xBF58476D1CE4E5B9 ^ uint64(v)*0x94D049BB133111EB
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// checkInvariants fails the test if the tier's stats break the bound.
func checkInvariants(t testing.TB, c cache.Tier, capacity int64, when string) {
	t.Helper()
	s := c.Stats()
	// INVARIANT: 0 <= Bytes <= Capacity, Capacity is what the tier was made with,
	// and Entries >= 0.
	if s.Bytes < 0 || s.Bytes > s.Capacity || s.Capacity != capacity || s.Entries < 0 {
		t.Fatalf("after %s: invariant broken: %+v (made with capacity %d)", when, s, capacity)
	}
}

func mustHit(t testing.TB, c cache.Tier, id block.ID, v block.Version, want []byte) {
	t.Helper()
	got, ok := c.Get(id, v)
	if !ok {
		t.Fatalf("Get(%v, v%d) missed; want a hit", id, v)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%v, v%d) returned %d bytes that differ from what was Put (%d bytes)", id, v, len(got), len(want))
	}
}

func mustMiss(t testing.TB, c cache.Tier, id block.ID, v block.Version) {
	t.Helper()
	if _, ok := c.Get(id, v); ok {
		t.Fatalf("Get(%v, v%d) hit; want a miss", id, v)
	}
}

func (s suite) testEmptyMisses(t *testing.T) {
	capacity := int64(8 * s.bs)
	c := s.newTier(capacity)
	mustMiss(t, c, block.ID{File: 1, Index: 0}, 1)
	mustMiss(t, c, block.ID{}, 0)
	st := c.Stats()
	if st.Entries != 0 || st.Bytes != 0 || st.Hits != 0 || st.Misses != 2 || st.Evictions != 0 {
		t.Fatalf("stats of an empty tier after 2 misses: %+v", st)
	}
	checkInvariants(t, c, capacity, "misses")
}

func (s suite) testPutGetVersion(t *testing.T) {
	capacity := int64(8 * s.bs)
	c := s.newTier(capacity)
	id := block.ID{File: 7, Index: 3}
	d := Data(id, 5, s.bs)
	c.Put(id, 5, d)
	checkInvariants(t, c, capacity, "Put")
	mustHit(t, c, id, 5, d)
	mustMiss(t, c, id, 4)
	mustMiss(t, c, id, 6)
	mustMiss(t, c, block.ID{File: 7, Index: 4}, 5)
	mustMiss(t, c, block.ID{File: 3, Index: 7}, 5)
	mustHit(t, c, id, 5, d) // a miss on another version does not drop the block
	st := c.Stats()
	if st.Hits != 2 || st.Misses != 4 || st.Entries != 1 || st.Bytes != int64(len(d)) {
		t.Fatalf("stats after 2 hits and 4 misses on one block: %+v", st)
	}
	// A short block (a file's last) and an empty one are blocks too.
	short := block.ID{File: 7, Index: 9}
	c.Put(short, 5, Data(short, 5, 10))
	mustHit(t, c, short, 5, Data(short, 5, 10))
	empty := block.ID{File: 8, Index: 0}
	c.Put(empty, 1, []byte{})
	mustHit(t, c, empty, 1, nil)
	checkInvariants(t, c, capacity, "short Puts")
}

func (s suite) testReplace(t *testing.T) {
	capacity := int64(8 * s.bs)
	c := s.newTier(capacity)
	id := block.ID{File: 1, Index: 1}
	c.Put(id, 1, Data(id, 1, s.bs))
	c.Put(id, 2, Data(id, 2, s.bs/2))
	checkInvariants(t, c, capacity, "replacing Put")
	mustMiss(t, c, id, 1)
	mustHit(t, c, id, 2, Data(id, 2, s.bs/2))
	if st := c.Stats(); st.Entries != 1 || st.Bytes != int64(s.bs/2) || st.Evictions != 0 {
		t.Fatalf("after replacing one block: %+v; want 1 entry of %d bytes, no eviction", st, s.bs/2)
	}
	// Put replaces whatever is held, even a newer version: Get's exact
	// version match is what keeps stale data from being served.
	c.Put(id, 1, Data(id, 1, s.bs))
	mustMiss(t, c, id, 2)
	mustHit(t, c, id, 1, Data(id, 1, s.bs))
	// Same version, new data.
	nd := bytes.Repeat([]byte{0xAB}, s.bs)
	c.Put(id, 1, nd)
	mustHit(t, c, id, 1, nd)
	if st := c.Stats(); st.Entries != 1 || st.Bytes != int64(s.bs) {
		t.Fatalf("after replacing one block 3 times: %+v", st)
	}
}

func (s suite) testRemove(t *testing.T) {
	capacity := int64(8 * s.bs)
	c := s.newTier(capacity)
	a, b := block.ID{File: 1, Index: 0}, block.ID{File: 1, Index: 1}
	c.Put(a, 1, Data(a, 1, s.bs))
	c.Put(b, 1, Data(b, 1, s.bs))
	c.Remove(a)
	checkInvariants(t, c, capacity, "Remove")
	mustMiss(t, c, a, 1)
	mustHit(t, c, b, 1, Data(b, 1, s.bs))
	c.Remove(a) // absent: no-op
	c.Remove(block.ID{File: 99, Index: 99})
	if st := c.Stats(); st.Entries != 1 || st.Bytes != int64(s.bs) || st.Evictions != 0 {
		t.Fatalf("after Remove: %+v; want 1 entry, no eviction counted", st)
	}
	c.Remove(b)
	if st := c.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Fatalf("after removing everything: %+v", st)
	}
}

func (s suite) testRemoveFile(t *testing.T) {
	capacity := int64(16 * s.bs)
	c := s.newTier(capacity)
	for f := uint64(1); f <= 3; f++ {
		for i := uint64(0); i < 4; i++ {
			id := block.ID{File: f, Index: i}
			c.Put(id, block.Version(f), Data(id, block.Version(f), s.bs/2))
		}
	}
	held := map[block.ID]bool{}
	for f := uint64(1); f <= 3; f++ {
		for i := uint64(0); i < 4; i++ {
			id := block.ID{File: f, Index: i}
			_, held[id] = c.Get(id, block.Version(f))
		}
	}
	c.RemoveFile(2)
	checkInvariants(t, c, capacity, "RemoveFile")
	c.RemoveFile(42) // absent: no-op
	for f := uint64(1); f <= 3; f++ {
		for i := uint64(0); i < 4; i++ {
			id := block.ID{File: f, Index: i}
			switch {
			case f == 2:
				mustMiss(t, c, id, 2)
			case held[id]:
				mustHit(t, c, id, block.Version(f), Data(id, block.Version(f), s.bs/2))
			}
		}
	}
	st := c.Stats()
	if st.Evictions != 0 {
		t.Fatalf("RemoveFile counted as eviction: %+v", st)
	}
	// Everything that is left belongs to files 1 and 3.
	c.RemoveFile(1)
	c.RemoveFile(3)
	if st := c.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Fatalf("after removing every file: %+v", st)
	}
}

func (s suite) testTooBig(t *testing.T) {
	capacity := int64(2 * s.bs)
	c := s.newTier(capacity)
	small, big := block.ID{File: 1, Index: 0}, block.ID{File: 1, Index: 1}
	c.Put(small, 1, Data(small, 1, s.bs/2))
	c.Put(big, 1, make([]byte, capacity+1))
	checkInvariants(t, c, capacity, "oversized Put")
	mustMiss(t, c, big, 1)
	// An oversized Put of an id the tier holds drops the stale copy.
	c.Put(small, 2, make([]byte, capacity+1))
	checkInvariants(t, c, capacity, "oversized replacing Put")
	mustMiss(t, c, small, 1)
	mustMiss(t, c, small, 2)
}

func (s suite) testCapacityBound(t *testing.T) {
	capacity := int64(4 * s.bs)
	c := s.newTier(capacity)
	for i := uint64(0); i < 20; i++ {
		id := block.ID{File: 1 + i%3, Index: i}
		d := Data(id, 1, s.bs)
		c.Put(id, 1, d)
		checkInvariants(t, c, capacity, fmt.Sprintf("Put #%d", i))
		mustHit(t, c, id, 1, d) // the block just stored is there
		checkInvariants(t, c, capacity, fmt.Sprintf("Get #%d", i))
	}
	st := c.Stats()
	if st.Evictions == 0 || st.Entries > 4 {
		t.Fatalf("after putting 5x the capacity: %+v; want evictions and at most 4 entries", st)
	}
	if want := int64(st.Entries) * int64(s.bs); st.Bytes != want {
		t.Fatalf("Bytes = %d with %d entries of %d bytes", st.Bytes, st.Entries, s.bs)
	}
}

// model is the reference: what a tier with infinite room would hold.
type model map[block.ID]struct {
	v    block.Version
	data []byte
}

// testReferenceModel runs random operations and checks every hit against the
// reference model: a tier may miss whenever it likes (it may have evicted),
// but a hit must return the data of the latest Put of that exact version.
func (s suite) testReferenceModel(t *testing.T) {
	capacity := int64(6 * s.bs)
	c := s.newTier(capacity)
	m := model{}
	rng := rand.New(rand.NewPCG(1, 2))
	var gets, hits uint64
	const ops = 3000
	for op := range ops {
		id := block.ID{File: uint64(rng.IntN(4)), Index: uint64(rng.IntN(6))}
		v := block.Version(1 + rng.IntN(3))
		var what string
		switch r := rng.IntN(100); {
		case r < 45:
			what = "Get"
			gets++
			got, ok := c.Get(id, v)
			if ok {
				hits++
				want, in := m[id]
				if !in || want.v != v || !bytes.Equal(got, want.data) {
					t.Fatalf("op %d: Get(%v, v%d) hit with data the model does not hold (model: present=%v v%d)", op, id, v, in, want.v)
				}
			}
		case r < 85:
			what = "Put"
			n := 1 + rng.IntN(s.bs)
			if rng.IntN(50) == 0 {
				n = int(capacity) + 1
			}
			d := Data(id, v, n)
			c.Put(id, v, d)
			if int64(n) > capacity {
				delete(m, id)
			} else {
				m[id] = struct {
					v    block.Version
					data []byte
				}{v, d}
			}
		case r < 95:
			what = "Remove"
			c.Remove(id)
			delete(m, id)
		default:
			what = "RemoveFile"
			c.RemoveFile(id.File)
			for k := range m {
				if k.File == id.File {
					delete(m, k)
				}
			}
		}
		checkInvariants(t, c, capacity, fmt.Sprintf("op %d (%s)", op, what))
		st := c.Stats()
		if st.Entries > len(m) {
			t.Fatalf("op %d (%s): tier holds %d entries, more than the %d the model has", op, what, st.Entries, len(m))
		}
	}
	st := c.Stats()
	if st.Hits != hits || st.Hits+st.Misses != gets {
		t.Fatalf("stats %+v; the suite saw %d hits in %d gets", st, hits, gets)
	}
	if hits == 0 {
		t.Fatalf("no hit in %d gets: the test exercised nothing", gets)
	}
}

// testConcurrent hammers one tier from several goroutines; run with -race.
// Every hit must carry the data of the (id, version) asked for.
func (s suite) testConcurrent(t *testing.T) {
	capacity := int64(8 * s.bs)
	c := s.newTier(capacity)
	const workers, ops = 4, 1500
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for range ops {
				id := block.ID{File: uint64(rng.IntN(3)), Index: uint64(rng.IntN(8))}
				v := block.Version(1 + rng.IntN(2))
				n := s.bs/2 + int(id.Index)%(s.bs/2) // a size that depends on id only
				switch r := rng.IntN(100); {
				case r < 50:
					if got, ok := c.Get(id, v); ok && !bytes.Equal(got, Data(id, v, n)) {
						errs <- fmt.Errorf("Get(%v, v%d) hit with wrong data", id, v)
						return
					}
				case r < 90:
					c.Put(id, v, Data(id, v, n))
				case r < 97:
					c.Remove(id)
				case r < 99:
					c.RemoveFile(id.File)
				default:
					if st := c.Stats(); st.Bytes > st.Capacity {
						errs <- fmt.Errorf("concurrent Stats broke the bound: %+v", st)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkInvariants(t, c, capacity, "concurrent operations")
	st := c.Stats()
	if st.Hits+st.Misses == 0 {
		t.Fatalf("no Get counted: %+v", st)
	}
}

// fill puts blocks 0..n-1 of file 1 at version 1, each bs bytes.
func (s suite) fill(c cache.Tier, n int) {
	for i := range n {
		id := block.ID{File: 1, Index: uint64(i)}
		c.Put(id, 1, Data(id, 1, s.bs))
	}
}

func (s suite) expect(t *testing.T, c cache.Tier, held []uint64, gone []uint64) {
	t.Helper()
	for _, i := range gone {
		mustMiss(t, c, block.ID{File: 1, Index: i}, 1)
	}
	for _, i := range held {
		id := block.ID{File: 1, Index: i}
		mustHit(t, c, id, 1, Data(id, 1, s.bs))
	}
}

func (s suite) testLRU(t *testing.T) {
	c := s.newTier(int64(4 * s.bs))
	s.fill(c, 4)
	mustHit(t, c, block.ID{File: 1, Index: 0}, 1, Data(block.ID{File: 1, Index: 0}, 1, s.bs))
	s.putBlock(c, 4) // evicts 1, the least recently used
	s.expect(t, c, []uint64{0, 2, 3, 4}, []uint64{1})
	if st := c.Stats(); st.Evictions != 1 || st.Entries != 4 {
		t.Fatalf("stats %+v; want 1 eviction, 4 entries", st)
	}
}

// putBlock puts block i of file 1 at version 1.
func (s suite) putBlock(c cache.Tier, i uint64) {
	id := block.ID{File: 1, Index: i}
	c.Put(id, 1, Data(id, 1, s.bs))
}

func (s suite) testLRUReplaceTouches(t *testing.T) {
	c := s.newTier(int64(4 * s.bs))
	s.fill(c, 4)
	s.putBlock(c, 0) // re-Put makes 0 most recent
	s.putBlock(c, 4)
	s.expect(t, c, []uint64{0, 2, 3, 4}, []uint64{1})
}

func (s suite) testLRUMissDoesNotTouch(t *testing.T) {
	c := s.newTier(int64(4 * s.bs))
	s.fill(c, 4)
	mustMiss(t, c, block.ID{File: 1, Index: 0}, 2) // wrong version: no touch
	s.putBlock(c, 4)
	s.expect(t, c, []uint64{1, 2, 3, 4}, []uint64{0})
}

func (s suite) testLRUBytes(t *testing.T) {
	capacity := int64(4 * s.bs)
	c := s.newTier(capacity)
	s.fill(c, 4)
	big := block.ID{File: 2, Index: 0}
	c.Put(big, 1, Data(big, 1, 3*s.bs)) // needs 3 blocks' room: evicts 0, 1, 2
	checkInvariants(t, c, capacity, "big Put")
	mustHit(t, c, big, 1, Data(big, 1, 3*s.bs))
	s.expect(t, c, []uint64{3}, []uint64{0, 1, 2})
	if st := c.Stats(); st.Evictions != 3 || st.Bytes != capacity {
		t.Fatalf("stats %+v; want 3 evictions and a full tier", st)
	}
}

// testReopen: after a restart, a persistent tier holds exactly what it held
// before (same versions, same data, short and empty blocks included), and
// nothing that was replaced, removed or dropped with its file comes back.
func (s suite) testReopen(t *testing.T) {
	capacity := int64(16 * s.bs)
	c := s.newTier(capacity)
	type put struct {
		id block.ID
		v  block.Version
		n  int
	}
	puts := []put{
		{block.ID{File: 1, Index: 0}, 1, s.bs}, {block.ID{File: 1, Index: 1}, 2, s.bs / 2},
		{block.ID{File: 2, Index: 0}, 1, 0}, {block.ID{File: 3, Index: 0}, 1, s.bs},
		{block.ID{File: 3, Index: 1}, 1, 7}, {block.ID{File: 1, Index: 2}, 1, s.bs},
		{block.ID{File: 1, Index: 0}, 2, 10}, // replaces v1
	}
	for _, p := range puts {
		c.Put(p.id, p.v, Data(p.id, p.v, p.n))
	}
	c.Remove(block.ID{File: 1, Index: 2})
	c.RemoveFile(3)
	want := map[block.ID]put{}
	for _, p := range puts {
		if p.id.File != 3 && p.id != (block.ID{File: 1, Index: 2}) {
			want[p.id] = p
		}
	}
	held := map[block.ID]bool{}
	for id, p := range want {
		_, held[id] = c.Get(id, p.v)
	}
	before := c.Stats()
	c = s.reopen(c)
	checkInvariants(t, c, capacity, "reopen")
	for id, p := range want {
		if held[id] {
			mustHit(t, c, id, p.v, Data(id, p.v, p.n))
		} else {
			mustMiss(t, c, id, p.v)
		}
	}
	mustMiss(t, c, block.ID{File: 1, Index: 0}, 1)
	mustMiss(t, c, block.ID{File: 1, Index: 2}, 1)
	mustMiss(t, c, block.ID{File: 3, Index: 0}, 1)
	mustMiss(t, c, block.ID{File: 3, Index: 1}, 1)
	if after := c.Stats(); after.Entries != before.Entries || after.Bytes != before.Bytes {
		t.Fatalf("after reopen: %d entries, %d bytes; before: %d, %d", after.Entries, after.Bytes, before.Entries, before.Bytes)
	}
}
