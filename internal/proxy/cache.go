package proxy

import (
	"fmt"
	"sync"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
)

// blockCache is the proxy's block cache: a memory tier over an optional
// disk tier, and what the proxy learned of each file's current version and
// size (a block reply carries the size of its version).
type blockCache struct {
	blockSize int
	mem       *mem.Cache
	disk      *disk.Cache // nil without a disk cache directory
	flights   singleflight.Group
	writes    chan diskWrite // to the disk writers
	wg        sync.WaitGroup
	wmu       sync.RWMutex // guards closed against sends on writes
	closed    bool

	// isDirty (set under write-back) says a file has dirty data here: its
	// version is the write-back's, not the upstream's.
	isDirty func(ino uint64) bool

	mu    sync.Mutex
	files map[uint64]fileVersion // by inode: the last version seen
}

// fileVersion is a file's version and its size at that version.
type fileVersion struct{ version, size uint64 }

// diskWrite is a block waiting for a disk writer.
type diskWrite struct {
	id   block.ID
	v    block.Version
	data []byte
}

// maxFiles bounds the versions remembered; past it one is forgotten at
// random (its blocks are then fetched upstream until its next open).
const maxFiles = 1 << 18

// diskWriters is the number of goroutines storing fetched blocks on disk,
// so that a reply never waits for a disk write.
const diskWriters = 2

func newBlockCache(cfg Config, blockSize int) (*blockCache, error) {
	c := &blockCache{blockSize: blockSize, files: make(map[uint64]fileVersion)}
	var err error
	if c.mem, err = mem.New(mem.Config{Capacity: cfg.CacheSize}); err != nil {
		return nil, fmt.Errorf("memory cache: %w", err)
	}
	if d := cfg.Disk; d.Dir != "" {
		c.disk, err = disk.Open(disk.Config{Dir: d.Dir, Size: d.Size, BlockSize: blockSize, Banks: d.Banks, Assoc: d.Assoc, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("open --disk-cache: %w", err)
		}
		st := c.disk.Stats()
		cfg.Logger.Info("disk cache open", "dir", d.Dir, "capacity", block.Size(st.Capacity).String(), "blocks_held", st.Entries)
		c.writes = make(chan diskWrite, 64)
		for range diskWriters {
			c.wg.Add(1)
			go c.diskWriter()
		}
	}
	return c, nil
}

func (c *blockCache) diskWriter() {
	defer c.wg.Done()
	for w := range c.writes {
		c.disk.Fill(w.id, w.v, w.data) // never over a dirty copy (write-back)
	}
}

// register exports the tiers' counters (tiers proxy_memory, proxy_disk)
// and the number of connected clients.
func (p *Proxy) register() error {
	c := p.cache
	clients := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coopfs_proxy_clients", Help: "Clients connected to the proxy."},
		func() float64 { return float64(p.clientCount()) })
	if err := p.metrics.Register(clients, obs.NewTierCollector("proxy_memory", c.mem.Stats)); err != nil {
		return fmt.Errorf("register proxy metrics: %w", err)
	}
	if c.disk != nil {
		if err := p.metrics.Register(obs.NewTierCollector("proxy_disk", c.disk.Stats)); err != nil {
			return fmt.Errorf("register proxy metrics: %w", err)
		}
	}
	return nil
}

// get returns block id at version v from memory, else from disk (and then
// keeps it in memory too).
func (c *blockCache) get(id block.ID, v uint64) ([]byte, bool) {
	if data, ok := c.mem.Get(id, block.Version(v)); ok {
		return data, true
	}
	if c.disk == nil {
		return nil, false
	}
	data, ok := c.disk.Get(id, block.Version(v))
	if ok {
		c.mem.Put(id, block.Version(v), data)
	}
	return data, ok
}

// put keeps block id at version v in memory and, in the background, on
// disk. data must not change afterwards.
func (c *blockCache) put(id block.ID, v uint64, data []byte) {
	c.mem.Put(id, block.Version(v), data)
	if c.disk == nil {
		return
	}
	c.wmu.RLock()
	defer c.wmu.RUnlock()
	if !c.closed {
		c.writes <- diskWrite{id, block.Version(v), data}
	}
}

// noteAttr records a file's version and size from an upstream reply. A new
// version drops the blocks of the old one: they can never match again.
// The first version seen of a file (after a restart) drops disk blocks of
// another version.
func (c *blockCache) noteAttr(a *wire.Attr) {
	if a.Mode&0o170000 != 0o100000 { // regular files only
		return
	}
	c.noteVersion(a.Ino, a.Version, a.Size)
}

func (c *blockCache) noteVersion(ino, v, size uint64) {
	if c.isDirty != nil && c.isDirty(ino) {
		return // the write-back's blocks keep their tag until written back
	}
	c.mu.Lock()
	old, known := c.files[ino]
	if !known && len(c.files) >= maxFiles {
		for f := range c.files {
			delete(c.files, f)
			break
		}
	}
	// An older reply overtaken by a newer one: only counter versions are
	// ordered; versions derived from a file's state (derivedBit, the
	// server's versions.go) are not, and each one is taken as it comes.
	if old.version > v && old.version&derivedBit == 0 && v&derivedBit == 0 {
		c.mu.Unlock()
		return
	}
	c.files[ino] = fileVersion{v, size}
	c.mu.Unlock()
	switch {
	case known && old.version != v:
		c.mem.RemoveFile(ino)
		if c.disk != nil {
			c.disk.RemoveFile(ino)
		}
	case !known && c.disk != nil:
		if dv, ok := c.disk.Peek(block.ID{File: ino}); ok && uint64(dv) != v {
			c.disk.RemoveFile(ino)
		}
	}
}

// current returns the last version seen of file ino and its size.
func (c *blockCache) current(ino uint64) (fileVersion, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fv, ok := c.files[ino]
	return fv, ok
}

// setVersion records file ino's version after a write-back (whatever the
// order of versions: the write-back's minted ones are higher).
func (c *blockCache) setVersion(ino, v, size uint64) {
	c.mu.Lock()
	c.files[ino] = fileVersion{v, size}
	c.mu.Unlock()
}

// forget drops what is known of file ino's version.
func (c *blockCache) forget(ino uint64) {
	c.mu.Lock()
	delete(c.files, ino)
	c.mu.Unlock()
}

// fill keeps a fetched block in memory and on disk, never over a dirty
// copy, synchronously.
func (c *blockCache) fill(id block.ID, v uint64, data []byte) {
	c.mem.Put(id, block.Version(v), data)
	if c.disk != nil {
		c.disk.Fill(id, block.Version(v), data)
	}
}

// sizeAt returns the size of file ino at version v, if v is its last
// version seen.
func (c *blockCache) sizeAt(ino, v uint64) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fv, ok := c.files[ino]
	return fv.size, ok && fv.version == v
}

// close waits for the disk writes and closes the disk tier.
func (c *blockCache) close() error {
	if c.disk == nil {
		return nil
	}
	c.wmu.Lock()
	c.closed = true
	close(c.writes)
	c.wmu.Unlock()
	c.wg.Wait()
	return c.disk.Close()
}
