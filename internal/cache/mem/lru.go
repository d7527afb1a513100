package mem

import (
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
)

// entry is one cached block. It sits on two intrusive lists: the recency
// list (prev/next, through the sentinel) and its file's list (fprev/fnext,
// nil-terminated), so that RemoveFile costs O(blocks of the file).
type entry struct {
	id           block.ID
	v            block.Version
	data         []byte
	prev, next   *entry
	fprev, fnext *entry
}

// evicted names a block the cache dropped to make room.
type evicted struct {
	ID      block.ID
	Version block.Version
}

// lru is the non-thread-safe core: an exact LRU over a byte budget.
//
// INVARIANT: bytes == sum of len(e.data) over items, and bytes <= capacity.
// INVARIANT: every entry of items is on the recency list exactly once and on
// the list of files[e.id.File] exactly once; no other entries are.
type lru struct {
	capacity int64
	bytes    int64
	items    map[block.ID]*entry
	files    map[uint64]*entry // head of each file's list
	root     entry             // recency sentinel: root.next is the most recent
	hits     uint64
	misses   uint64
	evicts   uint64
}

func newLRU(capacity int64) *lru {
	l := &lru{
		capacity: capacity,
		items:    make(map[block.ID]*entry),
		files:    make(map[uint64]*entry),
	}
	l.root.next, l.root.prev = &l.root, &l.root
	return l
}

func (l *lru) get(id block.ID, v block.Version) ([]byte, bool) {
	e := l.items[id]
	if e == nil || e.v != v {
		l.misses++
		return nil, false
	}
	l.hits++
	l.moveToFront(e)
	return e.data, true
}

// peek reports the version held for id without touching recency or counters.
func (l *lru) peek(id block.ID) (block.Version, bool) {
	if e := l.items[id]; e != nil {
		return e.v, true
	}
	return 0, false
}

// put stores data and appends what it evicted to ev.
func (l *lru) put(id block.ID, v block.Version, data []byte, ev []evicted) []evicted {
	n := int64(len(data))
	if n > l.capacity {
		if e := l.items[id]; e != nil {
			ev = append(ev, evicted{e.id, e.v})
			l.evicts++
			l.unlink(e)
		}
		return ev
	}
	if e := l.items[id]; e != nil {
		l.bytes += n - int64(len(e.data))
		e.v, e.data = v, data
		l.moveToFront(e)
	} else {
		e = &entry{id: id, v: v, data: data}
		l.items[id] = e
		l.bytes += n
		l.pushFront(e)
		l.fileAdd(e)
	}
	for l.bytes > l.capacity {
		old := l.root.prev // never the entry just put: it alone fits
		ev = append(ev, evicted{old.id, old.v})
		l.evicts++
		l.unlink(old)
	}
	return ev
}

func (l *lru) remove(id block.ID) {
	if e := l.items[id]; e != nil {
		l.unlink(e)
	}
}

func (l *lru) removeFile(file uint64) {
	for e := l.files[file]; e != nil; {
		next := e.fnext
		l.unlink(e)
		e = next
	}
}

// oldest returns the least recently used block.
func (l *lru) oldest() (evicted, bool) {
	if e := l.root.prev; e != &l.root {
		return evicted{e.id, e.v}, true
	}
	return evicted{}, false
}

func (l *lru) stats() cache.Stats {
	return cache.Stats{
		Entries: len(l.items), Bytes: l.bytes, Capacity: l.capacity,
		Hits: l.hits, Misses: l.misses, Evictions: l.evicts,
	}
}

// unlink drops e from the map and both lists and gives back its bytes.
func (l *lru) unlink(e *entry) {
	delete(l.items, e.id)
	l.bytes -= int64(len(e.data))
	e.prev.next, e.next.prev = e.next, e.prev
	if e.fprev == nil {
		if e.fnext == nil {
			delete(l.files, e.id.File)
		} else {
			l.files[e.id.File] = e.fnext
		}
	} else {
		e.fprev.fnext = e.fnext
	}
	if e.fnext != nil {
		e.fnext.fprev = e.fprev
	}
	*e = entry{} // let the data go even if someone holds e
}

func (l *lru) pushFront(e *entry) {
	e.prev, e.next = &l.root, l.root.next
	l.root.next.prev = e
	l.root.next = e
}

func (l *lru) moveToFront(e *entry) {
	if l.root.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	l.pushFront(e)
}

func (l *lru) fileAdd(e *entry) {
	head := l.files[e.id.File]
	e.fnext = head
	if head != nil {
		head.fprev = e
	}
	l.files[e.id.File] = e
}
