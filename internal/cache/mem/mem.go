package mem

import (
	"errors"
	"fmt"
	"sync"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
)

// DefaultCapacity is the capacity used when Config.Capacity is zero; it
// matches the default of `coopfs mount --cache-size`.
const DefaultCapacity = 512 << 20

// Config configures a memory cache.
type Config struct {
	// Capacity bounds the sum of the cached blocks' lengths, in bytes.
	// Zero means DefaultCapacity.
	Capacity int64
	// OnEvict, if set, is called for every block the cache drops on its own:
	// to make room for a Put, or the old copy of an id whose new data is too
	// big to store. It is not called for Remove, RemoveFile, or a block
	// replaced by a Put of the same id. It runs after the cache's lock is
	// released, on the goroutine that called Put, in eviction order (least
	// recently used first); it may call the cache.
	OnEvict func(id block.ID, v block.Version)
}

func (c Config) withDefaults() Config {
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity
	}
	return c
}

func (c Config) validate() error {
	if c.Capacity < 0 {
		return fmt.Errorf("mem cache: capacity %d is negative; give a size in bytes, like 512MiB", c.Capacity)
	}
	return nil
}

// ErrConfig is wrapped by the errors New returns for a bad Config.
var ErrConfig = errors.New("invalid memory cache config")

// Cache is a byte-bounded LRU block cache, safe for concurrent use. It
// implements cache.Tier. Data slices are shared read-only, never copied.
// Capacity counts data bytes only; the bookkeeping adds about 150 bytes per
// block (under 4% for 4 KiB blocks, negligible for 1 MiB ones).
type Cache struct {
	mu      sync.Mutex
	core    *lru
	onEvict func(block.ID, block.Version)
}

var _ cache.Tier = (*Cache)(nil)

// New returns an empty cache.
func New(cfg Config) (*Cache, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return &Cache{core: newLRU(cfg.Capacity), onEvict: cfg.OnEvict}, nil
}

// Get returns block id if it is held at exactly version v, and makes it the
// most recently used. A miss does not touch recency.
func (c *Cache) Get(id block.ID, v block.Version) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.get(id, v)
}

// Put stores data as block id at version v (replacing any version held),
// makes it the most recently used and evicts least recently used blocks
// until the cache fits its capacity. Data longer than the capacity is not
// stored. The caller must not modify data afterwards.
func (c *Cache) Put(id block.ID, v block.Version, data []byte) {
	var buf [4]evicted
	c.mu.Lock()
	ev := c.core.put(id, v, data, buf[:0])
	c.mu.Unlock()
	if c.onEvict != nil {
		for _, e := range ev {
			c.onEvict(e.ID, e.Version)
		}
	}
}

// Remove drops block id, whatever its version.
func (c *Cache) Remove(id block.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.core.remove(id)
}

// RemoveFile drops every block of file in O(blocks of that file).
func (c *Cache) RemoveFile(file uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.core.removeFile(file)
}

// Taken is a block Relabel took out of the cache: its index in the file
// and its data (still shared read-only).
type Taken struct {
	Index uint64
	Data  []byte
}

// Relabel moves every block of file held at version from to version to,
// without touching recency or counters: the file changed, but not these
// blocks (a writer's own write-through). Blocks of file at any other
// version are dropped, and so are those take (if not nil) reports true
// for, given their index and length: they are returned, for the caller to
// store again (Put) at version to once it has brought them up to date.
// OnEvict is not called.
func (c *Cache) Relabel(file uint64, from, to block.Version, take func(index uint64, n int) bool) []Taken {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.relabel(file, from, to, take, nil)
}

// Peek returns the version held for id, without touching recency or the
// hit/miss counters (for policies that look before they act).
func (c *Cache) Peek(id block.ID) (block.Version, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.peek(id)
}

// Contains reports whether id is held at exactly version v, without
// touching recency or counters.
func (c *Cache) Contains(id block.ID, v block.Version) bool {
	got, ok := c.Peek(id)
	return ok && got == v
}

// Oldest returns the least recently used block: the next one Put would
// evict (for best-guess replacement, which compares oldest blocks).
func (c *Cache) Oldest() (id block.ID, v block.Version, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.core.oldest()
	return e.ID, e.Version, ok
}

// Stats returns a snapshot of the cache's size and counters.
func (c *Cache) Stats() cache.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.stats()
}
