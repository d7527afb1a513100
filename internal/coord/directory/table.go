package directory

import (
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
}

// maskClients bounds the client ids kept in an entry's mask.
const maskClients = 64

// table is the bounded table of entries with an LRU list and a list per
// file (so that a file change drops the file's entries in time proportional
// to their number), over a slab of entries and lru.Lists of handles.
//
// Blocks and files are found through hash tables (lru.Table: open
// addressing, no tombstones under the table's constant insert/delete
// churn), or, when the caller numbers them densely (Config.Dense), in
// slices indexed by the numbers.
//
// INVARIANT: the index, the LRU list and the file lists hold exactly the
// live entries; free holds the other handles below len(ents).
type table struct {
	max    int
	dense  bool
	ents   []entry    // the slab; ents[0] is unused (handle 0 is none)
	lruLk  []lru.Link // links on the LRU list, by handle
	fileLk []lru.Link // links on the file lists, by handle
	lru    lru.List   // newest first
	free   []int32

	index lru.Table[bkey, int32]    // block → handle (not dense)
	files lru.Table[fkey, lru.List] // file → its entries (not dense)
	slot  []int32                   // dense: block number (ID.Index) → handle
	flist []lru.List                // dense: file number (ID.File) → its entries

	more     [][]ClientID // holders from 64 on, by entry.more; more[0] is unused
	moreFree []int32
}

func newTable(max int, dense bool) *table {
	return &table{max: max, dense: dense, ents: make([]entry, 1), lruLk: make([]lru.Link, 1),
		fileLk: make([]lru.Link, 1), more: make([][]ClientID, 1)}
}

func (t *table) len() int { return t.lru.Len() }

// get returns id's handle, 0 if none.
func (t *table) get(id block.ID) int32 {
	if t.dense {
		if id.Index < uint64(len(t.slot)) {
			return t.slot[id.Index]
		}
		return 0
	}
	h, _ := t.index.Get(bkey(id))
	return h
}

// fileList returns file's list, creating it (empty) if asked.
func (t *table) fileList(file uint64, create bool) *lru.List {
	if t.dense {
		if file >= uint64(len(t.flist)) {
			if !create {
				return nil
			}
			t.flist = lru.Extend(t.flist, int(file)+1, 1<<62)
		}
		return &t.flist[file]
	}
	if l := t.files.Ref(fkey(file)); l != nil || !create {
		return l
	}
	t.files.Put(fkey(file), lru.List{})
	return t.files.Ref(fkey(file))
}

// touch makes h the most recently used entry.
func (t *table) touch(h int32) { t.lru.MoveToFront(t.lruLk, h) }

// create adds an empty entry for id (the caller adds a holder at once),
// recycling the least recently used entry when the table is full. It
// reports whether an entry was recycled.
func (t *table) create(id block.ID, v block.Version) (int32, bool) {
	recycled := false
	if t.len() >= t.max {
		t.remove(t.lru.Back())
		recycled = true
	}
	var h int32
	if n := len(t.free); n > 0 {
		h, t.free = t.free[n-1], t.free[:n-1]
	} else {
		h = int32(len(t.ents))
		t.ents = append(t.ents, entry{})
		t.lruLk = append(t.lruLk, lru.Link{})
		t.fileLk = append(t.fileLk, lru.Link{})
	}
	t.ents[h] = entry{id: id, ver: v, last: NoClient}
	if t.dense {
		t.slot = lru.Extend(t.slot, int(id.Index)+1, 1<<62)
		t.slot[id.Index] = h
	} else {
		t.index.Put(bkey(id), h)
	}
	t.lru.PushFront(t.lruLk, h)
	t.fileList(id.File, true).PushFront(t.fileLk, h)
	return h, recycled
}

// remove drops entry h from the table.
func (t *table) remove(h int32) {
	e := &t.ents[h]
	t.lru.Remove(t.lruLk, h)
	fl := t.fileList(e.id.File, false)
	if fl.Remove(t.fileLk, h); fl.Len() == 0 && !t.dense {
		t.files.Delete(fkey(e.id.File))
	}
	if t.dense {
		t.slot[e.id.Index] = 0
	} else {
		t.index.Delete(bkey(e.id))
	}
	if e.more != 0 {
		t.more[e.more] = t.more[e.more][:0]
		t.moreFree = append(t.moreFree, e.more)
	}
	*e = entry{}
	t.free = append(t.free, h)
}

// dropFile removes every entry of file and returns how many there were.
func (t *table) dropFile(file uint64) int {
	n := 0
	for fl := t.fileList(file, false); fl != nil && fl.Len() > 0; fl = t.fileList(file, false) {
		t.remove(fl.Front())
		n++
	}
	return n
}

// each calls f for every entry from the newest to the oldest; f may remove
// the entry it is given.
func (t *table) each(f func(int32)) {
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
	e := &t.ents[h]
	if c < maskClients {
		e.mask |= 1 << c
		return
	}
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
	e := &t.ents[h]
	if c < maskClients {
		had := e.mask&(1<<c) != 0
		e.mask &^= 1 << c
		return had
	}
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

// blockSet is a set of blocks (the server's memory): a hash table, or a
// bitmap by block number when the directory's blocks are numbered densely.
type blockSet struct {
	dense bool
	bits  []uint64
	index lru.Table[bkey, struct{}]
}

func (s *blockSet) has(id block.ID) bool {
	if s.dense {
		i := id.Index / 64
		return i < uint64(len(s.bits)) && s.bits[i]&(1<<(id.Index%64)) != 0
	}
	_, ok := s.index.Get(bkey(id))
	return ok
}

func (s *blockSet) put(id block.ID) {
	if s.dense {
		s.bits = lru.Extend(s.bits, int(id.Index/64)+1, 1<<62)
		s.bits[id.Index/64] |= 1 << (id.Index % 64)
		return
	}
	s.index.Put(bkey(id), struct{}{})
}

func (s *blockSet) del(id block.ID) {
	if s.dense {
		if i := id.Index / 64; i < uint64(len(s.bits)) {
			s.bits[i] &^= 1 << (id.Index % 64)
		}
		return
	}
	s.index.Delete(bkey(id))
}
