package dirsim

import (
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// cache is one cache (a client's or the server's memory): an exact LRU
// over blocks named by their dense numbers (sim.IDs), a slab of at most
// capacity nodes on one lru.List. Each block remembers its file, the file
// version it belongs to and when its data arrived (a block whose data is
// still on its way is pending).
//
// A block is found in one of three ways. A direct cache (the server's, a
// lone client's) keeps a handle for every block number (4 bytes a block
// numbered): one load. The clients' caches of a simulation share rows
// (see rows) when their worst case is small enough: a load for the
// block's row, which a block no client caches does not have (a miss, most
// of what a client's lookup is when blocks move between clients), and one
// for the client's handle in it, beside the other clients' (the holder a
// miss is forwarded to). Otherwise each client's lru.IDTable.
//
// INVARIANT: len() <= capacity; the list and the index (one, the rows or
// at) hold the same blocks; free holds the slab's other handles below
// len(nodes).
type cache struct {
	capacity int
	direct   bool
	one      []int32     // direct: block number → handle, 0 if absent
	rows     *rows       // not direct: the clients' shared rows (nil: at)
	col      int         // this cache's column in them
	at       lru.IDTable // neither: block number → handle
	nodes    []lnode     // by handle; nodes[0] is unused: handle 0 is none
	links    []lru.Link
	list     lru.List // newest first
	free     []int32
}

// rows are the clients' handles of the blocks some client caches: a row
// for each such block, a column for each client (its handle, 0 if it does
// not cache the block), found through the block's number. A row is taken
// when a first client caches its block and given back when the last one
// drops it, so the rows follow the blocks cached, not all those numbered;
// at worst (no block cached twice) clients × capacity rows of clients
// handles each.
//
// INVARIANT: of[id] is nonzero exactly when some client caches block id,
// and n of that row counts them; free holds the other rows below len(n).
type rows struct {
	clients int
	of      []int32 // block number → row, 0 if none
	h       []int32 // row r is h[r*clients : (r+1)*clients]; row 0 is unused
	n       []int32 // by row: its nonzero handles
	free    []int32
}

// maxRowsBytes bounds the rows' worst case (4 × clients² × capacity bytes)
// under which the clients share them instead of keeping an IDTable each.
const maxRowsBytes = 256 << 20

// newRows returns the rows for clients caches of capacity blocks, nil when
// their worst case is above maxRowsBytes.
func newRows(clients, capacity int) *rows {
	if 4*clients*clients*capacity > maxRowsBytes {
		return nil
	}
	return &rows{clients: clients, h: make([]int32, clients), n: make([]int32, 1)}
}

// get returns column c's handle of block id, 0 if none.
func (r *rows) get(id uint32, c int) int32 {
	if int(id) >= len(r.of) {
		return 0
	}
	if i := r.of[id]; i != 0 {
		return r.h[int(i)*r.clients+c]
	}
	return 0
}

// put sets column c's handle of block id, which it does not cache, to h.
func (r *rows) put(id uint32, c int, h int32) {
	if int(id) >= len(r.of) {
		r.of = lru.Extend(r.of, int(id)+1, 1<<62)
	}
	i := r.of[id]
	if i == 0 {
		if k := len(r.free); k > 0 {
			i, r.free = r.free[k-1], r.free[:k-1]
		} else {
			i = int32(len(r.n))
			r.n = append(r.n, 0)
			r.h = append(r.h, make([]int32, r.clients)...)
		}
		r.of[id] = i
	}
	r.h[int(i)*r.clients+c] = h
	r.n[i]++
}

// del clears column c's handle of block id, which it caches.
func (r *rows) del(id uint32, c int) {
	i := r.of[id]
	r.h[int(i)*r.clients+c] = 0
	if r.n[i]--; r.n[i] == 0 {
		r.of[id] = 0
		r.free = append(r.free, i)
	}
}

type lnode struct {
	ver   block.Version
	ready time.Duration
	file  uint64
	id    uint32 // block number
}

// newLRU returns an empty cache: direct, or in column col of rs (rs nil:
// neither).
func newLRU(capacity int, direct bool, rs *rows, col int) *cache {
	l := &cache{capacity: capacity, direct: direct, nodes: make([]lnode, 1), links: make([]lru.Link, 1)}
	if !direct {
		l.rows, l.col = rs, col
	}
	return l
}

func (l *cache) len() int { return l.list.Len() }

// find returns block id's handle, 0 if absent.
func (l *cache) find(id uint32) int32 {
	switch {
	case l.direct:
		if int(id) < len(l.one) {
			return l.one[id]
		}
		return 0
	case l.rows != nil:
		return l.rows.get(id, l.col)
	}
	return l.at.Get(id)
}

// get returns block id's node (nil if absent) without touching it; the
// pointer is valid until the next insert.
func (l *cache) get(id uint32) *lnode {
	if h := l.find(id); h != 0 {
		return &l.nodes[h]
	}
	return nil
}

// touch makes handle h the newest block.
func (l *cache) touch(h int32) { l.list.MoveToFront(l.links, h) }

// remove drops handle h.
func (l *cache) remove(h int32) {
	l.list.Remove(l.links, h)
	id := l.nodes[h].id
	switch {
	case l.direct:
		l.one[id] = 0
	case l.rows != nil:
		l.rows.del(id, l.col)
	default:
		l.at.Delete(id)
	}
	l.free = append(l.free, h)
}

// relabel moves the cached blocks of file at version from to version to
// (O(cache size); recency unchanged).
func (l *cache) relabel(file uint64, from, to block.Version) {
	for h := l.list.Front(); h != 0; h = l.links[h].Next {
		if n := &l.nodes[h]; n.file == file && n.ver == from {
			n.ver = to
		}
	}
}

// insert caches block id of file (version ver, data ready at ready) as
// the newest block, replacing a cached copy. It returns the evicted block,
// if any.
func (l *cache) insert(id uint32, file uint64, ver block.Version, ready time.Duration) (victim lnode, evicted bool) {
	if l.capacity <= 0 {
		return lnode{}, false
	}
	n := lnode{ver, ready, file, id}
	if h := l.find(id); h != 0 {
		l.nodes[h] = n
		l.touch(h)
		return lnode{}, false
	}
	if l.len() >= l.capacity {
		h := l.list.Back()
		victim, evicted = l.nodes[h], true
		l.remove(h)
	}
	l.list.PushFront(l.links, l.slot(n))
	return victim, evicted
}

// slot stores n, which is not cached, and returns its handle.
func (l *cache) slot(n lnode) int32 {
	var h int32
	if k := len(l.free); k > 0 {
		h, l.free = l.free[k-1], l.free[:k-1]
	} else {
		h = int32(len(l.nodes))
		l.nodes = append(l.nodes, lnode{})
		l.links = append(l.links, lru.Link{})
	}
	l.nodes[h] = n
	switch {
	case l.direct:
		if int(n.id) >= len(l.one) { // no store (and write barrier) when it fits
			l.one = lru.Extend(l.one, int(n.id)+1, 1<<62)
		}
		l.one[n.id] = h
	case l.rows != nil:
		l.rows.put(n.id, l.col, h)
	default:
		l.at.Put(n.id, h)
	}
	return h
}
