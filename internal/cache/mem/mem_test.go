package mem

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/cache/cachetest"
)

func newTier(t testing.TB) func(int64) cache.Tier {
	return func(capacity int64) cache.Tier {
		c, err := New(Config{Capacity: capacity})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

func TestSuite(t *testing.T) {
	cachetest.Run(t, newTier(t), cachetest.WithLRU())
}

func TestConfig(t *testing.T) {
	if _, err := New(Config{Capacity: -1}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New(capacity -1) = %v; want ErrConfig", err)
	}
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Capacity; got != DefaultCapacity {
		t.Fatalf("default capacity = %d; want %d", got, DefaultCapacity)
	}
}

func id(i uint64) block.ID { return block.ID{File: 1, Index: i} }

func TestOnEvictOrderAndUnlocked(t *testing.T) {
	var got []string
	var c *Cache
	c, _ = New(Config{Capacity: 30, OnEvict: func(i block.ID, v block.Version) {
		// Runs after unlocking: calling back into the cache must not deadlock.
		if c.Contains(i, v) {
			t.Errorf("evicted %v still held", i)
		}
		got = append(got, fmt.Sprintf("%v@%d", i, v))
	}})
	for i := range uint64(3) {
		c.Put(id(i), 7, make([]byte, 10))
	}
	c.Get(id(0), 7)                   // order now (old→new): 1 2 0
	c.Put(id(3), 7, make([]byte, 25)) // needs 25: evicts 1, 2, 0
	if want := "[1:1@7 1:2@7 1:0@7]"; fmt.Sprint(got) != want {
		t.Fatalf("evicted %v; want %v", got, want)
	}
	got = nil
	c.Remove(id(3))
	c.Put(id(4), 1, make([]byte, 5))
	c.RemoveFile(1)
	c.Put(id(5), 1, make([]byte, 5))
	c.Put(id(5), 2, make([]byte, 6)) // replacement, not eviction
	if len(got) != 0 {
		t.Fatalf("Remove/RemoveFile/replace called OnEvict for %v", got)
	}
	// An oversized Put drops the old copy and reports it.
	c.Put(id(5), 7, make([]byte, 31))
	if want := "[1:5@2]"; fmt.Sprint(got) != want {
		t.Fatalf("oversized Put evicted %v; want %v", got, want)
	}
}

func TestPeekContainsOldestDoNotTouch(t *testing.T) {
	c, _ := New(Config{Capacity: 3})
	for i := range uint64(3) {
		c.Put(id(i), 1, []byte{byte(i)})
	}
	if v, ok := c.Peek(id(0)); !ok || v != 1 {
		t.Fatalf("Peek = %d, %v", v, ok)
	}
	if !c.Contains(id(0), 1) || c.Contains(id(0), 2) || c.Contains(id(9), 1) {
		t.Fatal("Contains is wrong")
	}
	if o, v, ok := c.Oldest(); !ok || o != id(0) || v != 1 {
		t.Fatalf("Oldest = %v v%d %v; want %v", o, v, ok, id(0))
	}
	c.Put(id(3), 1, []byte{3}) // 0 is still the LRU despite Peek/Contains/Oldest
	if c.Contains(id(0), 1) {
		t.Fatal("Peek or Contains touched recency")
	}
	if st := c.Stats(); st.Hits != 0 || st.Misses != 0 {
		t.Fatalf("Peek/Contains counted as Get: %+v", st)
	}
	empty, _ := New(Config{Capacity: 1})
	if _, _, ok := empty.Oldest(); ok {
		t.Fatal("Oldest of an empty cache reported a block")
	}
}

func TestCoreInvariants(t *testing.T) {
	l := newLRU(40)
	rng := rand.New(rand.NewPCG(3, 4))
	for op := range 5000 {
		i := block.ID{File: uint64(rng.IntN(5)), Index: uint64(rng.IntN(8))}
		switch r := rng.IntN(10); {
		case r < 4:
			l.get(i, block.Version(rng.IntN(2)))
		case r < 8:
			l.put(i, block.Version(rng.IntN(2)), make([]byte, rng.IntN(45)), nil)
		case r < 9:
			l.remove(i)
		case r < 10 && op%2 == 0:
			l.removeFile(i.File)
		default:
			l.relabel(i.File, 0, 1, func(idx uint64, _ int) bool { return idx == i.Index }, nil)
		}
		if err := l.check(); err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
	}
}

// TestRelabel: a file's blocks at the old version move to the new one in
// place (recency unchanged), other versions go, and the blocks taken out
// are returned with their data.
func TestRelabel(t *testing.T) {
	c, _ := New(Config{Capacity: 1 << 20})
	id := func(f, i uint64) block.ID { return block.ID{File: f, Index: i} }
	c.Put(id(1, 0), 5, []byte("a"))
	c.Put(id(1, 1), 5, []byte("b"))
	c.Put(id(1, 2), 4, []byte("old"))
	c.Put(id(1, 3), 5, []byte("d"))
	c.Put(id(2, 0), 5, []byte("other file"))
	taken := c.Relabel(1, 5, 6, func(idx uint64, n int) bool { return idx == 1 && n == 1 })
	if len(taken) != 1 || taken[0].Index != 1 || string(taken[0].Data) != "b" {
		t.Fatalf("taken %+v, want block 1 with its data", taken)
	}
	for _, want := range []struct {
		id   block.ID
		v    block.Version
		held bool
	}{{id(1, 0), 6, true}, {id(1, 3), 6, true}, {id(1, 0), 5, false}, {id(1, 1), 6, false},
		{id(1, 2), 4, false}, {id(1, 2), 6, false}, {id(2, 0), 5, true}} {
		if got := c.Contains(want.id, want.v); got != want.held {
			t.Errorf("Contains(%v, %d) = %v, want %v", want.id, want.v, got, want.held)
		}
	}
	if old, _, _ := c.Oldest(); old != id(1, 0) {
		t.Errorf("oldest %v after relabel, want %v (recency unchanged)", old, id(1, 0))
	}
	if err := c.core.check(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkGetHit(b *testing.B) {
	c, _ := New(Config{Capacity: 1 << 30})
	const n = 1 << 14
	data := make([]byte, 4096)
	for i := range uint64(n) {
		c.Put(block.ID{File: i % 16, Index: i}, 1, data)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j := uint64(i) % n
		if _, ok := c.Get(block.ID{File: j % 16, Index: j}, 1); !ok {
			b.Fatal("miss")
		}
	}
}

func BenchmarkPutEvict(b *testing.B) {
	c, _ := New(Config{Capacity: 1024 * 4096})
	data := make([]byte, 4096)
	for i := 0; b.Loop(); i++ {
		c.Put(block.ID{File: uint64(i % 16), Index: uint64(i)}, 1, data)
	}
}

func BenchmarkGetParallel(b *testing.B) {
	c, _ := New(Config{Capacity: 1 << 30})
	const n = 1 << 12
	data := make([]byte, 4096)
	for i := range uint64(n) {
		c.Put(block.ID{File: 1, Index: i}, 1, data)
	}
	b.RunParallel(func(pb *testing.PB) {
		var i uint64
		for pb.Next() {
			c.Get(block.ID{File: 1, Index: i % n}, 1)
			i++
		}
	})
}
