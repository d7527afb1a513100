package disk

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/coopfs/coopfs/internal/block"
)

// Defaults for Config's zero fields.
const (
	DefaultSize  = 1 << 30 // 1 GiB
	DefaultBanks = 64
	DefaultAssoc = 16
)

// WriteBackFunc writes a dirty block back to its origin (the server). It is
// called with the lock of the block's bank held: it must not call the Cache.
// data is only valid during the call.
type WriteBackFunc func(id block.ID, v block.Version, data []byte) error

// Config configures a disk cache.
type Config struct {
	// Dir is the cache directory; it is created if missing.
	Dir string
	// Size bounds the frames' data, in bytes; it is rounded down to a
	// multiple of Banks × Assoc × BlockSize. Zero means DefaultSize.
	Size int64
	// BlockSize is the data length of one frame: the export's block size.
	BlockSize int
	// Banks is the number of bank files. Zero means DefaultBanks, lowered
	// as needed so that every bank holds at least one set.
	Banks int
	// Assoc is the number of frames (ways) per set, at least 2 (a dirty
	// block's new copy goes to another way). Zero means DefaultAssoc,
	// lowered to 2 for small caches.
	Assoc int
	// WriteBack writes back a dirty frame chosen for eviction. Nil means
	// dirty frames are never evicted: a set full of dirty frames refuses new
	// blocks (PutDirty returns a *FullError).
	WriteBack WriteBackFunc
	// OnEvict, if set, is called for every block the cache drops on its
	// own: the victim of a Put, or the old copy of a block whose new data
	// is too big to store (not Remove, RemoveFile, Truncate or a stale
	// file's frames). It runs after the bank's lock is released, on the
	// goroutine that called Put; it may call the cache.
	OnEvict func(id block.ID, v block.Version)
	// Logger receives warnings (I/O errors, corrupt frames); nil discards.
	Logger *slog.Logger
	// Seed seeds the random choice of victims (tests); zero picks one.
	Seed uint64
}

// ErrConfig is wrapped by the errors Open returns for a bad Config.
var ErrConfig = errors.New("invalid disk cache config")

// geometry is the shape of a cache directory; it is stored in the
// superblock and must match when a directory is reopened.
type geometry struct {
	BlockSize int
	Banks     int
	Assoc     int
	Sets      int // per bank
}

func (g geometry) framesPerBank() int { return g.Sets * g.Assoc }
func (g geometry) frames() int        { return g.Banks * g.framesPerBank() }
func (g geometry) capacity() int64    { return int64(g.frames()) * int64(g.BlockSize) }

// tagArea is the byte length of a bank file's tag area.
func (g geometry) tagArea() int64 {
	n := int64(g.framesPerBank()) * tagSize
	return (n + 4095) &^ 4095
}

func (g geometry) frameOff(f int) int64 { return g.tagArea() + int64(f)*int64(g.BlockSize) }
func (g geometry) bankSize() int64      { return g.frameOff(g.framesPerBank()) }

func (c Config) withDefaults() Config {
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("no directory given; pass --disk-cache DIR")
	case c.BlockSize <= 0:
		return fmt.Errorf("block size %d must be positive", c.BlockSize)
	case c.Size < 0:
		return fmt.Errorf("size %d is negative; give a size like 20GiB", c.Size)
	case c.Banks < 0:
		return fmt.Errorf("%d banks; give a positive number (or 0 for the default %d)", c.Banks, DefaultBanks)
	case c.Assoc == 1 || c.Assoc < 0:
		return fmt.Errorf("associativity %d; give at least 2 (a dirty block's new copy needs another way)", c.Assoc)
	}
	return nil
}

// geometry works out the shape from a validated Config.
func (c Config) geometry() (geometry, error) {
	frames := c.Size / int64(c.BlockSize)
	g := geometry{BlockSize: c.BlockSize, Banks: c.Banks, Assoc: c.Assoc}
	if g.Assoc == 0 {
		g.Assoc = DefaultAssoc
		for g.Assoc > 2 && frames < int64(g.Assoc)*2 {
			g.Assoc /= 2
		}
	}
	if g.Banks == 0 {
		g.Banks = DefaultBanks
		for g.Banks > 1 && frames < int64(g.Banks*g.Assoc) {
			g.Banks /= 2
		}
	}
	perSet := int64(g.Banks * g.Assoc)
	if frames < perSet {
		return g, fmt.Errorf("size %v holds %d blocks of %v, fewer than banks × assoc = %d; give a larger --disk-cache-size or fewer --disk-banks/--disk-assoc",
			block.Size(c.Size), frames, block.Size(c.BlockSize), perSet)
	}
	if frames/perSet > 1<<30 {
		return g, fmt.Errorf("%d sets per bank is too many; give more --disk-banks", frames/perSet)
	}
	g.Sets = int(frames / perSet)
	return g, nil
}
