package nasd

import (
	"fmt"

	"github.com/coopfs/coopfs/internal/lru"
	"github.com/coopfs/coopfs/internal/sim"
)

// cache is one member's cache: an exact LRU over blocks (lru.Cache). Each
// entry remembers whether the block is the member's own (it came from the
// member's own miss) or was received from a peer.
//
// INVARIANT: c.Len() <= capacity.
type cache struct {
	capacity int
	c        lru.Cache[sim.Key, bool] // value: owned
}

func newLRU(capacity int) *cache { return &cache{capacity: capacity} }

func (l *cache) len() int { return l.c.Len() }

func (l *cache) contains(k sim.Key) bool { return l.c.Find(k) != 0 }

// touch makes k the newest block and reports whether it was cached.
func (l *cache) touch(k sim.Key) bool {
	h := l.c.Find(k)
	if h != 0 {
		l.c.Touch(h)
	}
	return h != 0
}

// insert caches k as the newest block (an already cached k is touched and
// becomes owned if owned is set). When the cache overflows it evicts and
// returns the oldest block. A zero-capacity cache caches nothing.
func (l *cache) insert(k sim.Key, owned bool) (victim sim.Key, victimOwned, evicted bool) {
	if l.capacity == 0 {
		return victim, false, false
	}
	if h := l.c.Find(k); h != 0 {
		*l.c.Value(h) = *l.c.Value(h) || owned
		l.c.Touch(h)
		return victim, false, false
	}
	if l.c.Len() >= l.capacity {
		victim, victimOwned, evicted = l.c.Evict()
	}
	l.c.Add(k, owned)
	return victim, victimOwned, evicted
}

// remove drops k and reports whether it was cached.
func (l *cache) remove(k sim.Key) bool {
	h := l.c.Find(k)
	if h != 0 {
		l.c.Remove(h)
	}
	return h != 0
}

// owned reports whether k is cached as the member's own block.
func (l *cache) owned(k sim.Key) bool {
	h := l.c.Find(k)
	return h != 0 && *l.c.Value(h)
}

func (l *cache) check() error {
	if l.c.Len() > l.capacity {
		return fmt.Errorf("holds %d blocks, capacity %d", l.c.Len(), l.capacity)
	}
	return l.c.Check()
}
