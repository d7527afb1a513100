package dirsim

import (
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// cache is one cache (a client's or the server's memory): an exact LRU
// over blocks named by their dense numbers (sim.IDs), a slab of at most
// capacity nodes on one lru.List. Each block remembers its file, the file
// version it belongs to and when its data arrived (a block whose data is
// still on its way is pending).
//
// A block is found in one of three ways. A direct cache (the server's, a
// lone client's) keeps a handle for every block number (4 bytes a block
// numbered): one load. The clients' caches of a simulation with up to 64
// clients share a presence mask, a word per block number with a bit per
// client: a miss, most of what a client's lookup is when blocks move
// between clients, is one load, and a present block is found in the
// client's lru.IDTable. Beyond 64 clients the IDTable alone.
//
// INVARIANT: len() <= capacity; the list, the index (one, or at) and the
// presence bits (with a mask) hold the same blocks; free holds the slab's
// other handles below len(nodes).
type cache struct {
	capacity int
	direct   bool
	one      []int32     // direct: block number → handle, 0 if absent
	at       lru.IDTable // not direct: block number → handle
	mask     *presence   // not direct, up to 64 clients: the shared presence mask
	bit      uint64      // this cache's bit in it
	nodes    []lnode     // by handle; nodes[0] is unused: handle 0 is none
	links    []lru.Link
	list     lru.List // newest first
	free     []int32
}

// presence is the clients' presence mask: by block number, bit i set when
// client i caches the block.
type presence struct{ m []uint64 }

type lnode struct {
	ver   block.Version
	ready time.Duration
	file  uint64
	id    uint32 // block number
}

// newLRU returns an empty cache: direct, or sharing mask as client i (mask
// nil: neither).
func newLRU(capacity int, direct bool, mask *presence, i int) *cache {
	l := &cache{capacity: capacity, direct: direct, nodes: make([]lnode, 1), links: make([]lru.Link, 1)}
	if !direct && mask != nil {
		l.mask, l.bit = mask, 1<<i
	}
	return l
}

func (l *cache) len() int { return l.list.Len() }

// find returns block id's handle, 0 if absent.
func (l *cache) find(id uint32) int32 {
	switch {
	case l.direct:
		if int(id) < len(l.one) {
			return l.one[id]
		}
		return 0
	case l.mask != nil:
		if int(id) >= len(l.mask.m) || l.mask.m[id]&l.bit == 0 {
			return 0
		}
	}
	return l.at.Get(id)
}

// get returns block id's node (nil if absent) without touching it; the
// pointer is valid until the next insert.
func (l *cache) get(id uint32) *lnode {
	if h := l.find(id); h != 0 {
		return &l.nodes[h]
	}
	return nil
}

// touch makes handle h the newest block.
func (l *cache) touch(h int32) { l.list.MoveToFront(l.links, h) }

// remove drops handle h.
func (l *cache) remove(h int32) {
	l.list.Remove(l.links, h)
	id := l.nodes[h].id
	if l.direct {
		l.one[id] = 0
	} else {
		l.at.Delete(id)
		if l.mask != nil {
			l.mask.m[id] &^= l.bit
		}
	}
	l.free = append(l.free, h)
}

// relabel moves the cached blocks of file at version from to version to
// (O(cache size); recency unchanged).
func (l *cache) relabel(file uint64, from, to block.Version) {
	for h := l.list.Front(); h != 0; h = l.links[h].Next {
		if n := &l.nodes[h]; n.file == file && n.ver == from {
			n.ver = to
		}
	}
}

// insert caches block id of file (version ver, data ready at ready) as
// the newest block, replacing a cached copy. It returns the evicted block,
// if any.
func (l *cache) insert(id uint32, file uint64, ver block.Version, ready time.Duration) (victim lnode, evicted bool) {
	if l.capacity <= 0 {
		return lnode{}, false
	}
	n := lnode{ver, ready, file, id}
	if h := l.find(id); h != 0 {
		l.nodes[h] = n
		l.touch(h)
		return lnode{}, false
	}
	if l.len() >= l.capacity {
		h := l.list.Back()
		victim, evicted = l.nodes[h], true
		l.remove(h)
	}
	l.list.PushFront(l.links, l.slot(n))
	return victim, evicted
}

// slot stores n, which is not cached, and returns its handle.
func (l *cache) slot(n lnode) int32 {
	var h int32
	if k := len(l.free); k > 0 {
		h, l.free = l.free[k-1], l.free[:k-1]
	} else {
		h = int32(len(l.nodes))
		l.nodes = append(l.nodes, lnode{})
		l.links = append(l.links, lru.Link{})
	}
	l.nodes[h] = n
	switch {
	case l.direct:
		if int(n.id) >= len(l.one) { // no store (and write barrier) when it fits
			l.one = lru.Extend(l.one, int(n.id)+1, 1<<62)
		}
		l.one[n.id] = h
	case l.mask != nil:
		if int(n.id) >= len(l.mask.m) {
			l.mask.m = lru.Extend(l.mask.m, int(n.id)+1, 1<<62)
		}
		l.mask.m[n.id] |= l.bit
		fallthrough
	default:
		l.at.Put(n.id, h)
	}
	return h
}
