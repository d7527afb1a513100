package dirsim

import (
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
	"github.com/coopfs/coopfs/internal/sim"
)

// cache is one cache (a client's or the server's memory): an exact LRU
// over blocks (lru.Cache). Each block remembers the file version it belongs
// to and when its data arrived (a block whose data is still on its way is
// pending).
//
// INVARIANT: c.Len() <= capacity.
type cache struct {
	capacity int
	c        lru.Cache[sim.Key, lnode]
}

type lnode struct {
	ver   block.Version
	ready time.Duration
}

func newLRU(capacity int) *cache { return &cache{capacity: capacity} }

func (l *cache) len() int { return l.c.Len() }

func key(id block.ID) sim.Key { return sim.Key{File: id.File, Block: id.Index} }

// get returns the block's node (nil if absent) without touching it; the
// pointer is valid until the next insert.
func (l *cache) get(id block.ID) *lnode {
	if h := l.c.Find(key(id)); h != 0 {
		return l.c.Value(h)
	}
	return nil
}

// touch makes id the newest block; it must be cached.
func (l *cache) touch(id block.ID) { l.c.Touch(l.c.Find(key(id))) }

// remove drops id if cached.
func (l *cache) remove(id block.ID) {
	if h := l.c.Find(key(id)); h != 0 {
		l.c.Remove(h)
	}
}

// relabel moves the cached blocks of file at version from to version to
// (O(cache size); recency unchanged).
func (l *cache) relabel(file uint64, from, to block.Version) {
	for h := l.c.Newest(); h != 0; h = l.c.Older(h) {
		if l.c.Key(h).File == file {
			if n := l.c.Value(h); n.ver == from {
				n.ver = to
			}
		}
	}
}

// insert caches id (version ver, data ready at ready) as the newest block,
// replacing a cached copy. It returns the evicted block, if any.
func (l *cache) insert(id block.ID, ver block.Version, ready time.Duration) (victim block.ID, evicted bool) {
	if l.capacity <= 0 {
		return block.ID{}, false
	}
	if h := l.c.Find(key(id)); h != 0 {
		*l.c.Value(h) = lnode{ver, ready}
		l.c.Touch(h)
		return block.ID{}, false
	}
	if l.c.Len() >= l.capacity {
		k, _, _ := l.c.Evict()
		victim, evicted = block.ID{File: k.File, Index: k.Block}, true
	}
	l.c.Add(key(id), lnode{ver, ready})
	return victim, evicted
}
