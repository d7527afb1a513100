package writeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Tuning says when the background flusher writes back (the flags
// --write-back-delay and --write-back-high-water of mounts and proxies).
type Tuning struct {
	// Delay is how long a file's data may stay dirty before the background
	// flusher writes it back; default 30s.
	Delay time.Duration
	// HighWater is the fraction of the disk tier's frames that dirty
	// blocks may fill before the background flusher writes back the oldest
	// dirty files at once; default 0.5.
	HighWater float64
}

// SetDefaults fills in the zero fields.
func (t *Tuning) SetDefaults() {
	if t.Delay == 0 {
		t.Delay = 30 * time.Second
	}
	if t.HighWater == 0 {
		t.HighWater = 0.5
	}
}

// Validate says, in the flags' words, what is wrong with t (after
// SetDefaults); front ends call it with their own configuration.
func (t Tuning) Validate() error {
	switch {
	case t.Delay < 0:
		return fmt.Errorf("--write-back-delay %v is negative", t.Delay)
	case t.HighWater <= 0 || t.HighWater > 1:
		return fmt.Errorf("--write-back-high-water %v is not a fraction in (0, 1]", t.HighWater)
	}
	return nil
}

// Config configures an Engine.
type Config struct {
	Tuning
	// Dir is the disk cache directory: the journal (wbjournal.Name) lives
	// there, beside the disk tier's banks.
	Dir string
	// Disk is the disk tier whose dirty frames hold the dirty data; Mem is
	// the memory tier above it, which gets a copy of every block written.
	Disk *disk.Cache
	Mem  *mem.Cache
	// Upstream is how the logs name what the engine writes back to: "the
	// server", "the upstream".
	Upstream string
	// RequestTimeout bounds each delegation message; default 2m.
	RequestTimeout time.Duration
	// RecoverTimeout bounds the write-back at Start of what a previous run
	// left dirty (the rest is written back in the background); 0: none.
	RecoverTimeout time.Duration
	// CloseTimeout bounds the write-back at Close; what is left stays on
	// disk for the next run. Default 20s.
	CloseTimeout time.Duration
	// Mint, when set, gives a dirty file a new version at each write, the
	// version its readers are shown (Overlay) until it is written back: a
	// proxy's clients then drop what they cached of it, as after a write
	// through the server. Nil: readers are shown the version the dirty
	// blocks are tagged with (a mount).
	Mint   func() uint64
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	c.Tuning.SetDefaults()
	if c.Upstream == "" {
		c.Upstream = "the server"
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 2 * time.Minute
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 20 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	switch {
	case c.Disk == nil || c.Dir == "":
		return errors.New("--write-policy write-back needs a disk cache: add --disk-cache DIR")
	case c.Mem == nil:
		return errors.New("write-back: no memory tier")
	case c.RequestTimeout < 0 || c.RecoverTimeout < 0 || c.CloseTimeout < 0:
		return errors.New("write-back: a timeout is negative")
	}
	return c.Tuning.Validate()
}

// Frontend is what differs between a mount and a proxy toward the
// upstream: the connection the engine writes back and declares
// delegations on, and what a finished write-back means to the front end's
// caches.
type Frontend interface {
	// Call sends m upstream and returns the reply and the generation of
	// the connection it went on (a new connection has a new one).
	Call(ctx context.Context, m wire.Msg) (wire.Msg, uint64, error)
	// Gen returns the generation of the live connection, connecting if
	// there is none.
	Gen(ctx context.Context) (uint64, error)
	// Release closes handle h, opened on connection gen, if that one still
	// lives.
	Release(gen, h uint64)
	// NextSeq returns a new WriteSeq number for the connection's client.
	NextSeq() uint64
	// Settled says that file ino is written back: its blocks, tagged old
	// while dirty, are now at attr.Version with attr.Size (attr is zero
	// when the upstream's version is not known: nothing was written).
	// Called with the file's lock held; it must not call the engine.
	Settled(ino, old uint64, attr wire.Attr)
}

// NewFile describes a file as the front end knows it when a write makes it
// dirty: where and as whom it is written back, and the version and size
// its data has.
type NewFile struct {
	Ino  uint64
	Path string
	// Tag is the version its blocks are tagged with while dirty: the
	// upstream's version the front end has its clean blocks at.
	Tag  uint64
	Size int64
	// Caller is the writer's identity; without HasCaller the file is
	// written back without one (a proxy's client that sent no As).
	Caller    vfs.Caller
	HasCaller bool
	// Attr is the upstream's attributes last seen (AttrOf starts from them).
	Attr wire.Attr
}

// BlockRef names a block to fetch for a write or a read of a dirty file:
// the file's block idx, at the version its dirty blocks are tagged with,
// and where and as whom the file is written back.
type BlockRef struct {
	Ino, Index, Tag uint64
	Path            string
	Caller          vfs.Caller
	HasCaller       bool
}

// Fetch reads a block from upstream: the current content of a block that
// neither tier holds (it is not dirty: the upstream's copy is current).
type Fetch func(ctx context.Context, b BlockRef) ([]byte, error)

// Progress reports a write-back in progress: files and bytes written back
// so far, out of the totals when it started.
type Progress struct {
	Files, TotalFiles int
	Bytes, TotalBytes int64
}

// Stats counts what the engine did since it started.
type Stats struct {
	Recalls int64 // files recalled while dirty here
	Passes  int64 // write-backs of one file under one path (a flush's unit)
	Blocks  int64 // blocks written back
}
