package hints

// ageHeap is an indexed 4-ary min-heap of cache entries by age (stamp,
// seq): the entries of an age cache that did not arrive in age order.
// Each slot carries the entry's age, so comparisons touch no entry, and
// the heap positions are kept by handle in pos, beside the slab (4 bytes
// a handle, not a field of the entries that a sift would have to visit).
// Sifts move a hole and write the moving node once. The heap is 4-ary:
// half the levels of a binary heap, and a node's children share a cache
// line or two.
//
// INVARIANT: pos[a[i].h] == i for every slot; pos[h] == -1 for a handle
// not in the heap; no slot is older than its parent.
type ageHeap struct {
	a   []hnode
	pos []int32
}

// hnode is a heap slot: an entry's handle and a copy of its age.
type hnode struct {
	stamp Time
	seq   uint64
	h     int32
}

const heapArity = 4

func (n *hnode) older(m *hnode) bool { return older(n.stamp, n.seq, m.stamp, m.seq) }

// grow makes room for handle h (not in the heap).
func (q *ageHeap) grow(h int32) {
	for int(h) >= len(q.pos) {
		q.pos = append(q.pos, -1)
	}
}

func (q *ageHeap) has(h int32) bool { return q.pos[h] >= 0 }

func (q *ageHeap) push(x hnode) {
	q.a = append(q.a, hnode{})
	q.up(len(q.a)-1, x)
}

// remove takes h, which is in the heap, out of it.
func (q *ageHeap) remove(h int32) {
	i, last := int(q.pos[h]), len(q.a)-1
	q.pos[h] = -1
	x := q.a[last]
	q.a = q.a[:last]
	if i == last {
		return
	}
	if i > 0 && x.older(&q.a[(i-1)/heapArity]) {
		q.up(i, x)
	} else {
		q.down(i, x)
	}
}

// up puts x in the hole at i, moving older-than-x parents down.
func (q *ageHeap) up(i int, x hnode) {
	for i > 0 {
		p := (i - 1) / heapArity
		if !x.older(&q.a[p]) {
			break
		}
		q.put(i, q.a[p])
		i = p
	}
	q.put(i, x)
}

// down puts x in the hole at i, moving its oldest children up.
func (q *ageHeap) down(i int, x hnode) {
	n := len(q.a)
	for {
		l := heapArity*i + 1
		if l >= n {
			break
		}
		m := l
		if l+heapArity <= n { // all four children: unrolled
			ch := q.a[l : l+heapArity : l+heapArity]
			b, c := 0, 2
			if ch[1].older(&ch[0]) {
				b = 1
			}
			if ch[3].older(&ch[2]) {
				c = 3
			}
			if ch[c].older(&ch[b]) {
				b = c
			}
			m = l + b
		} else {
			for j := l + 1; j < n; j++ {
				if q.a[j].older(&q.a[m]) {
					m = j
				}
			}
		}
		if !q.a[m].older(&x) {
			break
		}
		q.put(i, q.a[m])
		i = m
	}
	q.put(i, x)
}

// put places x at i and records its position.
func (q *ageHeap) put(i int, x hnode) {
	q.a[i] = x
	q.pos[x.h] = int32(i)
}
