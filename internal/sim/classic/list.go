package classic

import "github.com/coopfs/coopfs/internal/lru"

// entry is one cached copy of a block in one client's cache, in the slab
// caches.es, named by its handle. Its client-list links are in the entry
// itself, so that what an access reads and writes of one copy is one cache
// line: 32 bytes, two to a line, and a slab of more than 32 KiB starts on
// a page. (So the client is a uint16 and N-chance's count a uint8:
// newCaches and NewNChance check the limits.) The global age list's links
// are not here but in caches.gln, beside caches.gnode: GMS walks that list
// by the thousand, and dense links make the walk a run of cache hits.
type entry struct {
	age    int64  // tick of the last access (global age order)
	id     uint32 // the block (sim.IDs)
	node   uint16 // client id
	recirc uint8  // N-chance: times forwarded since last referenced
	global bool   // held on behalf of another client (forwarded, not referenced since)
	ln     lru.Link
	_      [8]byte
}

// elist is a doubly linked list of entry handles through the entries'
// client-list links (the caller passes the slab to every call). Front is
// the most recent end. The zero value is an empty list.
type elist struct{ head, tail, n int32 }

// Len returns the number of entries.
func (l *elist) Len() int { return int(l.n) }

// Front returns the first handle, 0 if empty.
func (l *elist) Front() int32 { return l.head }

// Back returns the last handle, 0 if empty.
func (l *elist) Back() int32 { return l.tail }

// pushFront puts h, which is on no list, first.
func (l *elist) pushFront(es []entry, h int32) {
	es[h].ln = lru.Link{Next: l.head}
	if l.head != 0 {
		es[l.head].ln.Prev = h
	} else {
		l.tail = h
	}
	l.head = h
	l.n++
}

// remove takes h, which is on l, off it. Removing a client's victim (the
// tail) writes the new tail's Next although nothing reads a tail's Next on
// the way: that store brings the client's next victim into the processor's
// cache well before victim reads it (leaving it out measured slower:
// docs/sim.md, sixth round).
func (l *elist) remove(es []entry, h int32) {
	x := es[h].ln
	if x.Prev != 0 {
		es[x.Prev].ln.Next = x.Next
	} else {
		l.head = x.Next
	}
	if x.Next != 0 {
		es[x.Next].ln.Prev = x.Prev
	} else {
		l.tail = x.Prev
	}
	es[h].ln = lru.Link{}
	l.n--
}

// moveToFront makes h, which is on l, first.
func (l *elist) moveToFront(es []entry, h int32) {
	if l.head == h {
		return
	}
	l.remove(es, h)
	l.pushFront(es, h)
}

// lruSet is an LRU set of blocks (the server's memory) on one lru.List
// whose handles are the block numbers themselves: a block is in the set at
// most once, so it needs no index and no slab. Whether a block is in the
// set is a bit of a bitset (one bit a block: it stays in a processor cache
// where the links, eight bytes a block, do not), so that a miss, the common
// answer, loads no links.
type lruSet struct {
	cap   int
	lst   lru.List
	links []lru.Link
	in    []uint64 // bit id%64 of in[id/64]: id is in the set
}

func newLRUSet(capacity int) *lruSet { return &lruSet{cap: capacity} }

func (s *lruSet) has(id uint32) bool {
	w := id / 64
	return int(w) < len(s.in) && s.in[w]&(1<<(id%64)) != 0
}

// get reports whether id is cached, making it most recent.
func (s *lruSet) get(id uint32) bool {
	if !s.has(id) {
		return false
	}
	s.lst.MoveToFront(s.links, int32(id))
	return true
}

// put caches id as most recent, evicting the least recent if full.
func (s *lruSet) put(id uint32) {
	if s.cap == 0 {
		return
	}
	if s.has(id) {
		s.lst.MoveToFront(s.links, int32(id))
		return
	}
	s.add(id)
}

// add caches id, which is not cached, as most recent, evicting the least
// recent if full (a miss that get just reported: no second look).
func (s *lruSet) add(id uint32) {
	if s.cap == 0 {
		return
	}
	if s.lst.Len() >= s.cap {
		old := uint32(s.lst.Back())
		s.lst.Remove(s.links, int32(old))
		s.in[old/64] &^= 1 << (old % 64)
	}
	if int(id) >= len(s.links) {
		s.grow(id)
	}
	s.in[id/64] |= 1 << (id % 64)
	s.lst.PushFront(s.links, int32(id))
}

// grow is add's slow path: the links and the bits reach block id (the bits
// always cover the links). The links take all the room append gave them
// (zeroed: no block is on the list there), so that the next new blocks,
// numbered in order of first sight, do not come back here one by one. Not
// inlined, so that add stays small.
//
//go:noinline
func (s *lruSet) grow(id uint32) {
	s.links = lru.Grow(s.links, int32(id))
	s.links = s.links[:cap(s.links)]
	if w := len(s.links)/64 + 1; w > len(s.in) {
		s.in = append(s.in, make([]uint64, w-len(s.in))...)
	}
}

func (s *lruSet) del(id uint32) {
	if s.has(id) {
		s.lst.Remove(s.links, int32(id))
		s.in[id/64] &^= 1 << (id % 64)
	}
}
