package hints

import (
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// entry is one cached block's metadata. It holds no pointers: the slab of
// entries is not scanned by the garbage collector.
type entry struct {
	id     block.ID
	ver    block.Version // the file version the data belongs to
	stamp  Time          // last reference
	seq    uint64        // tie-break among equal stamps: later insert or touch is younger
	master bool          // the master copy (fetched from the server, or forwarded as such)
	global bool          // arrived by forward (a global block in the seed's terms)
	rec    int32         // the record of the block's file in the index
}

// ageCache holds block metadata ordered by age: the oldest block (smallest
// (stamp, seq)) is evicted first. Blocks referenced now go to the young
// end; blocks forwarded with their old age are "valued by age like local
// ones" (seed 002 4.3), which an LRU list alone cannot do in O(1).
//
// Entries live in a slab and are named by int32 handles (0 is none). They
// are ordered in two parts whose union is the age order:
//   - the age list (an lru.List, oldest at the back): an entry whose age
//     is younger than every listed entry's when it is inserted or touched
//     is appended at the young end in O(1). In the simulator, and in a
//     live client whose clock moves forward, that is every reference;
//   - an indexed 4-ary min-heap for the others (a forwarded block with its
//     old age, a setAge, a stamp from a clock behind): O(log n).
//
// The oldest block is the older of the list's back and the heap's top.
// (stamp, seq) is a total order (seq is unique), so which entry goes first
// does not depend on which part holds it.
//
// The index is a fileIndex, shared with the client's hints: an entry is
// found through its file's record, and a file's entries are that record's
// slots (for invalidation).
//
// INVARIANT: n == entries indexed in idx == list.Len()+len(heap) <=
// capacity after every public call; heap[i].h's heapAt == i; the list is
// in age order; an entry's slot (its rec, its index) names it.
type ageCache struct {
	capacity int
	seq      uint64
	n        int        // entries
	idx      *fileIndex // the index, by file and block
	ents     []entry    // ents[0] is unused: handle 0 is none
	age      []lru.Link // the age list's links, by handle (Next: older)
	list     lru.List   // front: youngest, back: oldest
	heap     ageHeap    // the other entries
	free     []int32
	watch    func(block.ID, bool) // ClientConfig.Watch
	scratch  []int32
}

// newAgeCache returns an empty cache indexed in idx (a new one if nil).
func newAgeCache(capacity int, idx *fileIndex, watch func(block.ID, bool)) *ageCache {
	if idx == nil {
		idx = newFileIndex(false)
	}
	c := &ageCache{capacity: capacity, idx: idx, watch: watch}
	c.heap.init(capacity, &c.ents)
	return c
}

func (c *ageCache) len() int { return c.n }

func (c *ageCache) full() bool { return c.n >= c.capacity }

// at returns the entry of handle h (valid until the next insert).
func (c *ageCache) at(h int32) *entry { return &c.ents[h] }

// get returns id's handle, 0 if not cached.
func (c *ageCache) get(id block.ID) int32 {
	if s := c.idx.lookup(id); s != nil {
		return s.ent
	}
	return 0
}

// oldestHandle returns the oldest entry's handle (0 if empty), and
// whether it is the heap's top (else the list's back).
func (c *ageCache) oldestHandle() (h int32, top bool) {
	b := c.list.Back()
	if c.heap.len() == 0 {
		return b, false
	}
	if t := c.heap.top(); b == 0 || c.topOlder(t, b) {
		return t.h, true
	}
	return b, false
}

// topOlder reports whether the heap's top t is older than listed entry b
// (the seqs are read only on a tie of stamps).
func (c *ageCache) topOlder(t *hnode, b int32) bool {
	e := &c.ents[b]
	return t.stamp < e.stamp || t.stamp == e.stamp && c.ents[t.h].seq < e.seq
}

// older reports whether age (s1, q1) is older than (s2, q2).
func older(s1 Time, q1 uint64, s2 Time, q2 uint64) bool {
	return s1 < s2 || (s1 == s2 && q1 < q2)
}

// oldest returns the age of the oldest block, or Free while there is room.
func (c *ageCache) oldest() Time {
	if !c.full() || c.len() == 0 {
		return Free
	}
	b := c.list.Back()
	if c.heap.len() == 0 {
		return c.ents[b].stamp
	}
	// The heap's top carries its entry's age: no load of the entry.
	if t := c.heap.top(); b == 0 || c.topOlder(t, b) {
		return t.stamp
	}
	return c.ents[b].stamp
}

// insert adds id with the given age. The caller makes room first.
func (c *ageCache) insert(id block.ID, v block.Version, stamp Time, master, global bool) int32 {
	c.seq++
	var h int32
	if n := len(c.free); n > 0 {
		h, c.free = c.free[n-1], c.free[:n-1]
	} else {
		if len(c.ents) == 0 {
			c.ents = append(c.ents, entry{})
		}
		h = int32(len(c.ents))
		c.ents = append(c.ents, entry{})
		c.age = lru.Grow(c.age, h)
		c.heap.grow(h)
	}
	r := c.idx.ensure(id.File)
	s := c.idx.make(r, id.Index)
	if s.empty() {
		c.idx.filled(r)
	}
	s.ent = h
	c.ents[h] = entry{id: id, ver: v, stamp: stamp, seq: c.seq, master: master, global: global, rec: r}
	c.n++
	c.place(h)
	if c.watch != nil {
		c.watch(id, true)
	}
	return h
}

// place orders h (not yet ordered): at the young end of the list if it is
// younger than every listed entry, else in the heap.
func (c *ageCache) place(h int32) {
	e := &c.ents[h]
	if f := c.list.Front(); f == 0 || older(c.ents[f].stamp, c.ents[f].seq, e.stamp, e.seq) {
		c.list.PushFront(c.age, h)
		return
	}
	c.heap.push(e.stamp, h)
}

// unplace takes h out of the age order. A listed entry is known by its
// links (a heap entry's are zero, and so are those of a list of one, its
// front): no look at the heap's positions, a memory access fewer.
func (c *ageCache) unplace(h int32) {
	if k := c.age[h]; k.Prev != 0 || k.Next != 0 || c.list.Front() == h {
		c.list.Remove(c.age, h)
		return
	}
	c.heap.remove(h)
}

// touch makes h referenced at now (never makes it older).
func (c *ageCache) touch(h int32, now Time) {
	e := &c.ents[h]
	if now < e.stamp {
		return
	}
	c.seq++
	if c.list.Front() == h { // already the youngest
		e.stamp, e.seq = now, c.seq
		return
	}
	c.unplace(h)
	e.stamp, e.seq = now, c.seq
	c.place(h)
}

// setAge gives h a stamp (a forwarded copy merging with a local one).
func (c *ageCache) setAge(h int32, stamp Time) {
	c.unplace(h)
	c.ents[h].stamp = stamp
	c.place(h)
}

// popOldest removes and returns the oldest entry (ok false if empty).
func (c *ageCache) popOldest() (e entry, ok bool) {
	h, top := c.oldestHandle()
	if h == 0 {
		return entry{}, false
	}
	e = c.ents[h]
	if top {
		c.heap.popTop(h)
	} else {
		c.list.Remove(c.age, h)
	}
	c.drop(h)
	return e, true
}

// remove takes h out of the cache.
func (c *ageCache) remove(h int32) {
	c.unplace(h)
	c.drop(h)
}

// drop takes h, already out of the age order, out of the cache.
func (c *ageCache) drop(h int32) {
	e := &c.ents[h]
	id := e.id
	c.n--
	s := c.idx.at(e.rec, id.Index)
	if s.ent = 0; s.empty() {
		c.idx.emptied(e.rec)
	}
	*e = entry{}
	c.free = append(c.free, h)
	if c.watch != nil {
		c.watch(id, false)
	}
}

// fileHandles appends the handles of file's entries to out, in block
// order.
func (c *ageCache) fileHandles(file uint64, out []int32) []int32 {
	if r := c.idx.find(file); r != 0 {
		c.idx.each(r, func(_ uint64, s *slot) bool {
			if s.ent != 0 {
				out = append(out, s.ent)
			}
			return true
		})
	}
	return out
}

// dropFile removes every block of file and appends their ids to out, in
// block order.
func (c *ageCache) dropFile(file uint64, out []block.ID) []block.ID {
	c.scratch = c.fileHandles(file, c.scratch[:0])
	for _, h := range c.scratch {
		out = append(out, c.ents[h].id)
		c.remove(h)
	}
	return out
}

// each calls f for every cached entry (in no particular order).
func (c *ageCache) each(f func(e *entry)) {
	for h := c.list.Front(); h != 0; h = lru.Next(c.age, h) {
		f(&c.ents[h])
	}
	for i := range c.heap.len() {
		f(&c.ents[c.heap.node(i).h])
	}
}

// check verifies the invariants (tests).
func (c *ageCache) check() error {
	n := c.list.Len() + c.heap.len()
	indexed := 0
	var err error
	c.idx.eachFile(func(r int32) bool {
		c.idx.each(r, func(idx uint64, s *slot) bool {
			if s.ent == 0 {
				return true
			}
			indexed++
			if e := &c.ents[s.ent]; e.id.File != c.idx.rec(r).id || e.id.Index != idx || e.rec != r {
				err = errorf("age cache: slot %d of file %d holds %v", idx, c.idx.rec(r).id, e.id)
			}
			return err == nil
		})
		return err == nil
	})
	if err != nil {
		return err
	}
	if n != indexed || n != c.n {
		return errorf("age cache: list %d + heap %d entries, index %d, count %d", c.list.Len(), c.heap.len(), indexed, c.n)
	}
	if n > c.capacity {
		return errorf("age cache: %d entries over capacity %d", n, c.capacity)
	}
	for i := range c.heap.len() {
		hn := c.heap.node(i)
		if e := &c.ents[hn.h]; int(c.heap.pos[hn.h]) != i || hn.stamp != e.stamp {
			return errorf("age cache: entry %v at %d says %d", e.id, i, c.heap.pos[hn.h])
		}
		if c.age[hn.h] != (lru.Link{}) || c.list.Front() == hn.h { // unplace tells them apart so
			return errorf("age cache: heap entry %v has list links", c.ents[hn.h].id)
		}
		if i > 0 && c.heap.older(hn, c.heap.node((i-1)/heapArity)) {
			return errorf("age cache: heap order broken at %d", i)
		}
	}
	var prev *entry
	for h := c.list.Back(); h != 0; h = lru.Prev(c.age, h) {
		e := &c.ents[h]
		if c.heap.has(h) {
			return errorf("age cache: listed entry %v marked in the heap", e.id)
		}
		if prev != nil && !older(prev.stamp, prev.seq, e.stamp, e.seq) {
			return errorf("age cache: age list out of order at %v", e.id)
		}
		prev = e
	}
	return c.idx.check()
}
