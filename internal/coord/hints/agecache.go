package hints

import (
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// bkey is a block.ID hashable by lru.Table.
type bkey block.ID

func (k bkey) Hash() uint64 { return lru.Mix(k.File*0x9e3779b97f4a7c15 ^ k.Index) }

// fkey is a file id hashable by lru.Table.
type fkey uint64

func (k fkey) Hash() uint64 { return lru.Mix(uint64(k)) }

// blockDir indexes a participant's blocks by id and by file: for each
// block its cache entry and its hint (either may be absent: 0), for each
// file the lists of both. The age cache and the hint store of a client
// share one, so that the two lookups of a block (is it here? where is its
// master copy?) and the upkeep of its file's lists touch one slot each.
type blockDir struct {
	blocks lru.Table[bkey, blockRefs]
	files  lru.Table[fkey, fileRefs]
}

type blockRefs struct{ ent, hint int32 }

type fileRefs struct{ ents, hints lru.List }

// ref returns b's slot, made if need be (valid until the next change).
func (d *blockDir) ref(b block.ID) *blockRefs {
	if p := d.blocks.Ref(bkey(b)); p != nil {
		return p
	}
	d.blocks.Put(bkey(b), blockRefs{})
	return d.blocks.Ref(bkey(b))
}

// release drops b's slot if it holds nothing.
func (d *blockDir) release(b block.ID, p *blockRefs) {
	if p.ent == 0 && p.hint == 0 {
		d.blocks.Delete(bkey(b))
	}
}

// file returns f's lists, made if need be (valid until the next change).
func (d *blockDir) file(f uint64) *fileRefs {
	if p := d.files.Ref(fkey(f)); p != nil {
		return p
	}
	d.files.Put(fkey(f), fileRefs{})
	return d.files.Ref(fkey(f))
}

// releaseFile drops f's lists if both are empty.
func (d *blockDir) releaseFile(f uint64, p *fileRefs) {
	if p.ents.Len() == 0 && p.hints.Len() == 0 {
		d.files.Delete(fkey(f))
	}
}

// entry is one cached block's metadata. It holds no pointers: the slab of
// entries is not scanned by the garbage collector.
type entry struct {
	id     block.ID
	ver    block.Version // the file version the data belongs to
	stamp  Time          // last reference
	seq    uint64        // tie-break among equal stamps: later insert or touch is younger
	master bool          // the master copy (fetched from the server, or forwarded as such)
	global bool          // arrived by forward (a global block in the seed's terms)
	// inHeap says where the entry is ordered: the heap (at heapAt) or the
	// age list.
	inHeap bool
	heapAt int32
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
// The index is a blockDir (lru.Tables: open addressing, no tombstones
// under the cache's insert/delete churn), shared with the client's hints;
// the per-file lists (for invalidation) are lru.Lists over the handles.
//
// INVARIANT: n == entries indexed in dir == list.Len()+len(heap) <=
// capacity after every public call; heap[i].h's heapAt == i; the list is
// in age order; every entry is on the list of its file.
type ageCache struct {
	capacity int
	seq      uint64
	n        int        // entries
	dir      *blockDir  // the index, by block and by file
	ents     []entry    // ents[0] is unused: handle 0 is none
	age      []lru.Link // the age list's links, by handle (Next: older)
	flinks   []lru.Link // the file lists' links, by handle
	list     lru.List   // front: youngest, back: oldest
	heap     []hnode    // the other entries, with their ages inline: comparisons touch no entry
	free     []int32
	watch    func(block.ID, bool) // ClientConfig.Watch
}

// hnode is a heap slot: an entry's handle and a copy of its age (stamp, seq).
type hnode struct {
	stamp Time
	seq   uint64
	h     int32
}

// newAgeCache returns an empty cache indexed in dir (a new one if nil).
func newAgeCache(capacity int, dir *blockDir, watch func(block.ID, bool)) *ageCache {
	if dir == nil {
		dir = new(blockDir)
	}
	return &ageCache{capacity: capacity, dir: dir, watch: watch}
}

func (c *ageCache) len() int { return c.n }

func (c *ageCache) full() bool { return c.n >= c.capacity }

// at returns the entry of handle h (valid until the next insert).
func (c *ageCache) at(h int32) *entry { return &c.ents[h] }

// get returns id's handle, 0 if not cached.
func (c *ageCache) get(id block.ID) int32 {
	r, _ := c.dir.blocks.Get(bkey(id))
	return r.ent
}

// oldestHandle returns the oldest entry's handle (0 if empty).
func (c *ageCache) oldestHandle() int32 {
	b := c.list.Back()
	if len(c.heap) == 0 {
		return b
	}
	if top := &c.heap[0]; b == 0 || older(top.stamp, top.seq, c.ents[b].stamp, c.ents[b].seq) {
		return top.h
	}
	return b
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
	return c.ents[c.oldestHandle()].stamp
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
		c.flinks = lru.Grow(c.flinks, h)
	}
	c.ents[h] = entry{id: id, ver: v, stamp: stamp, seq: c.seq, master: master, global: global}
	c.n++
	c.dir.ref(id).ent = h
	c.dir.file(id.File).ents.PushFront(c.flinks, h)
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
		e.inHeap = false
		c.list.PushFront(c.age, h)
		return
	}
	e.inHeap, e.heapAt = true, int32(len(c.heap))
	c.heap = append(c.heap, hnode{e.stamp, e.seq, h})
	c.up(int(e.heapAt))
}

// unplace takes h out of the age order.
func (c *ageCache) unplace(h int32) {
	e := &c.ents[h]
	if !e.inHeap {
		c.list.Remove(c.age, h)
		return
	}
	i, last := int(e.heapAt), len(c.heap)-1
	if i != last {
		c.swap(i, last)
	}
	c.heap = c.heap[:last]
	if i != last {
		c.fix(i)
	}
	e.inHeap = false
}

// touch makes h referenced at now (never makes it older).
func (c *ageCache) touch(h int32, now Time) {
	e := &c.ents[h]
	if now < e.stamp {
		return
	}
	c.seq++
	if !e.inHeap && c.list.Front() == h { // already the youngest
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
	h := c.oldestHandle()
	if h == 0 {
		return entry{}, false
	}
	e = c.ents[h]
	c.remove(h)
	return e, true
}

// remove takes h out of the cache.
func (c *ageCache) remove(h int32) {
	c.unplace(h)
	id := c.ents[h].id
	c.n--
	r := c.dir.blocks.Ref(bkey(id))
	r.ent = 0
	c.dir.release(id, r)
	f := c.dir.files.Ref(fkey(id.File))
	f.ents.Remove(c.flinks, h)
	c.dir.releaseFile(id.File, f)
	c.ents[h] = entry{}
	c.free = append(c.free, h)
	if c.watch != nil {
		c.watch(id, false)
	}
}

// fileHandles appends the handles of file's entries to out.
func (c *ageCache) fileHandles(file uint64, out []int32) []int32 {
	f, _ := c.dir.files.Get(fkey(file))
	for h := f.ents.Front(); h != 0; h = lru.Next(c.flinks, h) {
		out = append(out, h)
	}
	return out
}

// dropFile removes every block of file and appends their ids to out.
func (c *ageCache) dropFile(file uint64, out []block.ID) []block.ID {
	f, _ := c.dir.files.Get(fkey(file))
	for h := f.ents.Front(); h != 0; {
		next := lru.Next(c.flinks, h)
		out = append(out, c.ents[h].id)
		c.remove(h)
		h = next
	}
	return out
}

// each calls f for every cached entry (in no particular order).
func (c *ageCache) each(f func(e *entry)) {
	for h := c.list.Front(); h != 0; h = lru.Next(c.age, h) {
		f(&c.ents[h])
	}
	for _, n := range c.heap {
		f(&c.ents[n.h])
	}
}

func (c *ageCache) less(i, j int) bool {
	a, b := &c.heap[i], &c.heap[j]
	return older(a.stamp, a.seq, b.stamp, b.seq)
}

func (c *ageCache) swap(i, j int) {
	c.heap[i], c.heap[j] = c.heap[j], c.heap[i]
	c.ents[c.heap[i].h].heapAt, c.ents[c.heap[j].h].heapAt = int32(i), int32(j)
}

// The heap is 4-ary: half the levels of a binary heap, and a node's
// children share a cache line or two.
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
	n := c.list.Len() + len(c.heap)
	indexed := 0
	c.dir.blocks.Range(func(_ bkey, r blockRefs) bool {
		if r.ent != 0 {
			indexed++
		}
		return true
	})
	if n != indexed || n != c.n {
		return errorf("age cache: list %d + heap %d entries, index %d, count %d", c.list.Len(), len(c.heap), indexed, c.n)
	}
	if n > c.capacity {
		return errorf("age cache: %d entries over capacity %d", n, c.capacity)
	}
	for i, hn := range c.heap {
		e := &c.ents[hn.h]
		if !e.inHeap || int(e.heapAt) != i || hn.stamp != e.stamp || hn.seq != e.seq {
			return errorf("age cache: entry %v at %d says %d", e.id, i, e.heapAt)
		}
		if i > 0 && c.less(i, (i-1)/heapArity) {
			return errorf("age cache: heap order broken at %d", i)
		}
	}
	var prev *entry
	for h := c.list.Back(); h != 0; h = lru.Prev(c.age, h) {
		e := &c.ents[h]
		if e.inHeap {
			return errorf("age cache: listed entry %v marked in the heap", e.id)
		}
		if prev != nil && !older(prev.stamp, prev.seq, e.stamp, e.seq) {
			return errorf("age cache: age list out of order at %v", e.id)
		}
		prev = e
	}
	files := 0
	var err error
	c.dir.files.Range(func(f fkey, fr fileRefs) bool {
		for h := fr.ents.Front(); h != 0; h = lru.Next(c.flinks, h) {
			if id := c.ents[h].id; id.File != uint64(f) || c.get(id) != h {
				err = errorf("age cache: file list of %d holds %v", f, id)
				return false
			}
			files++
		}
		return true
	})
	if err != nil {
		return err
	}
	if files != n {
		return errorf("age cache: file lists hold %d entries, cache %d", files, n)
	}
	return nil
}
