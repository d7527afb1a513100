package agent

import (
	"fmt"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/obs"
)

// DiskConfig configures the persistent disk tier under the memory tier
// (seed 003). Reads go memory → disk → peer → server; a block fetched from
// a peer or the server is stored in both tiers. At this stage the disk tier
// is write-through: it holds clean blocks only.
type DiskConfig struct {
	Dir   string // cache directory; "" means no disk tier
	Size  int64  // bytes of block data; 0 means disk.DefaultSize
	Banks int    // bank files; 0 means disk.DefaultBanks
	Assoc int    // ways per set; 0 means disk.DefaultAssoc
}

// openDisk opens the disk tier once the block size is known (from the
// server's handshake) and registers its counters as tier local_disk.
func (a *Agent) openDisk() error {
	dc := a.cfg.Disk
	if dc.Dir == "" {
		return nil
	}
	bs, _ := a.sess.params()
	c, err := disk.Open(disk.Config{Dir: dc.Dir, Size: dc.Size, BlockSize: bs, Banks: dc.Banks, Assoc: dc.Assoc, Logger: a.log})
	if err != nil {
		return fmt.Errorf("open --disk-cache: %w", err)
	}
	a.disk = c
	a.metrics.Register(obs.NewTierCollector(obs.LayerLocalDisk, c.Stats))
	s := c.Stats()
	a.log.Info("disk cache open", "dir", dc.Dir, "capacity", block.Size(s.Capacity).String(), "blocks_held", s.Entries)
	return nil
}

// fromDisk returns block id at version v from the disk tier and, on a hit,
// promotes it to the memory tier and counts the read as local_disk.
func (a *Agent) fromDisk(id block.ID, v block.Version) ([]byte, bool) {
	if a.disk == nil {
		return nil, false
	}
	data, ok := a.disk.Get(id, v)
	if !ok {
		return nil, false
	}
	a.cache.Put(id, v, data)
	a.metrics.CountRead(obs.LayerLocalDisk, len(data))
	return data, true
}

// toDisk stores a fetched block in the disk tier.
func (a *Agent) toDisk(id block.ID, v block.Version, data []byte) {
	if a.disk != nil {
		a.disk.Put(id, v, data)
	}
}

// dropDiskFile drops the disk tier's blocks of a file whose version
// changed: they can never hit again (lookups match versions exactly), so
// their frames are freed at once.
func (a *Agent) dropDiskFile(ino uint64) {
	if a.disk != nil {
		a.disk.RemoveFile(ino)
	}
}

func (a *Agent) closeDisk() error {
	if a.disk == nil {
		return nil
	}
	return a.disk.Close()
}
