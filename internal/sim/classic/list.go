package classic

import "github.com/coopfs/coopfs/internal/lru"

// entry is one cached copy of a block in one client's cache, in the slab
// caches.es, named by its handle. Its links live beside the slab, one
// []lru.Link per list kind: its client's list (caches.lk), the global age
// list (caches.lg) and its block's holders (caches.lb).
type entry struct {
	age    int64  // tick of the last access (global age order)
	id     uint32 // the block (sim.IDs)
	node   int32  // client id
	recirc int32  // N-chance: times forwarded since last referenced
	global bool   // held on behalf of another client (forwarded, not referenced since)
	single bool   // GMS: the client knows the block is a singlet
}

// lruSet is an LRU set of blocks (the server's memory) on one lru.List
// whose handles are the block numbers themselves: a block is in the set at
// most once, so it needs no index and no slab.
type lruSet struct {
	cap   int
	lst   lru.List
	links []lru.Link
	in    []bool
}

func newLRUSet(capacity int) *lruSet { return &lruSet{cap: capacity} }

func (s *lruSet) has(id uint32) bool { return int(id) < len(s.in) && s.in[id] }

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
	if s.lst.Len() >= s.cap {
		old := s.lst.Back()
		s.lst.Remove(s.links, old)
		s.in[old] = false
	}
	if int(id) >= len(s.in) {
		s.in = append(s.in, make([]bool, int(id)+1-len(s.in))...)
		s.links = lru.Grow(s.links, int32(id))
	}
	s.in[id] = true
	s.lst.PushFront(s.links, int32(id))
}

func (s *lruSet) del(id uint32) {
	if s.has(id) {
		s.lst.Remove(s.links, int32(id))
		s.in[id] = false
	}
}
