package dirsim

import (
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// cache is one cache (a client's or the server's memory): an exact LRU
// over blocks named by their dense numbers (sim.IDs), a slab of nodes on
// one lru.List. Each block remembers its file's number, the file version
// it belongs to and when its data arrived (a block whose data is still on
// its way is pending). A block is found through an lru.IDTable, or, for a
// cache that may use memory in proportion to every block numbered (the
// server's, the only client's), in a slice indexed by block number.
//
// INVARIANT: len() <= capacity; the index and the list hold the same
// blocks; free holds the other handles below len(nodes).
type cache struct {
	capacity int
	direct   bool
	at       lru.IDTable // block number → handle (not direct)
	one      []int32     // direct: block number → handle, 0 if absent
	nodes    []lnode     // nodes[0] is unused: handle 0 is none
	links    []lru.Link
	list     lru.List // newest first
	free     []int32
}

type lnode struct {
	id    uint32 // block number
	file  uint32 // its file's number
	ver   block.Version
	ready time.Duration
}

func newLRU(capacity int, direct bool) *cache {
	return &cache{capacity: capacity, direct: direct, nodes: make([]lnode, 1), links: make([]lru.Link, 1)}
}

func (l *cache) len() int { return l.list.Len() }

// find returns block id's handle, 0 if absent.
func (l *cache) find(id uint32) int32 {
	if l.direct {
		if int(id) < len(l.one) {
			return l.one[id]
		}
		return 0
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
	id := l.nodes[h].id
	if l.direct {
		l.one[id] = 0
	} else {
		l.at.Delete(id)
	}
	l.list.Remove(l.links, h)
	l.free = append(l.free, h)
}

// relabel moves the cached blocks of file at version from to version to
// (O(cache size); recency unchanged).
func (l *cache) relabel(file uint32, from, to block.Version) {
	for h := l.list.Front(); h != 0; h = l.links[h].Next {
		if n := &l.nodes[h]; n.file == file && n.ver == from {
			n.ver = to
		}
	}
}

// insert caches block id of file (version ver, data ready at ready) as
// the newest block, replacing a cached copy. It returns the evicted block,
// if any.
func (l *cache) insert(id, file uint32, ver block.Version, ready time.Duration) (victim lnode, evicted bool) {
	if l.capacity <= 0 {
		return lnode{}, false
	}
	if h := l.find(id); h != 0 {
		l.nodes[h] = lnode{id, file, ver, ready}
		l.touch(h)
		return lnode{}, false
	}
	if l.len() >= l.capacity {
		h := l.list.Back()
		victim, evicted = l.nodes[h], true
		l.remove(h)
	}
	var h int32
	if n := len(l.free); n > 0 {
		h, l.free = l.free[n-1], l.free[:n-1]
	} else {
		h = int32(len(l.nodes))
		l.nodes = append(l.nodes, lnode{})
		l.links = append(l.links, lru.Link{})
	}
	l.nodes[h] = lnode{id, file, ver, ready}
	if l.direct {
		l.one = lru.Extend(l.one, int(id)+1, 1<<62)
		l.one[id] = h
	} else {
		l.at.Put(id, h)
	}
	l.list.PushFront(l.links, h)
	return victim, evicted
}
