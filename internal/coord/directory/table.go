package directory

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// bkey is a block.ID hashable by lru.Table.
type bkey block.ID

func (k bkey) Hash() uint64 { return lru.Mix(k.File*0x9e3779b97f4a7c15 ^ k.Index) }

// fkey is a file id hashable by lru.Table.
type fkey uint64

func (k fkey) Hash() uint64 { return lru.Mix(uint64(k)) }

// entry is one directory entry: the clients caching one block of one file
// version. Entries live in the table's slab and are named by handle (int32,
// 0 is none); they hold no pointer, so the collector never scans them.
//
// INVARIANT: an entry in the table has at least one holder, never Server
// or a failed client; the holders below 64 are the bits of mask (bit c for
// client c), those from 64 on are the table's more[e.more], sorted, no
// duplicates (e.more is 0 when there are none).
type entry struct {
	id   block.ID
	ver  block.Version
	mask uint64
	more int32
	// last is the rotation pointer: the node that served the latest
	// request for the block (NoClient before the first forward).
	last ClientID
	// used is when the entry was last used (the table's clock, from 1; 0
	// in a free slot): its place in LRU order while the list is not kept.
	used uint64
}

// maskClients bounds the client ids kept in an entry's mask.
const maskClients = 64

// table is the bounded table of entries with an LRU list and, once a file
// has changed, a list per file (so that a file change drops the file's
// entries in time proportional to their number), over a slab of entries
// and lru.Lists of handles.
//
// Blocks are found through a hash table (lru.Table: open addressing, no
// tombstones under the table's constant insert/delete churn), or, when the
// caller numbers them densely (Config.Dense), through a slice of handles
// indexed by the block's number (4 bytes for every number up to the
// largest seen). Either way the slab holds at most max entries.
//
// The LRU list is kept only from the first time it is needed on (the table
// full, or a walk of every entry), built then from the entries' use times:
// until then a use is one store in the entry, and a table that never fills
// (the simulator's, whose clients report their discards) never pays for
// the list's links. The file lists are kept from the first dropFile on
// (built then from the entries): a workload that never changes a file
// never pays for them.
//
// INVARIANT: the index (or slot), the live slab entries (used != 0) and,
// when listed, the LRU list and, when byFile, the file lists hold exactly
// the live entries; free holds the slab's other handles, whose entries
// are zero; the LRU order is that of the entries' use times (while
// listed, the list's).
type table struct {
	max    int
	dense  bool
	ents   []entry    // the slab; ents[0] is unused (handle 0 is none)
	clock  uint64     // the latest use time given
	listed bool       // the LRU list is kept
	lruLk  []lru.Link // listed: links on the LRU list, by handle
	lru    lru.List   // listed: newest first
	n      int        // live entries
	free   []int32
	index  lru.Table[bkey, int32]    // block → handle (not dense)
	slot   []Slot                    // dense: block number → handle (and the caller's words)
	mem    lru.Table[bkey, struct{}] // not dense: the server's memory (memHas)
	byFile bool                      // the file lists are kept
	files  lru.Table[fkey, lru.List]
	fileLk []lru.Link // links on the file lists, by handle

	fetched  uint64       // what fetch loaded
	more     [][]ClientID // holders from 64 on, by entry.more; more[0] is unused
	moreFree []int32
}

func newTable(max int, dense bool) *table {
	return &table{max: max, dense: dense, ents: make([]entry, 1), more: make([][]ClientID, 1)}
}

func (t *table) len() int { return t.n }

// get returns id's handle, 0 if none.
func (t *table) get(id block.ID) int32 {
	if id.Index < uint64(len(t.slot)) { // dense (t.slot is empty otherwise)
		return t.slot[id.Index].entry & slotEntry
	}
	return t.getSlow(id)
}

// getSlow is get for a block beyond a dense index or in a hashed one; not
// inlined, so that get is.
//
//go:noinline
func (t *table) getSlow(id block.ID) int32 {
	if t.dense {
		return 0
	}
	h, _ := t.index.Get(bkey(id))
	return h
}

// slotOf returns block number i's slot (dense), growing the index to
// hold it.
func (t *table) slotOf(i uint64) *Slot {
	if i >= uint64(len(t.slot)) { // no store (and write barrier) when it fits
		t.growSlots(i)
	}
	return &t.slot[i]
}

// growSlots grows the index to hold block number i, and to its capacity
// (zero slots), so that the numbers after i, given mostly in increasing
// order, fit without another call. Not inlined, so that slotOf is.
//
//go:noinline
func (t *table) growSlots(i uint64) {
	t.slot = lru.Extend(t.slot, int(i)+1, 1<<62)
	t.slot = t.slot[:cap(t.slot)]
}

// handles appends ids' handles (0 for none) to hs.
func (t *table) handles(ids []block.ID, hs []int32) []int32 {
	for _, id := range ids {
		hs = append(hs, t.get(id))
	}
	return hs
}

// fetch loads the entries hs (0 for none) and nothing else, so that their
// lines are in the processor's cache for what follows; it keeps a value
// of them so that the loads are made.
func (t *table) fetch(hs []int32) {
	var x uint64
	for _, h := range hs {
		x += t.ents[h].mask
	}
	t.fetched = x
}

// touch makes h the most recently used entry.
func (t *table) touch(h int32) {
	if t.listed {
		t.lru.MoveToFront(t.lruLk, h)
		return
	}
	t.clock++
	t.ents[h].used = t.clock
}

// list starts keeping the LRU list: the live entries in order of their use
// times, newest first.
func (t *table) list() {
	if t.listed {
		return
	}
	hs := make([]int32, 0, t.n)
	for h := range t.ents {
		if t.ents[h].used != 0 {
			hs = append(hs, int32(h))
		}
	}
	slices.SortFunc(hs, func(a, b int32) int { return cmp.Compare(t.ents[a].used, t.ents[b].used) })
	t.lruLk = make([]lru.Link, len(t.ents), cap(t.ents))
	for _, h := range hs {
		t.lru.PushFront(t.lruLk, h)
	}
	t.listed = true
}

// create adds an empty entry for id (the caller adds a holder at once),
// recycling the least recently used entry when the table is full. It
// reports whether an entry was recycled.
func (t *table) create(id block.ID, v block.Version) (int32, bool) {
	recycled := false
	if t.len() >= t.max {
		t.list()
		t.remove(t.lru.Back())
		recycled = true
	}
	var h int32
	switch {
	case len(t.free) > 0:
		h, t.free = t.free[len(t.free)-1], t.free[:len(t.free)-1]
	default:
		h = int32(len(t.ents))
		t.ents = append(t.ents, entry{})
		if t.listed {
			t.lruLk = append(t.lruLk, lru.Link{})
		}
	}
	t.clock++
	e := &t.ents[h] // zero (INVARIANT: free entries are): set the fields that are not
	e.id, e.ver, e.last, e.used = id, v, NoClient, t.clock
	t.n++
	if t.dense {
		sl := t.slotOf(id.Index)
		sl.entry = sl.entry&slotMem | h
	} else {
		t.index.Put(bkey(id), h)
	}
	if t.listed {
		t.lru.PushFront(t.lruLk, h)
	}
	if t.byFile {
		t.fileAdd(h)
	}
	return h, recycled
}

// remove drops entry h from the table.
func (t *table) remove(h int32) {
	e := &t.ents[h]
	if t.listed {
		t.lru.Remove(t.lruLk, h)
	}
	t.n--
	if t.byFile {
		fl := t.files.Ref(fkey(e.id.File))
		if fl.Remove(t.fileLk, h); fl.Len() == 0 {
			t.files.Delete(fkey(e.id.File))
		}
	}
	if t.dense {
		t.slot[e.id.Index].entry &= slotMem
	} else {
		t.index.Delete(bkey(e.id))
	}
	t.free = append(t.free, h)
	if e.more != 0 {
		t.more[e.more] = t.more[e.more][:0]
		t.moreFree = append(t.moreFree, e.more)
	}
	*e = entry{}
}

// fileAdd puts h on its file's list.
func (t *table) fileAdd(h int32) {
	if int(h) >= len(t.fileLk) {
		t.fileLk = lru.Extend(t.fileLk, int(h)+1, 1<<62)
	}
	file := fkey(t.ents[h].id.File)
	fl := t.files.Ref(file)
	if fl == nil {
		t.files.Put(file, lru.List{})
		fl = t.files.Ref(file)
	}
	fl.PushFront(t.fileLk, h)
}

// dropFile removes every entry of file and returns how many there were.
func (t *table) dropFile(file uint64) int {
	if !t.byFile {
		t.byFile = true
		for h := range t.ents {
			if t.ents[h].used != 0 {
				t.fileAdd(int32(h))
			}
		}
	}
	n := 0
	for fl := t.files.Ref(fkey(file)); fl != nil; fl = t.files.Ref(fkey(file)) {
		t.remove(fl.Front())
		n++
	}
	return n
}

// each calls f for every entry from the newest to the oldest; f may remove
// the entry it is given.
func (t *table) each(f func(int32)) {
	t.list()
	for h := t.lru.Front(); h != 0; {
		next := t.lruLk[h].Next
		f(h)
		h = next
	}
}

// empty reports whether e has no holder.
func (e *entry) empty() bool { return e.mask == 0 && e.more == 0 }

// add records c as a holder of h.
func (t *table) add(h int32, c ClientID) {
	if c < maskClients {
		t.ents[h].mask |= 1 << c
		return
	}
	t.addMore(h, c)
}

// addMore is add for a client from maskClients on; not inlined, so that
// add is.
//
//go:noinline
func (t *table) addMore(h int32, c ClientID) {
	e := &t.ents[h]
	if e.more == 0 {
		if n := len(t.moreFree); n > 0 {
			e.more, t.moreFree = t.moreFree[n-1], t.moreFree[:n-1]
		} else {
			e.more = int32(len(t.more))
			t.more = append(t.more, nil)
		}
	}
	hs := t.more[e.more]
	if i, ok := slices.BinarySearch(hs, c); !ok {
		t.more[e.more] = slices.Insert(hs, i, c)
	}
}

// del removes c from h's holders; it reports whether c was one.
func (t *table) del(h int32, c ClientID) bool {
	if c < maskClients {
		m := &t.ents[h].mask
		old := *m
		*m = old &^ (1 << c)
		return *m != old
	}
	return t.delMore(h, c)
}

// delMore is del for a client from maskClients on; not inlined, so that
// del is.
//
//go:noinline
func (t *table) delMore(h int32, c ClientID) bool {
	e := &t.ents[h]
	if e.more == 0 {
		return false
	}
	hs := t.more[e.more]
	i, ok := slices.BinarySearch(hs, c)
	if !ok {
		return false
	}
	t.more[e.more] = slices.Delete(hs, i, i+1)
	if len(hs) == 1 {
		t.moreFree = append(t.moreFree, e.more)
		e.more = 0
	}
	return true
}

// holders yields h's holders in increasing order.
func (t *table) holders(h int32) func(yield func(ClientID) bool) {
	return func(yield func(ClientID) bool) {
		e := &t.ents[h]
		for m := e.mask; m != 0; m &= m - 1 {
			if !yield(ClientID(bits.TrailingZeros64(m))) {
				return
			}
		}
		if e.more != 0 {
			for _, c := range t.more[e.more] {
				if !yield(c) {
					return
				}
			}
		}
	}
}

// The server's memory (memHas, memPut, memDel) is a set of blocks: a hash
// table, or, when the directory's blocks are numbered densely, a bit in
// each block's slot (slotMem), which a request loads anyway: no other line
// to load for the server's turn in the rotation, and the server's
// evictions write the evicted block's slot, where the simulator keeps its
// own handle of the block too.

// memHas reports whether the server's memory holds id.
func (t *table) memHas(id block.ID) bool {
	if id.Index < uint64(len(t.slot)) { // dense
		return t.slot[id.Index].entry < 0 // slotMem
	}
	return t.memHasSlow(id)
}

// memHasSlow is memHas for a block beyond a dense index or in a hashed
// set; not inlined, so that memHas is.
//
//go:noinline
func (t *table) memHasSlow(id block.ID) bool {
	if t.dense {
		return false
	}
	_, ok := t.mem.Get(bkey(id))
	return ok
}

// memPut adds id to the server's memory.
func (t *table) memPut(id block.ID) {
	if id.Index < uint64(len(t.slot)) { // dense
		t.slot[id.Index].entry |= slotMem
		return
	}
	t.memPutSlow(id)
}

// memPutSlow is memPut for a block beyond a dense index or in a hashed set.
//
//go:noinline
func (t *table) memPutSlow(id block.ID) {
	if t.dense {
		t.slotOf(id.Index).entry |= slotMem
		return
	}
	t.mem.Put(bkey(id), struct{}{})
}

// memDel drops id from the server's memory.
func (t *table) memDel(id block.ID) {
	if id.Index < uint64(len(t.slot)) { // dense
		t.slot[id.Index].entry &^= slotMem
		return
	}
	t.memDelSlow(id)
}

// memDelSlow is memDel for a block beyond a dense index or in a hashed set.
//
//go:noinline
func (t *table) memDelSlow(id block.ID) {
	if !t.dense {
		t.mem.Delete(bkey(id))
	}
}

// nextHolder returns the holder below maskClients that follows last in
// e's mask, leaving out skip (the lowest one when none follows), NoClient
// if there is none: where pick most likely forwards, without its checks.
func (e *entry) nextHolder(last, skip ClientID) ClientID {
	m := e.mask
	if skip < maskClients {
		m &^= 1 << skip
	}
	if last < maskClients-1 {
		if after := m &^ (2<<last - 1); after != 0 {
			m = after
		}
	}
	if m == 0 {
		return NoClient
	}
	return ClientID(bits.TrailingZeros64(m))
}
