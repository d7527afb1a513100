package hints

import (
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// bkey is a block.ID hashable by lru.Table.
type bkey block.ID

func (k bkey) Hash() uint64 { return lru.Mix(k.File*0x9e3779b97f4a7c15 ^ k.Index) }

// entry is one cached block's metadata.
type entry struct {
	id     block.ID
	ver    block.Version // the file version the data belongs to
	stamp  Time          // last reference
	seq    uint64        // tie-break among equal stamps: later insert or touch is younger
	master bool          // the master copy (fetched from the server, or forwarded as such)
	global bool          // arrived by forward (a global block in the seed's terms)
	heapAt int           // index in ageCache.heap

	fprev, fnext *entry // the file's entries, for invalidation
}

// ageCache holds block metadata ordered by age: the oldest block (smallest
// stamp) is evicted first. Blocks referenced now go to the young end; blocks
// forwarded with their old age are "valued by age like local ones" (seed 002
// 4.3), which an LRU list cannot do in O(1), hence an indexed min-heap:
// O(log n) per insert, touch and eviction (a 4-ary heap).
//
// The index is an lru.Table (open addressing: no tombstones under the
// cache's insert/delete churn).
//
// INVARIANT: len(heap) == byID.Len() <= capacity after every public call;
// heap[i].heapAt == i; every entry is on the list of its file.
type ageCache struct {
	capacity int
	seq      uint64
	byID     lru.Table[bkey, *entry]
	files    map[uint64]*entry    // head of each file's list
	heap     []hnode              // the entries with their ages inline: comparisons touch no entry
	watch    func(block.ID, bool) // ClientConfig.Watch
}

// hnode is a heap slot: an entry and a copy of its age (stamp, seq).
type hnode struct {
	stamp Time
	seq   uint64
	e     *entry
}

func newAgeCache(capacity int, watch func(block.ID, bool)) *ageCache {
	return &ageCache{capacity: capacity, files: make(map[uint64]*entry), watch: watch}
}

func (c *ageCache) len() int { return len(c.heap) }

func (c *ageCache) full() bool { return len(c.heap) >= c.capacity }

func (c *ageCache) get(id block.ID) *entry {
	e, _ := c.byID.Get(bkey(id))
	return e
}

// oldest returns the age of the oldest block, or Free while there is room.
func (c *ageCache) oldest() Time {
	if !c.full() || len(c.heap) == 0 {
		return Free
	}
	return c.heap[0].stamp
}

// insert adds id with the given age. The caller makes room first.
func (c *ageCache) insert(id block.ID, v block.Version, stamp Time, master, global bool) *entry {
	c.seq++
	e := &entry{id: id, ver: v, stamp: stamp, seq: c.seq, master: master, global: global, heapAt: len(c.heap)}
	c.byID.Put(bkey(id), e)
	if h := c.files[id.File]; h != nil {
		e.fnext, h.fprev = h, e
	}
	c.files[id.File] = e
	c.heap = append(c.heap, hnode{stamp, e.seq, e})
	c.up(e.heapAt)
	if c.watch != nil {
		c.watch(id, true)
	}
	return e
}

// touch makes e referenced at now (never makes it older).
func (c *ageCache) touch(e *entry, now Time) {
	if now < e.stamp {
		return
	}
	c.seq++
	e.stamp, e.seq = now, c.seq
	h := &c.heap[e.heapAt]
	h.stamp, h.seq = now, c.seq
	c.down(e.heapAt)
}

// setAge gives e a stamp (a forwarded copy merging with a local one).
func (c *ageCache) setAge(e *entry, stamp Time) {
	e.stamp = stamp
	c.heap[e.heapAt].stamp = stamp
	c.fix(e.heapAt)
}

// popOldest removes and returns the oldest entry (nil if empty).
func (c *ageCache) popOldest() *entry {
	if len(c.heap) == 0 {
		return nil
	}
	e := c.heap[0].e
	c.remove(e)
	return e
}

// remove takes e out of the cache.
func (c *ageCache) remove(e *entry) {
	i := e.heapAt
	last := len(c.heap) - 1
	if i != last {
		c.swap(i, last)
	}
	c.heap[last] = hnode{}
	c.heap = c.heap[:last]
	if i != last {
		c.fix(i)
	}
	c.byID.Delete(bkey(e.id))
	if e.fprev != nil {
		e.fprev.fnext = e.fnext
	} else if e.fnext != nil {
		c.files[e.id.File] = e.fnext
	} else {
		delete(c.files, e.id.File)
	}
	if e.fnext != nil {
		e.fnext.fprev = e.fprev
	}
	e.fprev, e.fnext = nil, nil
	e.heapAt = -1
	if c.watch != nil {
		c.watch(e.id, false)
	}
}

// dropFile removes every block of file and returns them.
func (c *ageCache) dropFile(file uint64, out []*entry) []*entry {
	for e := c.files[file]; e != nil; {
		next := e.fnext
		c.remove(e)
		out = append(out, e)
		e = next
	}
	return out
}

func (c *ageCache) less(i, j int) bool {
	a, b := &c.heap[i], &c.heap[j]
	if a.stamp != b.stamp {
		return a.stamp < b.stamp
	}
	return a.seq < b.seq
}

func (c *ageCache) swap(i, j int) {
	c.heap[i], c.heap[j] = c.heap[j], c.heap[i]
	c.heap[i].e.heapAt, c.heap[j].e.heapAt = i, j
}

// The heap is 4-ary: half the levels of a binary heap, and a node's
// children share a cache line or two. (stamp, seq) is a total order, so the
// order of removal does not depend on the heap's shape.
const heapArity = 4

func (c *ageCache) up(i int) {
	for i > 0 {
		p := (i - 1) / heapArity
		if !c.less(i, p) {
			return
		}
		c.swap(i, p)
		i = p
	}
}

func (c *ageCache) down(i int) {
	n := len(c.heap)
	for {
		l := heapArity*i + 1
		if l >= n {
			return
		}
		m := l
		for j := l + 1; j < min(l+heapArity, n); j++ {
			if c.less(j, m) {
				m = j
			}
		}
		if !c.less(m, i) {
			return
		}
		c.swap(i, m)
		i = m
	}
}

func (c *ageCache) fix(i int) {
	c.up(i)
	c.down(i)
}

// check verifies the invariants (tests).
func (c *ageCache) check() error {
	if len(c.heap) != c.byID.Len() {
		return errorf("age cache: heap has %d entries, index %d", len(c.heap), c.byID.Len())
	}
	if len(c.heap) > c.capacity {
		return errorf("age cache: %d entries over capacity %d", len(c.heap), c.capacity)
	}
	for i, h := range c.heap {
		e := h.e
		if e.heapAt != i || h.stamp != e.stamp || h.seq != e.seq {
			return errorf("age cache: entry %v at %d says %d", e.id, i, e.heapAt)
		}
		if i > 0 && c.less(i, (i-1)/heapArity) {
			return errorf("age cache: heap order broken at %d", i)
		}
	}
	n := 0
	for f, h := range c.files {
		for e := h; e != nil; e = e.fnext {
			if e.id.File != f || c.get(e.id) != e {
				return errorf("age cache: file list of %d holds %v", f, e.id)
			}
			n++
		}
	}
	if n != len(c.heap) {
		return errorf("age cache: file lists hold %d entries, heap %d", n, len(c.heap))
	}
	return nil
}
