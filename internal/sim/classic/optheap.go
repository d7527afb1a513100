package classic

// optEntry is Optimal's state of a block in client memory: its number, its
// client, and its positions in the global heap (pos[0]) and its client's
// heap (pos[1]), whose slots hold its next use. 16 bytes: four a line.
type optEntry struct {
	id   uint32
	node int32
	pos  [2]int32
}

// optHeap is a binary max-heap of blocks by next use. Slots hold the next
// use and the block's entry (comparisons touch nothing else); the blocks'
// positions are kept in their entries, pos[which]. Sifting moves the
// slots it passes into a hole and writes the sifted slot once where it
// stops: the same comparisons, and the same layout, as swapping at each
// step, with half the writes.
type optHeap struct {
	a     []optSlot
	ent   *[]optEntry
	which int
}

type optSlot struct {
	next int32
	e    int32 // the block's entry
}

func (h *optHeap) len() int   { return len(h.a) }
func (h *optHeap) top() int32 { return h.a[0].e }

func (h *optHeap) push(e, next int32) {
	h.a = append(h.a, optSlot{})
	h.up(len(h.a)-1, optSlot{next, e})
}

func (h *optHeap) remove(e int32) {
	i := int((*h.ent)[e].pos[h.which])
	last := len(h.a) - 1
	s := h.a[last]
	h.a = h.a[:last]
	if i != last {
		h.sift(i, s)
	}
}

// fix restores the order after e's next use became next.
func (h *optHeap) fix(e, next int32) {
	h.sift(int((*h.ent)[e].pos[h.which]), optSlot{next, e})
}

// sift puts s at hole i, moved down or else up to its place.
func (h *optHeap) sift(i int, s optSlot) {
	if !h.down(i, s) {
		h.up(i, s)
	}
}

// up puts s at hole i or above it.
func (h *optHeap) up(i int, s optSlot) {
	a, ent, w := h.a, *h.ent, h.which
	for i > 0 {
		p := (i - 1) / 2
		if s.next <= a[p].next {
			break
		}
		a[i] = a[p]
		ent[a[i].e].pos[w] = int32(i)
		i = p
	}
	a[i] = s
	ent[s.e].pos[w] = int32(i)
}

// down puts s at hole i0's place below it and reports true if s belongs
// below i0; else it writes nothing.
func (h *optHeap) down(i0 int, s optSlot) bool {
	a, ent, w := h.a, *h.ent, h.which
	i, n := i0, len(a)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && a[r].next > a[l].next {
			j = r
		}
		if a[j].next <= s.next {
			break
		}
		a[i] = a[j]
		ent[a[i].e].pos[w] = int32(i)
		i = j
	}
	if i == i0 {
		return false
	}
	a[i] = s
	ent[s.e].pos[w] = int32(i)
	return true
}
