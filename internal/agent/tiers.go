package agent

import (
	"context"
	"fmt"
	"sync"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/obs"
)

// DiskConfig configures the persistent disk tier under the memory tier
// (seed 003). Reads go memory → disk → peer → server; a block fetched from
// a peer or the server is stored in both tiers. At this stage the disk tier
// holds clean blocks, and dirty ones under the write-back policy
// (writeback.go).
type DiskConfig struct {
	Dir   string // cache directory; "" means no disk tier
	Size  int64  // bytes of block data; 0 means disk.DefaultSize
	Banks int    // bank files; 0 means disk.DefaultBanks
	Assoc int    // ways per set; 0 means disk.DefaultAssoc
}

// diskWriters bounds the disk tier writes in flight behind fetches.
const diskWriters = 4

// diskTier is the agent's disk tier and its background writers.
type diskTier struct {
	c      *disk.Cache // nil without --disk-cache
	sem    chan struct{}
	wg     sync.WaitGroup // the background writes in flight
	mu     sync.Mutex     // guards closed, wg.Add and pending
	closed bool
	// pending counts the background writes of each file not done yet;
	// settled waits on it (a policy that must know what the disk holds).
	pending map[uint64]int
	done    *sync.Cond // on mu: a file's pending count fell to zero
}

// openDisk opens the disk tier once the block size is known (from the
// server's handshake) and registers its counters as tier local_disk.
func (a *Agent) openDisk() error {
	dc := a.cfg.Disk
	if dc.Dir == "" {
		return nil
	}
	bs, _ := a.sess.params()
	c, err := disk.Open(disk.Config{Dir: dc.Dir, Size: dc.Size, BlockSize: bs, Banks: dc.Banks, Assoc: dc.Assoc,
		Logger: a.log, OnEvict: func(id block.ID, _ block.Version) { a.diskEvicted(id) }})
	if err != nil {
		return fmt.Errorf("open --disk-cache: %w", err)
	}
	a.disk.c, a.disk.sem = c, make(chan struct{}, diskWriters)
	a.disk.pending, a.disk.done = make(map[uint64]int), sync.NewCond(&a.disk.mu)
	a.metrics.Register(obs.NewTierCollector(obs.LayerLocalDisk, c.Stats))
	s := c.Stats()
	a.log.Info("disk cache open", "dir", dc.Dir, "capacity", block.Size(s.Capacity).String(), "blocks_held", s.Entries)
	return nil
}

// fromDisk returns block id at version v from the disk tier and, on a hit,
// promotes it to the memory tier and counts the read as local_disk.
func (a *Agent) fromDisk(id block.ID, v block.Version) ([]byte, bool) {
	if a.disk.c == nil {
		return nil, false
	}
	data, ok := a.disk.c.Get(id, v)
	if !ok {
		return nil, false
	}
	a.cache.Put(id, v, data)
	a.metrics.CountRead(obs.LayerLocalDisk, len(data))
	return data, true
}

// toDisk stores a fetched block in the disk tier, in the background so the
// reader does not wait for the write and its checksum; at most diskWriters
// run at once, and a fetch waits for a free one rather than drop the block
// (blocks are shared read-only, so the write may outlive the fetch).
func (a *Agent) toDisk(id block.ID, v block.Version, data []byte) {
	d := &a.disk
	if d.c == nil {
		return
	}
	d.mu.Lock()
	d.pending[id.File]++
	d.mu.Unlock()
	d.sem <- struct{}{}
	d.mu.Lock()
	closed := d.closed
	if !closed {
		d.wg.Add(1) // never concurrently with closeDisk's Wait
	}
	d.mu.Unlock()
	if closed {
		<-d.sem
		d.written(id.File)
		return
	}
	go func() {
		defer func() { <-d.sem; d.written(id.File); d.wg.Done() }()
		d.c.Fill(id, v, data) // never over a dirty copy (write-back)
	}()
}

// written ends one background write of file ino.
func (d *diskTier) written(ino uint64) {
	d.mu.Lock()
	if d.pending[ino]--; d.pending[ino] <= 0 {
		delete(d.pending, ino)
		d.done.Broadcast()
	}
	d.mu.Unlock()
}

// diskSettled waits until the background writes of file ino queued so
// far are done (the disk tier then holds what reads fetched), or ctx ends.
func (a *Agent) diskSettled(ctx context.Context, ino uint64) {
	d := &a.disk
	if d.c == nil {
		return
	}
	stop := context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.done.Broadcast()
		d.mu.Unlock()
	})
	defer stop()
	d.mu.Lock()
	for d.pending[ino] > 0 && ctx.Err() == nil {
		d.done.Wait()
	}
	d.mu.Unlock()
}

// toDiskNow stores a block in the disk tier before it returns (a whole
// file fetched must be there when the fetch ends: its reader and its
// peers read it from there).
func (a *Agent) toDiskNow(id block.ID, v block.Version, data []byte) {
	d := &a.disk
	if d.c == nil {
		return
	}
	d.mu.Lock()
	closed := d.closed
	if !closed {
		d.wg.Add(1) // never concurrently with closeDisk's Wait
	}
	d.mu.Unlock()
	if closed {
		return
	}
	defer d.wg.Done()
	d.c.Fill(id, v, data)
}

// dropFile drops a file's blocks from both tiers when its version changed:
// they can never hit again (lookups match versions exactly), so their room
// is freed at once.
func (a *Agent) dropFile(ino uint64) {
	a.policy().fileDropped(ino)
	a.cache.RemoveFile(ino)
	if a.disk.c != nil {
		a.disk.c.RemoveFile(ino)
	}
}

// dropOtherDiskVersion frees the disk tier's blocks of a file first seen
// since the start (a restart) at a version other than the one they hold:
// the file changed while we were away, and they can never hit again. The
// first block stands for the file.
func (a *Agent) dropOtherDiskVersion(ino, v uint64) {
	if old, ok := a.diskPeek(block.ID{File: ino}); ok && uint64(old) != v {
		a.disk.c.RemoveFile(ino)
	}
}

// diskPeek returns the version the disk tier holds for id.
func (a *Agent) diskPeek(id block.ID) (block.Version, bool) {
	if a.disk.c == nil {
		return 0, false
	}
	return a.disk.c.Peek(id)
}

// forPeer returns block id at version v for a peer the server forwarded a
// request to us for: from memory, else from the disk tier (peers serve
// from their disk too).
func (a *Agent) forPeer(id block.ID, v block.Version) ([]byte, bool) {
	if data, ok := a.cache.Get(id, v); ok {
		return data, true
	}
	if a.disk.c == nil {
		return nil, false
	}
	return a.disk.c.Get(id, v)
}

// memEvicted is the memory tier's eviction callback; the policy hears of
// it (directory: the discard queue, pdirectory.go).
func (a *Agent) memEvicted(id block.ID) {
	a.fresh.Delete(id)
	a.policy().memEvicted(id)
}

// diskEvicted is the disk tier's eviction callback; the policy hears of it.
func (a *Agent) diskEvicted(id block.ID) {
	a.policy().diskEvicted(id)
}

// closeDisk waits for the background writes and closes the disk tier.
func (a *Agent) closeDisk() error {
	d := &a.disk
	if d.c == nil {
		return nil
	}
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.wg.Wait()
	return d.c.Close()
}
