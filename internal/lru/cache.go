package lru

import "fmt"

// Cache is an exact LRU over keys K, each with a value V: an index from
// keys to handles, a slab of nodes and one List of them, most recent first.
// Capacity is the caller's (in entries, bytes or anything else): Add never
// evicts, Evict drops the least recent. Handles run from 1 to Handles()-1
// and are reused after removal, so a caller may keep more per-entry state
// (further link sets, say) in slices indexed by handle.
//
// INVARIANT: the index, the list and the live slab nodes hold the same
// keys; free holds the other handles below len(nodes).
type Cache[K Hasher, V any] struct {
	index Table[K, int32]
	nodes []node[K, V] // nodes[0] is unused: handle 0 is nil
	links []Link
	list  List
	free  []int32
}

type node[K Hasher, V any] struct {
	key K
	val V
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int { return c.list.Len() }

// Handles returns one more than the highest handle in use so far.
func (c *Cache[K, V]) Handles() int { return max(len(c.nodes), 1) }

// Find returns k's handle, 0 if k is absent. It does not touch k.
func (c *Cache[K, V]) Find(k K) int32 {
	h, _ := c.index.Get(k)
	return h
}

// Key returns the key of handle h.
func (c *Cache[K, V]) Key(h int32) K { return c.nodes[h].key }

// Value returns the value of handle h (valid until the next Add).
func (c *Cache[K, V]) Value(h int32) *V { return &c.nodes[h].val }

// Touch makes h the most recent entry.
func (c *Cache[K, V]) Touch(h int32) { c.list.MoveToFront(c.links, h) }

// Add inserts k, which is absent, as the most recent entry with value v
// and returns its handle.
func (c *Cache[K, V]) Add(k K, v V) int32 {
	var h int32
	if n := len(c.free); n > 0 {
		h, c.free = c.free[n-1], c.free[:n-1]
		c.nodes[h] = node[K, V]{k, v}
	} else {
		if len(c.nodes) == 0 {
			c.nodes = append(c.nodes, node[K, V]{})
		}
		h = int32(len(c.nodes))
		c.nodes = append(c.nodes, node[K, V]{k, v})
		c.links = Grow(c.links, h)
	}
	c.index.Put(k, h)
	c.list.PushFront(c.links, h)
	return h
}

// Remove drops entry h.
func (c *Cache[K, V]) Remove(h int32) {
	c.list.Remove(c.links, h)
	c.index.Delete(c.nodes[h].key)
	c.nodes[h] = node[K, V]{} // let go of what V holds
	c.free = append(c.free, h)
}

// Newest returns the most recent handle, 0 if empty.
func (c *Cache[K, V]) Newest() int32 { return c.list.Front() }

// Oldest returns the least recent handle, 0 if empty.
func (c *Cache[K, V]) Oldest() int32 { return c.list.Back() }

// Older returns the handle after h toward the least recent, 0 at the end.
func (c *Cache[K, V]) Older(h int32) int32 { return c.links[h].Next }

// Evict drops the least recent entry and returns it; ok is false if the
// cache is empty.
func (c *Cache[K, V]) Evict() (k K, v V, ok bool) {
	h := c.list.Back()
	if h == 0 {
		return k, v, false
	}
	k, v = c.nodes[h].key, c.nodes[h].val
	c.Remove(h)
	return k, v, true
}

// Check verifies the invariants (tests).
func (c *Cache[K, V]) Check() error {
	if c.index.Len() != c.list.Len() {
		return fmt.Errorf("lru: index holds %d keys, list %d", c.index.Len(), c.list.Len())
	}
	n, prev := 0, int32(0)
	for h := c.list.Front(); h != 0; h = c.links[h].Next {
		if n++; n > c.list.Len() {
			return fmt.Errorf("lru: list longer than its length %d", c.list.Len())
		}
		if c.links[h].Prev != prev {
			return fmt.Errorf("lru: handle %d: back link %d, want %d", h, c.links[h].Prev, prev)
		}
		if j, ok := c.index.Get(c.nodes[h].key); !ok || j != h {
			return fmt.Errorf("lru: handle %d not indexed", h)
		}
		prev = h
	}
	if prev != c.list.Back() || n != c.list.Len() {
		return fmt.Errorf("lru: list has %d nodes ending at %d, want %d ending at %d", n, prev, c.list.Len(), c.list.Back())
	}
	if n+len(c.free) != max(len(c.nodes)-1, 0) {
		return fmt.Errorf("lru: %d live + %d free handles, slab %d", n, len(c.free), len(c.nodes)-1)
	}
	return nil
}
