package prefetch

import "unsafe"

// List is a list of addresses to prefetch together (Flush): a touch's
// stages whose values it does not use add to it, and one call prefetches
// them all. The zero value is an empty list.
type List struct {
	a [256]uintptr
	n int
}

// Add lists p (dropped when the list is full: a prefetch is a hint).
func (l *List) Add(p unsafe.Pointer) {
	if l.n < len(l.a) {
		l.a[l.n] = uintptr(p)
		l.n++
	}
}

// Flush prefetches the listed addresses and empties the list.
func (l *List) Flush() {
	Lines(l.a[:l.n])
	l.n = 0
}
