package lru

// Link is a node's place on one list: the handles of its neighbours (0 at
// either end).
type Link struct{ Prev, Next int32 }

// List is a doubly linked list of handles whose links live in a []Link the
// caller passes to every call (the same slice for every list of one kind).
// Front is the most recent end by convention. The zero value is an empty
// list; a List is a small value that may be kept in a table or a slice.
type List struct {
	head, tail int32
	n          int32
}

// Len returns the number of nodes.
func (l *List) Len() int { return int(l.n) }

// Front returns the first handle, 0 if empty.
func (l *List) Front() int32 { return l.head }

// Back returns the last handle, 0 if empty.
func (l *List) Back() int32 { return l.tail }

// Next returns the handle after h (toward the back), 0 at the end.
func Next(ls []Link, h int32) int32 { return ls[h].Next }

// Prev returns the handle before h (toward the front), 0 at the start.
func Prev(ls []Link, h int32) int32 { return ls[h].Prev }

// PushFront puts h, which is on no list of this kind, first.
func (l *List) PushFront(ls []Link, h int32) {
	ls[h] = Link{0, l.head}
	if l.head != 0 {
		ls[l.head].Prev = h
	} else {
		l.tail = h
	}
	l.head = h
	l.n++
}

// PushBack puts h, which is on no list of this kind, last.
func (l *List) PushBack(ls []Link, h int32) {
	ls[h] = Link{l.tail, 0}
	if l.tail != 0 {
		ls[l.tail].Next = h
	} else {
		l.head = h
	}
	l.tail = h
	l.n++
}

// Remove takes h, which is on l, off it.
func (l *List) Remove(ls []Link, h int32) {
	k := ls[h]
	if k.Prev != 0 {
		ls[k.Prev].Next = k.Next
	} else {
		l.head = k.Next
	}
	if k.Next != 0 {
		ls[k.Next].Prev = k.Prev
	} else {
		l.tail = k.Prev
	}
	ls[h] = Link{}
	l.n--
}

// MoveToFront makes h, which is on l, first.
func (l *List) MoveToFront(ls []Link, h int32) {
	if l.head == h {
		return
	}
	l.Remove(ls, h)
	l.PushFront(ls, h)
}

// BackToFront makes the last node first and returns it (0 if l is empty):
// a full LRU's eviction and insertion in one, for a slab that gives the
// evicted node to the new entry.
func (l *List) BackToFront(ls []Link) int32 {
	h := l.tail
	if h == l.head {
		return h
	}
	p := ls[h].Prev
	ls[p].Next = 0
	l.tail = p
	ls[h] = Link{0, l.head}
	ls[l.head].Prev = h
	l.head = h
	return h
}

// Grow returns ls long enough to hold handle h (for links kept beside a
// slab that grew).
func Grow(ls []Link, h int32) []Link {
	if int(h) >= len(ls) {
		ls = append(ls, make([]Link, int(h)+1-len(ls))...)
	}
	return ls
}
