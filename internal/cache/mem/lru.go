package mem

import (
	"fmt"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
	list "github.com/coopfs/coopfs/internal/lru"
)

// key is a block.ID hashable by the LRU's table.
type key block.ID

func (k key) Hash() uint64 { return list.Mix(k.File*0x9e3779b97f4a7c15 ^ k.Index) }

// value is one cached block's version and data.
type value struct {
	v    block.Version
	data []byte
}

// evicted names a block the cache dropped to make room.
type evicted struct {
	ID      block.ID
	Version block.Version
}

// lru is the non-thread-safe core: an exact LRU over a byte budget (the
// generic lru.Cache), with every file's blocks on a list of their own
// (links beside the cache's slab, by handle) so that RemoveFile costs
// O(blocks of the file).
//
// INVARIANT: bytes == sum of len(data) over the entries, and bytes <=
// capacity. INVARIANT: every entry is on the list of files[its file]
// exactly once; no other handles are.
type lru struct {
	capacity int64
	bytes    int64
	c        list.Cache[key, value]
	files    map[uint64]list.List // each file's blocks
	fl       []list.Link          // links on the file lists, by handle
	hits     uint64
	misses   uint64
	evicts   uint64
}

func newLRU(capacity int64) *lru {
	return &lru{capacity: capacity, files: make(map[uint64]list.List)}
}

func (l *lru) get(id block.ID, v block.Version) ([]byte, bool) {
	h := l.c.Find(key(id))
	if h == 0 || l.c.Value(h).v != v {
		l.misses++
		return nil, false
	}
	l.hits++
	l.c.Touch(h)
	return l.c.Value(h).data, true
}

// peek reports the version held for id without touching recency or counters.
func (l *lru) peek(id block.ID) (block.Version, bool) {
	if h := l.c.Find(key(id)); h != 0 {
		return l.c.Value(h).v, true
	}
	return 0, false
}

// put stores data and appends what it evicted to ev.
func (l *lru) put(id block.ID, v block.Version, data []byte, ev []evicted) []evicted {
	n := int64(len(data))
	h := l.c.Find(key(id))
	if n > l.capacity {
		if h != 0 {
			ev = append(ev, evicted{id, l.c.Value(h).v})
			l.evicts++
			l.unlink(h)
		}
		return ev
	}
	if h != 0 {
		e := l.c.Value(h)
		l.bytes += n - int64(len(e.data))
		e.v, e.data = v, data
		l.c.Touch(h)
	} else {
		h = l.c.Add(key(id), value{v, data})
		l.bytes += n
		l.fl = list.Grow(l.fl, h)
		fh := l.files[id.File]
		fh.PushFront(l.fl, h)
		l.files[id.File] = fh
	}
	for l.bytes > l.capacity {
		old := l.c.Oldest() // never the entry just put: it alone fits
		ev = append(ev, evicted{block.ID(l.c.Key(old)), l.c.Value(old).v})
		l.evicts++
		l.unlink(old)
	}
	return ev
}

func (l *lru) remove(id block.ID) {
	if h := l.c.Find(key(id)); h != 0 {
		l.unlink(h)
	}
}

func (l *lru) removeFile(file uint64) {
	fh := l.files[file]
	for h := fh.Front(); h != 0; {
		next := list.Next(l.fl, h)
		l.unlink(h)
		h = next
	}
}

// relabel moves file's blocks held at version from to version to, in
// place (recency unchanged); blocks at other versions are dropped, and so
// are the blocks take asks for, which are appended to out.
func (l *lru) relabel(file uint64, from, to block.Version, take func(index uint64, n int) bool, out []Taken) []Taken {
	fh := l.files[file]
	for h := fh.Front(); h != 0; {
		next := list.Next(l.fl, h)
		e := l.c.Value(h)
		switch idx := l.c.Key(h).Index; {
		case e.v != from:
			l.unlink(h)
		case take != nil && take(idx, len(e.data)):
			out = append(out, Taken{Index: idx, Data: e.data})
			l.unlink(h)
		default:
			e.v = to
		}
		h = next
	}
	return out
}

// oldest returns the least recently used block.
func (l *lru) oldest() (evicted, bool) {
	if h := l.c.Oldest(); h != 0 {
		return evicted{block.ID(l.c.Key(h)), l.c.Value(h).v}, true
	}
	return evicted{}, false
}

func (l *lru) stats() cache.Stats {
	return cache.Stats{
		Entries: l.c.Len(), Bytes: l.bytes, Capacity: l.capacity,
		Hits: l.hits, Misses: l.misses, Evictions: l.evicts,
	}
}

// unlink drops entry h from the cache and its file's list and gives back
// its bytes.
func (l *lru) unlink(h int32) {
	file := l.c.Key(h).File
	l.bytes -= int64(len(l.c.Value(h).data))
	fh := l.files[file]
	fh.Remove(l.fl, h)
	if fh.Len() == 0 {
		delete(l.files, file)
	} else {
		l.files[file] = fh
	}
	l.c.Remove(h) // lets the data go
}

// check verifies the invariants (tests).
func (l *lru) check() error {
	if err := l.c.Check(); err != nil {
		return err
	}
	var bytes int64
	for h := l.c.Newest(); h != 0; h = l.c.Older(h) {
		bytes += int64(len(l.c.Value(h).data))
	}
	if bytes != l.bytes || l.bytes > l.capacity {
		return fmt.Errorf("bytes %d, counted %d, capacity %d", l.bytes, bytes, l.capacity)
	}
	onFiles := 0
	for f, fh := range l.files {
		if fh.Len() == 0 {
			return fmt.Errorf("file %d: empty list kept", f)
		}
		n := 0
		for h := fh.Front(); h != 0; h = list.Next(l.fl, h) {
			if l.c.Key(h).File != f || l.c.Find(l.c.Key(h)) != h {
				return fmt.Errorf("file %d: list holds %v", f, l.c.Key(h))
			}
			n++
		}
		if n != fh.Len() {
			return fmt.Errorf("file %d: list length %d, counted %d", f, fh.Len(), n)
		}
		onFiles += n
	}
	if onFiles != l.c.Len() {
		return fmt.Errorf("%d entries on file lists, %d in the cache", onFiles, l.c.Len())
	}
	return nil
}
