package writeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/cache/wbjournal"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// File is a file with data written here and not yet written back.
//
// INVARIANT: every dirty disk frame of a file not on the stale list has a
// journal record (written and synced before the first PutDirtyLazy), so a
// restarted engine knows where to write it back.
type File struct {
	ino       uint64
	tag       uint64 // the version the dirty blocks are tagged with
	caller    vfs.Caller
	hasCaller bool

	// flushing serializes the file's write-backs; it is taken before mu.
	flushing sync.Mutex
	// mu serializes the file's writes, block by block, its removal and
	// the bookkeeping of its write-back (not the write-back's messages:
	// a writer does not wait for the network).
	mu     sync.Mutex
	blocks map[uint64]dirtyBlock // the dirty blocks by index; under mu
	gen    uint64                // counts writes, to tell a block rewritten during its write-back; under mu
	gone   bool                  // written back or dropped: take a new File; under mu

	// Under Engine.mu:
	path string // "" for an orphan (removed while open here): never written back
	// links are the file's other names made or seen here (Linked): when
	// path is removed, the data is written back under one of them.
	links map[string]struct{}
	size  int64     // as the writer sees it
	mtime int64     // of the last write
	since time.Time // when the file became dirty
	bytes int64     // dirty bytes (frames' data)
	attr  wire.Attr // the upstream's attributes last seen (AttrOf)
	shown uint64    // the version readers are shown (Config.Mint; else tag)
	// times is a setattr of atime/mtime made while dirty: the write-back
	// would overwrite it upstream, so it is applied again after.
	times *wire.SetAttr
}

// Ino is the file's id.
func (f *File) Ino() uint64 { return f.ino }

// dirtyBlock is a dirty block of a File: its data length and the write
// that made it.
type dirtyBlock struct {
	n   int
	gen uint64
}

// Engine is the write-back state of one mount or proxy: the dirty files,
// their journal and the background flusher. Safe for concurrent use.
type Engine struct {
	cfg     Config
	fe      Frontend
	log     *slog.Logger
	disk    *disk.Cache
	mem     *mem.Cache
	journal *wbjournal.Journal // file id → where to write it back

	mu     sync.Mutex
	files  map[uint64]*File
	opens  map[uint64]int // open files by file id (Opened): a removed dirty file still open is an orphan
	dirty  int64          // dirty bytes in all files
	frames int64          // dirty blocks (frames) in all files

	// Under mu: which files left the dirty set when (attr.go).
	epoch uint64            // counts files leaving the dirty set
	left  map[uint64]uint64 // file → the epoch it last left at
	floor uint64            // marks below it may have lost their entries in left

	// Under mu: delegations (deleg.go).
	returning map[uint64]chan struct{} // DelegateReturns on their way, by file: closed once answered
	declGen   uint64                   // the connection the last declaration of every file was for
	declDone  chan struct{}            // closed once that declaration is done

	// renaming is held shared by each rename through this front end from
	// its message until the dirty files follow it (AfterRename), and
	// taken exclusively to tell a file renamed under its write-back from
	// one removed (renamedAway). Taken before a File's mu.
	renaming sync.RWMutex

	started bool // Start ran (the flusher runs); under mu

	flushMu   sync.Mutex // one flush of everything at a time
	noDeleg   sync.Once  // the warning that the upstream grants no delegations
	closeOnce sync.Once
	closeErr  error
	stats     struct{ recalls, passes, blocks atomic.Int64 }
	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
}

// New opens the journal in cfg.Dir and returns an engine with no dirty
// file yet; Start recovers what a previous run left and starts the
// background flusher.
func New(cfg Config, fe Frontend) (*Engine, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	j, err := wbjournal.Open(cfg.Dir)
	if err != nil {
		return nil, err
	}
	return &Engine{cfg: cfg, fe: fe, log: cfg.Logger, disk: cfg.Disk, mem: cfg.Mem, journal: j,
		files: map[uint64]*File{}, opens: map[uint64]int{}, left: map[uint64]uint64{}, returning: map[uint64]chan struct{}{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{Recalls: e.stats.recalls.Load(), Passes: e.stats.passes.Load(), Blocks: e.stats.blocks.Load()}
}

// Holds reports whether file ino has dirty data here.
func (e *Engine) Holds(ino uint64) bool { return e.File(ino) != nil }

// File returns the dirty file ino, or nil.
func (e *Engine) File(ino uint64) *File {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.files[ino]
}

// Dirty reports whether any file has dirty data here.
func (e *Engine) Dirty() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.files) > 0
}

// Find returns the dirty file at path, or nil.
func (e *Engine) Find(path string) *File {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, df := range e.files {
		if _, link := df.links[path]; df.path == path || link {
			return df
		}
	}
	return nil
}

// Size returns the size of dirty file ino as its writers see it.
func (e *Engine) Size(ino uint64) (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if df, ok := e.files[ino]; ok {
		return df.size, true
	}
	return 0, false
}

// acquire returns the dirty record of the file nf names, locked, creating
// (journaling and declaring) it when the file has no dirty data yet.
func (e *Engine) acquire(ctx context.Context, nf NewFile) (*File, error) {
	for {
		e.mu.Lock()
		df, ok := e.files[nf.Ino]
		if !ok {
			now := time.Now()
			df = &File{ino: nf.Ino, tag: nf.Tag, caller: nf.Caller, hasCaller: nf.HasCaller, blocks: map[uint64]dirtyBlock{},
				path: nf.Path, size: nf.Size, mtime: now.UnixNano(), since: now, attr: nf.Attr, shown: nf.Tag}
		}
		e.mu.Unlock()
		df.mu.Lock()
		if ok && df.gone {
			df.mu.Unlock()
			continue
		}
		if ok {
			return df, nil
		}
		// A return of the file's previous delegation still on its way
		// would undo the declaration below at the upstream.
		if err := e.awaitReturn(ctx, nf.Ino); err != nil {
			df.mu.Unlock()
			return nil, err
		}
		if err := e.record(df); err != nil {
			df.mu.Unlock()
			return nil, err
		}
		e.mu.Lock()
		if _, raced := e.files[nf.Ino]; raced {
			e.mu.Unlock()
			df.mu.Unlock()
			continue
		}
		e.files[nf.Ino] = df
		e.mu.Unlock()
		e.delegate(ctx, df)
		return df, nil
	}
}

// noUID marks a journal record of a file written back without an
// identity (NewFile.HasCaller false).
const noUID = ^uint32(0)

// record writes df's journal record and syncs it. Called with df.mu held.
func (e *Engine) record(df *File) error {
	e.mu.Lock()
	r := wbjournal.Record{Version: df.tag, Caller: df.caller, Path: df.path}
	e.mu.Unlock()
	if !df.hasCaller {
		r.Caller = vfs.Caller{UID: noUID, GID: noUID}
	}
	if err := e.journal.Put(df.ino, r); err != nil {
		return fmt.Errorf("write-back: %v: %w", err, syscall.EIO)
	}
	return nil
}

// lockLive returns df with its lock held, or nil when df is nil or gone
// (written back or dropped: its data is no longer dirty here).
func lockLive(df *File) *File {
	if df == nil {
		return nil
	}
	df.mu.Lock()
	if df.gone {
		df.mu.Unlock()
		return nil
	}
	return df
}

// Written is what a Write leaves: the file as its writers see it.
type Written struct {
	Size  int64
	Mtime int64
	Tag   uint64    // the version its dirty blocks are tagged with
	Prev  uint64    // the version readers were shown right before the write
	Attr  wire.Attr // AttrOf the file after the write
}

// Write stores p at off of the file nf names: every block the write
// touches is completed from its current content (the tiers, else fetch)
// and stored as a dirty frame of the disk tier and in the memory tier.
// Once written there the data survives the process's death (the kernel
// keeps the bank files' pages); Sync makes it durable against a machine
// crash, and the background flusher syncs every second. A write past the
// end of the file fills the gap with zeros.
func (e *Engine) Write(ctx context.Context, nf NewFile, off int64, p []byte, fetch Fetch) (Written, error) {
	df, err := e.acquire(ctx, nf)
	if err != nil {
		return Written{}, err
	}
	defer df.mu.Unlock()
	e.mu.Lock()
	size := df.size
	e.mu.Unlock()
	bs := int64(e.disk.BlockSize())
	end := off + int64(len(p))
	for pos := min(off, size); pos < end; {
		idx := uint64(pos / bs)
		start := int64(idx) * bs
		n := min(bs-(pos-start), end-pos)
		base, err := e.base(ctx, df, idx, size, fetch)
		if err != nil {
			return Written{}, err
		}
		nb := make([]byte, max(int64(len(base)), pos-start+n))
		copy(nb, base)
		if lo := max(off, pos); lo < pos+n {
			copy(nb[lo-start:], p[lo-off:pos+n-off])
		}
		if err := e.putDirty(df, idx, nb); err != nil {
			return Written{}, err
		}
		pos += n
	}
	now := time.Now().UnixNano()
	e.mu.Lock()
	w := Written{Tag: df.tag, Prev: df.shown}
	df.size, df.mtime = max(df.size, end), now
	if e.cfg.Mint != nil {
		df.shown = e.cfg.Mint()
	}
	w.Size, w.Mtime = df.size, df.mtime
	w.Attr = df.attr
	w.Attr.Ino = df.ino
	e.overlayLocked(&w.Attr)
	e.mu.Unlock()
	return w, nil
}

// putDirty stores block idx of df as dirty, durably, and in memory.
// Called with df.mu held.
func (e *Engine) putDirty(df *File, idx uint64, data []byte) error {
	id, v := block.ID{File: df.ino, Index: idx}, block.Version(df.tag)
	if err := e.disk.PutDirtyLazy(id, v, data); err != nil {
		var full *disk.FullError
		if errors.As(err, &full) {
			e.nudge()
			return fmt.Errorf("write-back: %w", err)
		}
		e.mu.Lock()
		path := df.path
		e.mu.Unlock()
		return fmt.Errorf("write-back: store block %d of %s: %v: %w", idx, path, err, syscall.EIO)
	}
	e.mem.Put(id, v, data)
	prev, had := df.blocks[idx]
	df.gen++
	df.blocks[idx] = dirtyBlock{n: len(data), gen: df.gen}
	e.mu.Lock()
	df.bytes += int64(len(data) - prev.n)
	e.dirty += int64(len(data) - prev.n)
	if !had {
		e.frames++
	}
	over := e.overLocked()
	e.mu.Unlock()
	if over {
		e.nudge()
	}
	return nil
}

// base returns the current content of block idx of df, up to size: dirty
// or clean from the tiers, else from fetch. Called with df.mu held.
func (e *Engine) base(ctx context.Context, df *File, idx uint64, size int64, fetch Fetch) ([]byte, error) {
	bs := int64(e.disk.BlockSize())
	start := int64(idx) * bs
	if start >= size {
		return nil, nil
	}
	id, v := block.ID{File: df.ino, Index: idx}, block.Version(df.tag)
	data, ok := e.mem.Get(id, v)
	if !ok {
		if data, ok = e.disk.Get(id, v); ok {
			e.mem.Put(id, v, data)
		}
	}
	if !ok {
		e.mu.Lock()
		b := BlockRef{Ino: df.ino, Index: idx, Tag: df.tag, Path: df.path, Caller: df.caller, HasCaller: df.hasCaller}
		e.mu.Unlock()
		var err error
		if data, err = fetch(ctx, b); err != nil {
			return nil, err
		}
	}
	if lim := size - start; int64(len(data)) > lim {
		data = data[:lim]
	}
	return data, nil
}

// Read returns block idx of dirty file ino as its writers see it (its
// dirty and clean blocks here, the rest from fetch), with AttrOf the
// file; ok is false when the file is not dirty here.
func (e *Engine) Read(ctx context.Context, ino, idx uint64, fetch Fetch) (data []byte, at wire.Attr, ok bool, err error) {
	df := lockLive(e.File(ino))
	if df == nil {
		return nil, wire.Attr{}, false, nil
	}
	defer df.mu.Unlock()
	e.mu.Lock()
	size := df.size
	e.mu.Unlock()
	if data, err = e.base(ctx, df, idx, size, fetch); err != nil {
		return nil, wire.Attr{}, true, err
	}
	return data, e.AttrOf(df), true, nil
}

// DirtyData returns the dirty copy of block id, if the file holds one: a
// fetch that raced a write returns it instead of the upstream's older data.
func (e *Engine) DirtyData(id block.ID) ([]byte, bool) {
	df := e.File(id.File)
	if df == nil {
		return nil, false
	}
	return e.disk.Get(id, block.Version(df.tag))
}

// overLocked reports whether dirty blocks fill more than the high-water
// fraction of the disk tier's frames (frames, not bytes: a small file's
// block takes a whole frame). Called with e.mu held.
func (e *Engine) overLocked() bool {
	frames := e.disk.Capacity() / int64(e.disk.BlockSize())
	return float64(e.frames) > e.cfg.HighWater*float64(frames)
}

// Sync makes the dirty frames written so far durable (fsync, and close
// under --write-back-close-sync).
func (e *Engine) Sync() error {
	if err := e.disk.Sync(); err != nil {
		return fmt.Errorf("write-back: sync the disk cache: %v: %w", err, syscall.EIO)
	}
	return nil
}

// nudge wakes the background flusher.
func (e *Engine) nudge() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// PathOf returns the path dirty file ino is written back to; "" when it
// is not dirty here or is an orphan.
func (e *Engine) PathOf(ino uint64) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if df, ok := e.files[ino]; ok {
		return df.path
	}
	return ""
}
