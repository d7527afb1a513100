package dirsim

import (
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/sim"
)

// lru is one cache (a client's or the server's memory): an exact LRU over
// blocks, a map into a slab of nodes on an intrusive doubly linked list.
// Each block remembers the file version it belongs to and when its data
// arrived (a block whose data is still on its way is pending).
//
// INVARIANT: index.Len() == nodes on the list <= capacity.
type lru struct {
	capacity int
	index    sim.Table[sim.Key, int32] // open addressing: no tombstones under churn
	nodes    []lnode                   // nodes[0] is the sentinel; its next is the newest
	free     []int32
}

type lnode struct {
	id         block.ID
	ver        block.Version
	ready      time.Duration
	prev, next int32
}

func newLRU(capacity int) *lru {
	return &lru{capacity: capacity, nodes: make([]lnode, 1)}
}

func (l *lru) len() int { return l.index.Len() }

func key(id block.ID) sim.Key { return sim.Key{File: id.File, Block: id.Index} }

// get returns the block's node (nil if absent) without touching it.
func (l *lru) get(id block.ID) *lnode {
	if i, ok := l.index.Get(key(id)); ok {
		return &l.nodes[i]
	}
	return nil
}

// touch makes id the newest block; it must be cached.
func (l *lru) touch(id block.ID) {
	i, _ := l.index.Get(key(id))
	l.unlink(i)
	l.pushFront(i)
}

// remove drops id if cached.
func (l *lru) remove(id block.ID) {
	i, ok := l.index.Get(key(id))
	if !ok {
		return
	}
	l.unlink(i)
	l.index.Delete(key(id))
	l.free = append(l.free, i)
}

// insert caches id (version ver, data ready at ready) as the newest block,
// replacing a cached copy. It returns the evicted block, if any.
func (l *lru) insert(id block.ID, ver block.Version, ready time.Duration) (victim block.ID, evicted bool) {
	if l.capacity <= 0 {
		return block.ID{}, false
	}
	if i, ok := l.index.Get(key(id)); ok {
		n := &l.nodes[i]
		n.ver, n.ready = ver, ready
		l.unlink(i)
		l.pushFront(i)
		return block.ID{}, false
	}
	if l.index.Len() >= l.capacity {
		old := l.nodes[0].prev
		victim, evicted = l.nodes[old].id, true
		l.unlink(old)
		l.index.Delete(key(victim))
		l.free = append(l.free, old)
	}
	var i int32
	if n := len(l.free); n > 0 {
		i, l.free = l.free[n-1], l.free[:n-1]
	} else {
		l.nodes = append(l.nodes, lnode{})
		i = int32(len(l.nodes) - 1)
	}
	l.nodes[i] = lnode{id: id, ver: ver, ready: ready}
	l.index.Put(key(id), i)
	l.pushFront(i)
	return victim, evicted
}

func (l *lru) unlink(i int32) {
	n := &l.nodes[i]
	l.nodes[n.prev].next = n.next
	l.nodes[n.next].prev = n.prev
}

func (l *lru) pushFront(i int32) {
	n := &l.nodes[i]
	n.prev, n.next = 0, l.nodes[0].next
	l.nodes[n.next].prev = i
	l.nodes[0].next = i
}
