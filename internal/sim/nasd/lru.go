package nasd

import (
	"fmt"

	"github.com/coopfs/coopfs/internal/sim"
)

// lru is one member's cache: an exact LRU over blocks, a hash map into a
// slab of nodes on an intrusive doubly linked list. Each entry remembers
// whether the block is the member's own (it came from the member's own miss)
// or was received from a peer.
//
// INVARIANT: len(index) == nodes on the list <= capacity.
type lru struct {
	capacity int
	index    map[sim.Key]int32
	nodes    []lnode // nodes[0] is the sentinel; its next is the newest
	free     []int32
}

type lnode struct {
	key        sim.Key
	prev, next int32
	owned      bool
}

func newLRU(capacity int) *lru {
	return &lru{capacity: capacity, index: make(map[sim.Key]int32), nodes: make([]lnode, 1)}
}

func (l *lru) len() int { return len(l.index) }

func (l *lru) contains(k sim.Key) bool { _, ok := l.index[k]; return ok }

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

// touch makes k the newest block and reports whether it was cached.
func (l *lru) touch(k sim.Key) bool {
	i, ok := l.index[k]
	if ok {
		l.unlink(i)
		l.pushFront(i)
	}
	return ok
}

// insert caches k as the newest block (an already cached k is touched and
// becomes owned if owned is set). When the cache overflows it evicts and
// returns the oldest block. A zero-capacity cache caches nothing.
func (l *lru) insert(k sim.Key, owned bool) (victim sim.Key, victimOwned, evicted bool) {
	if l.capacity == 0 {
		return victim, false, false
	}
	if i, ok := l.index[k]; ok {
		l.nodes[i].owned = l.nodes[i].owned || owned
		l.unlink(i)
		l.pushFront(i)
		return victim, false, false
	}
	if len(l.index) >= l.capacity {
		old := l.nodes[0].prev
		victim, victimOwned, evicted = l.nodes[old].key, l.nodes[old].owned, true
		l.unlink(old)
		delete(l.index, victim)
		l.free = append(l.free, old)
	}
	var i int32
	if f := len(l.free); f > 0 {
		i = l.free[f-1]
		l.free = l.free[:f-1]
	} else {
		l.nodes = append(l.nodes, lnode{})
		i = int32(len(l.nodes) - 1)
	}
	l.nodes[i].key, l.nodes[i].owned = k, owned
	l.index[k] = i
	l.pushFront(i)
	return victim, victimOwned, evicted
}

// remove drops k and reports whether it was cached.
func (l *lru) remove(k sim.Key) bool {
	i, ok := l.index[k]
	if !ok {
		return false
	}
	l.unlink(i)
	delete(l.index, k)
	l.free = append(l.free, i)
	return true
}

// owned reports whether k is cached as the member's own block.
func (l *lru) owned(k sim.Key) bool {
	i, ok := l.index[k]
	return ok && l.nodes[i].owned
}

func (l *lru) check() error {
	if len(l.index) > l.capacity {
		return fmt.Errorf("holds %d blocks, capacity %d", len(l.index), l.capacity)
	}
	n := 0
	for i := l.nodes[0].next; i != 0; i = l.nodes[i].next {
		if n++; n > len(l.index) {
			return fmt.Errorf("list longer than index (%d)", len(l.index))
		}
		if j, ok := l.index[l.nodes[i].key]; !ok || j != i {
			return fmt.Errorf("node %d not indexed", i)
		}
	}
	if n != len(l.index) {
		return fmt.Errorf("list has %d nodes, index %d", n, len(l.index))
	}
	return nil
}
