package dirsim

import (
	"math/bits"
	"time"
	"unsafe"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/lru"
)

// cache is one cache (a client's or the server's memory): an exact LRU
// over blocks named by their dense numbers (sim.IDs), a slab of at most
// capacity nodes on one lru.List. Each block remembers its file, the file
// version it belongs to and when its data arrived (a block whose data is
// still on its way is pending).
//
// A block is found through the simulation's blockIndex, the words they keep
// beside the directory's in its slot of the block, so that one line holds
// what an access looks up in the directory and the caches: the server keeps
// its handle there, and so does a lone client; the clients of a simulation
// with several keep there the block's row (see rows) when the rows' worst
// case is small enough: a load for the block's slot, which has no row when
// no client caches the block (a miss, most of what a client's lookup is
// when blocks move between clients), and one for the client's handle in
// the row, beside the other clients' (the holder a miss is forwarded to).
// Otherwise each client has its own lru.IDTable.
//
// INVARIANT: len() <= capacity; the list and the index (the slots, the
// rows or at) hold the same blocks; free holds the slab's other handles
// below len(nodes).
type cache struct {
	capacity int
	kind     indexKind
	ix       *blockIndex // kindServer, kindLone, kindRows
	rows     *rows       // kindRows: the clients' shared rows
	col      column      // kindRows: this cache's column in them
	word     uint8       // kindServer, kindLone: its word in the slot (uSrv, uCli)
	at       lru.IDTable // kindTable: block number → handle
	nodes    []lnode     // by handle; nodes[0] is unused: handle 0 is none
	links    []lru.Link
	list     lru.List // newest first
	free     []int32
	evicted  uint64 // blocks evicted (Touch's guide to how many it will evict)
}

// indexKind is how a cache finds its blocks.
type indexKind uint8

const (
	kindServer indexKind = iota // the slot's uSrv word
	kindLone                    // the slot's uCli word: the handle
	kindRows                    // the slot's uCli word: the row, then rows
	kindTable                   // its own lru.IDTable
)

// blockIndex is the per-block slot the caches of a simulation share, by
// block number: the User words of the directory's own slot of the block
// (directory.Slot), so that one load finds the block's entry in the
// directory and its handles in the caches.
type blockIndex struct {
	dir *directory.Directory
}

// bslot is one block's slot: User[uSrv] is the server's handle, User[uCli]
// the lone client's handle or the clients' row (0: none).
type bslot = directory.Slot

const (
	uSrv = 0
	uCli = 1
)

// of returns the slots by block number (valid until at grows them, or the
// directory does).
func (x *blockIndex) of() []bslot { return x.dir.Slots() }

// at returns id's slot, growing the index to hold it.
func (x *blockIndex) at(id uint32) *bslot { return x.dir.SlotOf(uint64(id)) }

// rows are the clients' handles of the blocks some client caches: a row
// for each such block, a column for each client (its handle, 0 if it does
// not cache the block) and the count of the row's nonzero handles, found
// through the block's slot in the blockIndex. A row is taken when a first
// client caches its block and given back when the last one drops it, so
// the rows follow the blocks cached, not all those numbered; at worst (no
// block cached twice) clients × capacity rows.
//
// A row is packed so that an access finds the requester's handle, the
// holder's and the count on one line: handles of 4, 8, 12 or 16 bits (as
// few as the caches' capacity needs; the rows are used only for caches of
// fewer than 1<<16 blocks), each read and written as the 16 bits from its
// byte (a 12-bit handle starts at a byte or half a byte in), then the
// count (one byte, two from 256 clients on). A row of 64 bytes or fewer
// takes a power of two, so that it never straddles a line: at 42 clients
// of 2 048 blocks, 42 12-bit handles and the count are one line (they
// were two, 86 bytes, as 16-bit handles).
//
// INVARIANT: a block's cli slot is nonzero exactly when some client caches
// it, and the count of that row counts them; free holds the other rows
// below len(h)/stride.
//
// The rows are read and written through unsafe pointers into h, without
// bounds checks: their accessors are on every access's path, and the
// checks of byte slices and of 16-bit fields at odd offsets were half
// their instructions. A row number comes only from a block's slot, which
// holds rows taken from h (the INVARIANT), and a column only from column.
type rows struct {
	stride int            // bytes a row
	width  uint8          // bits a handle
	mask   uint16         // 1<<width - 1
	cnt    int            // the count's offset in a row
	wide   bool           // the count is 16 bits (8 otherwise)
	h      []byte         // row r is h[r*stride : (r+1)*stride]; row 0 is unused
	base   unsafe.Pointer // &h[0]
	free   []int32
}

// column is where one client's handle is in a row: the 16 bits from byte
// off, shifted by sh.
type column struct {
	off int
	sh  uint8
}

// maxRowsBytes bounds the rows' worst case (the row's stride × clients ×
// capacity bytes) under which the clients share them instead of keeping
// an IDTable each.
const maxRowsBytes = 256 << 20

// newRows returns the rows for clients caches of capacity blocks, nil when
// their worst case is above maxRowsBytes or a handle needs more than 16
// bits.
func newRows(clients, capacity int) *rows {
	if capacity >= 1<<16 {
		return nil
	}
	r := &rows{width: 16}
	if w := bits.Len(uint(capacity)); w <= 12 {
		r.width = uint8(max(4, (w+3)/4*4))
	}
	r.mask = uint16(1<<r.width - 1)
	r.cnt = (clients*int(r.width) + 7) / 8
	n := r.cnt + 1
	if clients >= 256 {
		r.wide, n = true, n+1
	}
	if r.stride = n + n%2; n <= 64 {
		r.stride = 1 << bits.Len(uint(n-1))
	}
	if r.stride*clients*capacity > maxRowsBytes {
		return nil
	}
	// 64 rows at first: a page, aligned; the size classes it grows
	// through are multiples of 64 bytes, so the rows stay aligned
	r.h = make([]byte, r.stride, 64*r.stride)
	r.base = unsafe.Pointer(&r.h[0])
	return r
}

// column returns client c's column.
func (r *rows) column(c int) column {
	b := c * int(r.width)
	return column{off: b / 8, sh: uint8(b % 8)}
}

// field returns the 16 bits at byte off of row (a row in h).
func (r *rows) field(row int32, off int) *uint16 {
	return (*uint16)(unsafe.Add(r.base, int(row)*r.stride+off))
}

// get returns the handle in column c of row (not 0).
func (r *rows) get(row int32, c column) int32 {
	return int32(*r.field(row, c.off) >> c.sh & r.mask)
}

// count returns how many clients cache row's block.
func (r *rows) count(row int32) int {
	if p := r.field(row, r.cnt); r.wide {
		return int(*p)
	} else {
		return int(*(*uint8)(unsafe.Pointer(p)))
	}
}

// addCount adds d to row's count and returns the new count.
func (r *rows) addCount(row int32, d int) int {
	p := r.field(row, r.cnt)
	if r.wide {
		*p += uint16(d)
		return int(*p)
	}
	c := (*uint8)(unsafe.Pointer(p))
	*c += uint8(d)
	return int(*c)
}

// take returns a free row (zero); not inlined, so that put is.
//
//go:noinline
func (r *rows) take() int32 {
	if k := len(r.free); k > 0 {
		i := r.free[k-1]
		r.free = r.free[:k-1]
		return i
	}
	i := int32(len(r.h) / r.stride)
	r.h = append(r.h, make([]byte, r.stride)...)
	r.base = unsafe.Pointer(&r.h[0])
	return i
}

// put sets column c's handle of the block whose slot is b, which c does
// not cache, to h, and returns the block's row.
func (r *rows) put(b *bslot, c column, h int32) int32 {
	i := b.User[uCli]
	if i == 0 {
		i = r.take()
		b.User[uCli] = i
	}
	*r.field(i, c.off) |= uint16(h) << c.sh
	r.addCount(i, 1)
	return i
}

// del clears column c's handle in row, which c holds; it reports whether
// no client holds the row's block now (the caller gives the row back).
func (r *rows) del(row int32, c column) bool {
	*r.field(row, c.off) &^= r.mask << c.sh
	return r.addCount(row, -1) == 0
}

// giveBack frees the row of the block whose slot is b, which no client
// caches now; not inlined, so that unindex's callers stay small.
//
//go:noinline
func (r *rows) giveBack(b *bslot) {
	r.free = append(r.free, b.User[uCli])
	b.User[uCli] = 0
}

type lnode struct {
	ver   block.Version
	ready time.Duration
	file  uint64
	id    uint32 // block number
	// row is the block's row (kindRows), so that an eviction goes from the
	// node to the row without the block's slot between them (the slot
	// only when the row empties). INVARIANT: it is the slot's cli word.
	row int32
}

// newLRU returns an empty cache of this kind (kindRows: in column col of
// rs; kindTable: neither ix nor rs).
func newLRU(capacity int, kind indexKind, ix *blockIndex, rs *rows, col int) *cache {
	l := &cache{capacity: capacity, kind: kind, nodes: make([]lnode, 1), links: make([]lru.Link, 1)}
	if kind != kindTable {
		l.ix = ix
	}
	if kind == kindRows {
		l.rows, l.col = rs, rs.column(col)
	}
	if kind == kindLone {
		l.word = uCli
	}
	return l
}

func (l *cache) len() int { return l.list.Len() }

// find returns block id's handle, 0 if absent.
func (l *cache) find(id uint32) int32 {
	if l.kind <= kindLone { // kindServer, kindLone
		return l.inSlot(id)
	}
	return l.findShared(id)
}

// inSlot is find for the server and a lone client, whose handles are in
// the block's slot: small enough to be inlined where the cache is known to
// be one of those.
func (l *cache) inSlot(id uint32) int32 {
	if ix := l.ix.dir.Slots(); int(id) < len(ix) {
		return ix[id].User[l.word]
	}
	return 0
}

// findShared is find for the clients of a simulation with several (their
// rows, or their own tables); not inlined, so that find is.
//
//go:noinline
func (l *cache) findShared(id uint32) int32 {
	if l.kind == kindTable {
		return l.at.Get(id)
	}
	ix := l.ix.of()
	if int(id) >= len(ix) {
		return 0
	}
	b := &ix[id]
	if b.User[uCli] == 0 {
		return 0
	}
	return l.rows.get(b.User[uCli], l.col)
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
	l.unindex(l.nodes[h].id, l.nodes[h].row)
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
// the newest block, replacing a cached copy. It returns the evicted block
// (id 0: none).
func (l *cache) insert(id uint32, file uint64, ver block.Version, ready time.Duration) ref {
	if h := l.find(id); h != 0 {
		n := &l.nodes[h] // its id and row stay
		n.ver, n.ready, n.file = ver, ready, file
		l.touch(h)
		return ref{}
	}
	return l.insertNew(id, file, ver, ready)
}

// insertNew is insert for a block the cache does not hold. A full cache
// gives the oldest block's node to the new block and moves it to the
// front.
func (l *cache) insertNew(id uint32, file uint64, ver block.Version, ready time.Duration) (victim ref) {
	if l.capacity <= 0 {
		return ref{}
	}
	if l.len() < l.capacity {
		l.list.PushFront(l.links, l.slot(lnode{ver: ver, ready: ready, file: file, id: id}))
		return ref{}
	}
	h := l.list.BackToFront(l.links)
	l.evicted++
	n := &l.nodes[h]
	victim, row := ref{n.id, n.file}, n.row
	*n = lnode{ver: ver, ready: ready, file: file, id: id}
	l.reindex(victim.id, row, id, h)
	return victim
}

// reindex moves handle h from block old (whose row was row), which it
// held, to block id, which is not cached: for the server and a lone client
// two stores in the slots, no switch.
func (l *cache) reindex(old uint32, row int32, id uint32, h int32) {
	if l.kind <= kindLone { // kindServer, kindLone
		ix := l.ix.of()
		ix[old].User[l.word] = 0
		if int(id) < len(ix) {
			ix[id].User[l.word] = h
			return
		}
	}
	l.unindex(old, row)
	l.index(id, h)
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
	l.index(n.id, h)
	return h
}

// index finds block id, which is not cached, at handle h.
func (l *cache) index(id uint32, h int32) {
	switch l.kind {
	case kindServer, kindLone:
		l.ix.at(id).User[l.word] = h
	case kindRows:
		l.nodes[h].row = l.rows.put(l.ix.at(id), l.col, h)
	default:
		l.at.Put(id, h)
	}
}

// unindex forgets block id (its row: row), which is cached.
func (l *cache) unindex(id uint32, row int32) {
	switch l.kind {
	case kindServer, kindLone:
		l.ix.of()[id].User[l.word] = 0
	case kindRows:
		if l.rows.del(row, l.col) {
			l.rows.giveBack(&l.ix.of()[id])
		}
	default:
		l.at.Delete(id)
	}
}
