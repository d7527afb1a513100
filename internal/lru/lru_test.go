package lru

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestList checks several lists sharing one link slice against slices
// under random pushes, removals and moves.
func TestList(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const nodes, lists = 200, 5
	ls := Grow(nil, nodes)
	var l [lists]List
	var ref [lists][]int32
	on := make([]int, nodes+1) // list+1 holding the handle, 0 if none
	for i := range 100000 {
		h := int32(1 + rng.IntN(nodes))
		if w := on[h] - 1; w >= 0 {
			j := slices.Index(ref[w], h)
			if rng.IntN(2) == 0 {
				l[w].Remove(ls, h)
				ref[w] = slices.Delete(ref[w], j, j+1)
				on[h] = 0
			} else if rng.IntN(4) == 0 {
				b := l[w].BackToFront(ls)
				last := ref[w][len(ref[w])-1]
				if b != last {
					t.Fatalf("step %d list %d: BackToFront = %d, want the last, %d", i, w, b, last)
				}
				ref[w] = slices.Insert(ref[w][:len(ref[w])-1], 0, last)
			} else {
				l[w].MoveToFront(ls, h)
				ref[w] = slices.Insert(slices.Delete(ref[w], j, j+1), 0, h)
			}
		} else {
			w := rng.IntN(lists)
			if rng.IntN(2) == 0 {
				l[w].PushFront(ls, h)
				ref[w] = slices.Insert(ref[w], 0, h)
			} else {
				l[w].PushBack(ls, h)
				ref[w] = append(ref[w], h)
			}
			on[h] = w + 1
		}
		if i%97 != 0 {
			continue
		}
		for w := range l {
			var fwd, back []int32
			for h := l[w].Front(); h != 0; h = Next(ls, h) {
				fwd = append(fwd, h)
			}
			for h := l[w].Back(); h != 0; h = Prev(ls, h) {
				back = append(back, h)
			}
			slices.Reverse(back)
			if !slices.Equal(fwd, ref[w]) || !slices.Equal(back, ref[w]) || l[w].Len() != len(ref[w]) {
				t.Fatalf("step %d list %d: %v / %v (len %d), want %v", i, w, fwd, back, l[w].Len(), ref[w])
			}
		}
	}
}

// TestCache runs a capacity-bounded LRU on the Cache against a reference
// LRU kept in a slice (most recent first).
func TestCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const capacity = 64
	var c Cache[key, int]
	var ref []key
	vals := map[key]int{}
	for i := range 200000 {
		k := key{File: rng.Uint64N(4), Block: rng.Uint64N(60)}
		j := slices.Index(ref, k)
		switch h := c.Find(k); {
		case rng.IntN(8) == 0:
			if (h != 0) != (j >= 0) {
				t.Fatalf("step %d: find %v = %d, reference has it at %d", i, k, h, j)
			}
			if h != 0 {
				c.Remove(h)
				ref = slices.Delete(ref, j, j+1)
				delete(vals, k)
			}
		case h != 0:
			if j < 0 || *c.Value(h) != vals[k] || c.Key(h) != k {
				t.Fatalf("step %d: hit %v not in reference", i, k)
			}
			c.Touch(h)
			*c.Value(h) = i
			vals[k] = i
			ref = slices.Insert(slices.Delete(ref, j, j+1), 0, k)
		default:
			if j >= 0 {
				t.Fatalf("step %d: miss %v, reference has it", i, k)
			}
			if c.Len() == capacity {
				vk, vv, ok := c.Evict()
				if !ok || vk != ref[len(ref)-1] || vv != vals[vk] {
					t.Fatalf("step %d: evicted %v, want %v", i, vk, ref[len(ref)-1])
				}
				ref = ref[:len(ref)-1]
				delete(vals, vk)
			}
			c.Add(k, i)
			vals[k] = i
			ref = slices.Insert(ref, 0, k)
		}
		if i%101 == 0 {
			if err := c.Check(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			var got []key
			for h := c.Newest(); h != 0; h = c.Older(h) {
				got = append(got, c.Key(h))
			}
			if !slices.Equal(got, ref) {
				t.Fatalf("step %d: order %v, want %v", i, got, ref)
			}
			if c.Oldest() != 0 && c.Key(c.Oldest()) != ref[len(ref)-1] {
				t.Fatalf("step %d: oldest", i)
			}
		}
	}
	if c.Handles() > capacity+1 {
		t.Fatalf("%d handles for %d entries: the free list is not reused", c.Handles(), capacity)
	}
}

// BenchmarkCache is a cache of 100 000 entries under a uniform random
// stream over 400 000 keys (mostly misses: evict + add).
func BenchmarkCache(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	keys := make([]key, 1<<20)
	for i := range keys {
		keys[i] = key{Block: rng.Uint64N(400000)}
	}
	var c Cache[key, struct{}]
	i := 0
	for b.Loop() {
		k := keys[i&(len(keys)-1)]
		i++
		if h := c.Find(k); h != 0 {
			c.Touch(h)
			continue
		}
		if c.Len() >= 100000 {
			c.Evict()
		}
		c.Add(k, struct{}{})
	}
}
