package hints

// ageHeap is an indexed 4-ary min-heap of cache entries by age (stamp,
// seq): the entries of an age cache that did not arrive in age order.
// Each slot carries the entry's stamp, so comparisons touch no entry but on
// a tie of stamps, broken by the entries' seqs (the simulator's stamps never
// tie within one cache: a stamp is the time of one access, which references
// one block; a copy of the seq in the slot, or beside it by handle, cost a
// line more per push than it saved). A slot is
// 16 bytes and the slots start heapPad in, so that the four children of a
// node fill one 64-byte line of their own (the root's pad makes every
// group of siblings start at a multiple of four). The heap positions are
// kept by handle in pos, beside the slab (4 bytes a handle, not a field of
// the entries that a sift would have to visit). Sifts move a hole and
// write the moving node once. The heap is 4-ary: half the levels of a
// binary heap.
//
// INVARIANT: pos[h] == i for the heap's i-th slot a[heapPad+i] naming h;
// pos[h] == -1 for a handle not in the heap; a slot's stamp is its entry's;
// no slot is older than its parent.
type ageHeap struct {
	a    []hnode // a[:heapPad] unused; the heap is a[heapPad:]
	pos  []int32
	ents *[]entry // the cache's entries, by handle (their seqs break ties)
}

// hnode is a heap slot: an entry's handle and a copy of its stamp.
type hnode struct {
	stamp Time
	h     int32
	_     int32
}

const (
	heapArity = 4
	// heapPad is how many unused slots precede the root: the children of
	// heap index i, 4i+1..4i+4, lie at 4i+4..4i+7 in a.
	heapPad = 3
	// heapPrealloc bounds the slots made at once for a cache's capacity
	// (past it the slice grows as the heap does).
	heapPrealloc = 1 << 16
)

// init makes room for a heap of up to capacity slots (at most
// heapPrealloc now: a large slice starts on a page, so each group of
// siblings is on one line) over the entries *ents.
func (q *ageHeap) init(capacity int, ents *[]entry) {
	q.a = make([]hnode, heapPad, heapPad+min(capacity, heapPrealloc))
	q.ents = ents
}

// len returns the number of entries in the heap.
func (q *ageHeap) len() int { return len(q.a) - heapPad }

// top returns the oldest slot (the heap is not empty).
func (q *ageHeap) top() *hnode { return &q.a[heapPad] }

// node returns the heap's i-th slot (checks).
func (q *ageHeap) node(i int) *hnode { return &q.a[heapPad+i] }

// older reports whether slot n is older than slot m.
func (q *ageHeap) older(n, m *hnode) bool {
	return n.stamp < m.stamp || n.stamp == m.stamp && q.tieOlder(n.h, m.h)
}

// tieOlder breaks a tie of stamps: is handle h's seq smaller than g's?
// Out of line: the simulator never gets here.
//
//go:noinline
func (q *ageHeap) tieOlder(h, g int32) bool { return (*q.ents)[h].seq < (*q.ents)[g].seq }

// grow makes room for handle h (not in the heap).
func (q *ageHeap) grow(h int32) {
	for int(h) >= len(q.pos) {
		q.pos = append(q.pos, -1)
	}
}

func (q *ageHeap) has(h int32) bool { return q.pos[h] >= 0 }

// push adds handle h, whose entry's stamp is stamp.
func (q *ageHeap) push(stamp Time, h int32) {
	q.a = append(q.a, hnode{})
	q.up(len(q.a)-1-heapPad, hnode{stamp: stamp, h: h})
}

// remove takes h, which is in the heap, out of it.
func (q *ageHeap) remove(h int32) {
	i, last := int(q.pos[h]), q.len()-1
	q.pos[h] = -1
	x := q.a[heapPad+last]
	q.a = q.a[:heapPad+last]
	if i == last {
		return
	}
	if i > 0 && q.older(&x, &q.a[heapPad+(i-1)/heapArity]) {
		q.up(i, x)
	} else {
		q.down(i, x)
	}
}

// popTop takes the oldest slot's handle, which is h, out of the heap.
func (q *ageHeap) popTop(h int32) {
	last := q.len() - 1
	q.pos[h] = -1
	x := q.a[heapPad+last]
	q.a = q.a[:heapPad+last]
	if last > 0 {
		q.down(0, x)
	}
}

// up puts x in the hole at heap index i, moving older-than-x parents down.
func (q *ageHeap) up(i int, x hnode) {
	a, pos := q.a[heapPad:], q.pos // locals: the stores below do not reload them
	for i > 0 {
		p := (i - 1) / heapArity
		if !q.older(&x, &a[p]) {
			break
		}
		a[i] = a[p]
		pos[a[i].h] = int32(i)
		i = p
	}
	a[i] = x
	pos[x.h] = int32(i)
}

// down puts x in the hole at heap index i, moving its oldest children up.
func (q *ageHeap) down(i int, x hnode) {
	a, pos := q.a[heapPad:], q.pos
	n := len(a)
	for {
		l := heapArity*i + 1
		if l >= n {
			break
		}
		m := l
		var mp *hnode         // the oldest child, at heap index m
		if l+heapArity <= n { // all four children, on one line: unrolled
			ch := (*[heapArity]hnode)(a[l : l+heapArity])
			b, c := 0, 2
			if q.older(&ch[1], &ch[0]) {
				b = 1
			}
			if q.older(&ch[3], &ch[2]) {
				c = 3
			}
			if q.older(&ch[c&3], &ch[b&3]) {
				b = c
			}
			m, mp = l+b, &ch[b&3]
		} else {
			mp = &a[m]
			for j := l + 1; j < n; j++ {
				if p := &a[j]; q.older(p, mp) {
					m, mp = j, p
				}
			}
		}
		if !q.older(mp, &x) {
			break
		}
		a[i] = *mp
		pos[mp.h] = int32(i)
		i = m
	}
	a[i] = x
	pos[x.h] = int32(i)
}
