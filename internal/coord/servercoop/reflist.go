package servercoop

import "fmt"

// refList is a bounded LRU map from block to the peer it was forwarded to:
// a hash map into a slab of nodes on an intrusive doubly linked list.
//
// INVARIANT: len(index) == number of nodes on the list <= capacity.
type refList[K comparable] struct {
	capacity int
	index    map[K]int32
	nodes    []refNode[K] // nodes[0] is the sentinel
	free     []int32
}

type refNode[K comparable] struct {
	key        K
	peer       int32
	prev, next int32
}

func newRefList[K comparable](capacity int) refList[K] {
	r := refList[K]{capacity: capacity, index: make(map[K]int32)}
	r.nodes = append(r.nodes, refNode[K]{}) // sentinel: next is the newest
	return r
}

func (r *refList[K]) len() int { return len(r.index) }

func (r *refList[K]) unlink(i int32) {
	n := &r.nodes[i]
	r.nodes[n.prev].next = n.next
	r.nodes[n.next].prev = n.prev
}

func (r *refList[K]) pushFront(i int32) {
	n := &r.nodes[i]
	n.prev, n.next = 0, r.nodes[0].next
	r.nodes[n.next].prev = i
	r.nodes[0].next = i
}

// get returns the peer k was forwarded to and makes the reference the newest.
func (r *refList[K]) get(k K) (int, bool) {
	i, ok := r.index[k]
	if !ok {
		return 0, false
	}
	r.unlink(i)
	r.pushFront(i)
	return int(r.nodes[i].peer), true
}

// put records that k went to peer; it reports whether the oldest reference
// had to be forgotten to make room.
func (r *refList[K]) put(k K, peer int) (forgot bool) {
	if r.capacity == 0 {
		return false
	}
	if i, ok := r.index[k]; ok {
		r.nodes[i].peer = int32(peer)
		r.unlink(i)
		r.pushFront(i)
		return false
	}
	if len(r.index) >= r.capacity {
		old := r.nodes[0].prev
		r.unlink(old)
		delete(r.index, r.nodes[old].key)
		r.free = append(r.free, old)
		forgot = true
	}
	var i int32
	if f := len(r.free); f > 0 {
		i = r.free[f-1]
		r.free = r.free[:f-1]
	} else {
		r.nodes = append(r.nodes, refNode[K]{})
		i = int32(len(r.nodes) - 1)
	}
	r.nodes[i].key, r.nodes[i].peer = k, int32(peer)
	r.index[k] = i
	r.pushFront(i)
	return forgot
}

func (r *refList[K]) remove(k K) {
	i, ok := r.index[k]
	if !ok {
		return
	}
	r.unlink(i)
	delete(r.index, k)
	var zero K
	r.nodes[i].key = zero
	r.free = append(r.free, i)
}

func (r *refList[K]) check(self int) error {
	n := 0
	for i := r.nodes[0].next; i != 0; i = r.nodes[i].next {
		n++
		if n > len(r.index) {
			return fmt.Errorf("reference list is longer than its index (%d)", len(r.index))
		}
		if int(r.nodes[i].peer) == self {
			return fmt.Errorf("reference to itself")
		}
		if j, ok := r.index[r.nodes[i].key]; !ok || j != i {
			return fmt.Errorf("reference list node %d not indexed", i)
		}
	}
	if n != len(r.index) {
		return fmt.Errorf("reference list has %d nodes, index %d", n, len(r.index))
	}
	return nil
}
