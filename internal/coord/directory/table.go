package directory

import (
	"slices"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// bkey is a block.ID hashable by lru.Table.
type bkey block.ID

func (k bkey) Hash() uint64 { return lru.Mix(k.File*0x9e3779b97f4a7c15 ^ k.Index) }

// entry is one directory entry: the clients caching one block of one file
// version.
//
// INVARIANT: holders is sorted, has no duplicates, is never empty while the
// entry is in the table, and never holds Server or a failed client.
type entry struct {
	id      block.ID
	ver     block.Version
	holders []ClientID
	// last is the rotation pointer: the node that served the latest
	// request for the block (NoClient before the first forward).
	last ClientID

	prev, next   *entry // LRU list; table.lru is the sentinel, lru.next the newest
	fprev, fnext *entry // the file's list, nil-terminated, head in table.files
}

// table is the bounded hash table of entries with an LRU list and a list per
// file (so that a file change drops the file's entries in time proportional
// to their number). The index is an lru.Table: open addressing, no
// tombstones under the table's constant insert/delete churn (Go maps
// slowed down under it).
type table struct {
	max     int
	entries lru.Table[bkey, *entry]
	files   map[uint64]*entry
	lru     entry
	free    []*entry
}

func newTable(max int) *table {
	t := &table{max: max, files: make(map[uint64]*entry)}
	t.lru.next, t.lru.prev = &t.lru, &t.lru
	return t
}

func (t *table) len() int { return t.entries.Len() }

func (t *table) get(id block.ID) *entry {
	e, _ := t.entries.Get(bkey(id))
	return e
}

// touch makes e the most recently used entry.
func (t *table) touch(e *entry) {
	t.unlinkLRU(e)
	t.pushLRU(e)
}

// create adds an empty entry for id (the caller adds a holder at once),
// recycling the least recently used entry when the table is full. It
// reports whether an entry was recycled.
func (t *table) create(id block.ID, v block.Version) (*entry, bool) {
	recycled := false
	if t.entries.Len() >= t.max {
		t.remove(t.lru.prev)
		recycled = true
	}
	var e *entry
	if n := len(t.free); n > 0 {
		e, t.free = t.free[n-1], t.free[:n-1]
	} else {
		e = new(entry)
	}
	e.id, e.ver, e.last = id, v, NoClient
	t.entries.Put(bkey(id), e)
	t.pushLRU(e)
	if head := t.files[id.File]; head != nil {
		head.fprev = e
		e.fnext = head
	}
	t.files[id.File] = e
	return e, recycled
}

// remove drops e from the table.
func (t *table) remove(e *entry) {
	t.unlinkLRU(e)
	if e.fprev != nil {
		e.fprev.fnext = e.fnext
	} else if e.fnext != nil {
		t.files[e.id.File] = e.fnext
	} else {
		delete(t.files, e.id.File)
	}
	if e.fnext != nil {
		e.fnext.fprev = e.fprev
	}
	t.entries.Delete(bkey(e.id))
	*e = entry{holders: e.holders[:0]}
	t.free = append(t.free, e)
}

// dropFile removes every entry of file and returns how many there were.
func (t *table) dropFile(file uint64) int {
	n := 0
	for e := t.files[file]; e != nil; e = t.files[file] {
		t.remove(e)
		n++
	}
	return n
}

// each calls f for every entry from the newest to the oldest; f may remove
// the entry it is given.
func (t *table) each(f func(*entry)) {
	for e := t.lru.next; e != &t.lru; {
		next := e.next
		f(e)
		e = next
	}
}

func (t *table) pushLRU(e *entry) {
	e.prev, e.next = &t.lru, t.lru.next
	t.lru.next.prev = e
	t.lru.next = e
}

func (t *table) unlinkLRU(e *entry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

// has reports whether c is a holder of e.
func (e *entry) has(c ClientID) bool {
	_, ok := slices.BinarySearch(e.holders, c)
	return ok
}

// add records c as a holder; it reports whether c was new.
func (e *entry) add(c ClientID) bool {
	i, ok := slices.BinarySearch(e.holders, c)
	if ok {
		return false
	}
	e.holders = slices.Insert(e.holders, i, c)
	return true
}

// del removes c; it reports whether c was a holder.
func (e *entry) del(c ClientID) bool {
	i, ok := slices.BinarySearch(e.holders, c)
	if ok {
		e.holders = slices.Delete(e.holders, i, i+1)
	}
	return ok
}
