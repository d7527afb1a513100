package classic

import "github.com/coopfs/coopfs/internal/sim"

// Link sets of an entry: one per intrusive list it can be on.
const (
	lLocal  = iota // its client's LRU list (or the server cache's)
	lGlobal        // the global age list of all client entries
	lBlock         // the holders of the same block
	nLinks
)

type link struct{ prev, next *entry }

// entry is one cached copy of a block in one cache.
type entry struct {
	l      [nLinks]link
	key    sim.Key
	hl     *list // the holders of its block (client entries)
	node   int   // client id, or sim.NodeServer
	age    int64 // tick of the last access (global age order)
	recirc int   // N-chance: times forwarded since last referenced
	global bool  // held on behalf of another client (forwarded, not referenced since)
	single bool  // GMS: the client knows the block is a singlet
}

// list is an intrusive doubly linked list over one link set of entries;
// front is most recent. The zero value is not usable: call init.
type list struct {
	root entry
	w    int
	n    int
}

func (l *list) init(w int) {
	l.w = w
	l.root.l[w] = link{&l.root, &l.root}
}

func (l *list) len() int { return l.n }

func (l *list) front() *entry {
	if l.n == 0 {
		return nil
	}
	return l.root.l[l.w].next
}

func (l *list) back() *entry {
	if l.n == 0 {
		return nil
	}
	return l.root.l[l.w].prev
}

func (l *list) insertAfter(e, at *entry) {
	w := l.w
	e.l[w].prev = at
	e.l[w].next = at.l[w].next
	at.l[w].next.l[w].prev = e
	at.l[w].next = e
	l.n++
}

func (l *list) pushFront(e *entry) { l.insertAfter(e, &l.root) }
func (l *list) pushBack(e *entry)  { l.insertAfter(e, l.root.l[l.w].prev) }

func (l *list) remove(e *entry) {
	w := l.w
	e.l[w].prev.l[w].next = e.l[w].next
	e.l[w].next.l[w].prev = e.l[w].prev
	e.l[w] = link{}
	l.n--
}

func (l *list) moveToFront(e *entry) {
	if l.root.l[l.w].next == e {
		return
	}
	l.remove(e)
	l.pushFront(e)
}

// next returns the entry after e (toward the back), nil at the end.
func (l *list) next(e *entry) *entry {
	if n := e.l[l.w].next; n != &l.root {
		return n
	}
	return nil
}

// prev returns the entry before e (toward the front), nil at the start.
func (l *list) prev(e *entry) *entry {
	if p := e.l[l.w].prev; p != &l.root {
		return p
	}
	return nil
}

// lruSet is an LRU cache of block keys (the server's memory).
type lruSet struct {
	cap  int
	m    sim.Table[sim.Key, *entry]
	lst  list
	pool *[]*entry
}

func newLRUSet(capacity int, pool *[]*entry) *lruSet {
	s := &lruSet{cap: capacity, pool: pool}
	s.lst.init(lLocal)
	return s
}

// get reports whether k is cached, making it most recent.
func (s *lruSet) get(k sim.Key) bool {
	e, ok := s.m.Get(k)
	if ok {
		s.lst.moveToFront(e)
	}
	return ok
}

// put caches k as most recent, evicting the least recent if full.
func (s *lruSet) put(k sim.Key) {
	if s.cap == 0 {
		return
	}
	if e, ok := s.m.Get(k); ok {
		s.lst.moveToFront(e)
		return
	}
	if s.lst.len() >= s.cap {
		old := s.lst.back()
		s.lst.remove(old)
		s.m.Delete(old.key)
		*s.pool = append(*s.pool, old)
	}
	e := newEntry(s.pool)
	e.key, e.node = k, sim.NodeServer
	s.m.Put(k, e)
	s.lst.pushFront(e)
}

func (s *lruSet) del(k sim.Key) {
	if e, ok := s.m.Delete(k); ok {
		s.lst.remove(e)
		*s.pool = append(*s.pool, e)
	}
}

func newEntry(pool *[]*entry) *entry {
	if n := len(*pool); n > 0 {
		e := (*pool)[n-1]
		*pool = (*pool)[:n-1]
		*e = entry{}
		return e
	}
	return &entry{}
}
