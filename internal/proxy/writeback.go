package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/cache/wbjournal"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Write-back at the proxy (cache.WriteBack): a client's write completes
// here, in dirty frames of the disk tier (durable against the proxy's
// death once written, against a machine crash after the next sync), and
// reaches the upstream later: in the background, on demand (Flush), when
// the upstream recalls it, or before a change that needs it there (a
// truncation, a mode, fallocate).
//
// The proxy writes back on a connection of its own (ownSession), in its
// own name, as the identity of the client that opened the file. On that
// connection it holds the write delegations of its dirty files
// (DelegateWrite): an open of such a file by any other client of the
// upstream — direct, behind another proxy, or behind this one (its open is
// relayed on its own connection) — is recalled to this proxy, which writes
// the file back and then acks.
//
// Versions: while a file is dirty here its frames are tagged with the
// upstream version it had when it became dirty (so its clean cached blocks
// serve as the base of partial writes), and every write hands the clients
// a new version minted here (mintBit, never an upstream one): a
// client drops what it cached of the file at the old version, as after a
// write through the server, and reads the new data from the proxy.

// mintBit marks the versions the proxy hands out for its dirty files: bit
// 62 set and bit 63 clear. The server's own versions are either counted
// from its boot time in nanoseconds (below bit 62 until the year 2116) or
// derived from a file's state, with bit 63 set (the server's versions.go):
// neither is ever taken for a minted one.
const (
	mintBit    = 1 << 62
	derivedBit = 1 << 63
)

// isMinted reports whether v is a version minted here.
func isMinted(v uint64) bool { return v&(mintBit|derivedBit) == mintBit }

// noUID marks a journal record of a file opened without an identity (no
// As): it is written back without one.
const noUID = ^uint32(0)

// WriteBackConfig tunes the proxy's write-back policy.
type WriteBackConfig struct {
	// Delay is how long a file may stay dirty before the background
	// flusher writes it back; default 30s.
	Delay time.Duration
	// HighWater is the fraction of the disk tier's frames dirty blocks may
	// fill before the oldest files are written back at once; default 0.5.
	HighWater float64
}

func (c *WriteBackConfig) setDefaults() {
	if c.Delay == 0 {
		c.Delay = 30 * time.Second
	}
	if c.HighWater == 0 {
		c.HighWater = 0.5
	}
}

func (c WriteBackConfig) validate() error {
	switch {
	case c.Delay < 0:
		return fmt.Errorf("--write-back-delay %v is negative", c.Delay)
	case c.HighWater <= 0 || c.HighWater > 1:
		return fmt.Errorf("--write-back-high-water %v is not a fraction in (0, 1]", c.HighWater)
	}
	return nil
}

// dirtyFile is a file with writes not yet written back upstream.
//
// INVARIANT: every dirty disk frame of a file not on the stale list has a
// journal record (written and synced before the first PutDirtyLazy).
type dirtyFile struct {
	ino    uint64
	tag    uint64 // the version its frames are tagged with
	caller vfs.Caller
	hasAs  bool // caller is an identity (else written back without one)

	flushing sync.Mutex // serializes write-backs; taken before mu
	// mu serializes the writes, the removal and the bookkeeping.
	mu     sync.Mutex
	blocks map[uint64]dirtyBlock // under mu
	gen    uint64                // under mu
	gone   bool                  // written back or dropped; under mu

	// Under writeBack.mu:
	path  string
	attr  wire.Attr // the upstream's attributes last seen
	cur   uint64    // the version clients see (minted)
	size  int64
	mtime int64
	since time.Time
	bytes int64
}

type dirtyBlock struct {
	n   int
	gen uint64
}

// writeBack is the proxy's write-back state.
type writeBack struct {
	p       *Proxy
	cfg     WriteBackConfig
	c       *blockCache
	journal *wbjournal.Journal
	up      *ownSession

	minted atomic.Uint64
	seq    atomic.Uint64 // WriteSeq numbers of the own session

	mu     sync.Mutex
	files  map[uint64]*dirtyFile
	dirty  int64
	frames int64

	flushMu sync.Mutex
	noDeleg sync.Once
	recalls atomic.Int64
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// mint returns a new version for clients of a dirty file.
func (w *writeBack) mint() uint64 { return mintBit | w.minted.Add(1) }

// file returns the dirty file ino, or nil.
func (w *writeBack) file(ino uint64) *dirtyFile {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.files[ino]
}

// holds reports whether file ino is dirty here.
func (w *writeBack) holds(ino uint64) bool { return w.file(ino) != nil }

// overlay shows a dirty file as its writers see it here: the size, mtime
// and version of its writes over the upstream's attributes.
func (w *writeBack) overlay(at *wire.Attr) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	df, ok := w.files[at.Ino]
	if !ok {
		return
	}
	df.attr = *at
	at.Size, at.Version = max(at.Size, uint64(df.size)), df.cur
	at.Blocks = (at.Size + 511) / 512
	at.Mtime, at.Ctime = max(at.Mtime, df.mtime), max(at.Ctime, df.mtime)
}

// attrOf returns df's attributes as clients see them.
func (w *writeBack) attrOf(df *dirtyFile) wire.Attr {
	w.mu.Lock()
	a := df.attr
	w.mu.Unlock()
	w.overlay(&a)
	return a
}

// acquire returns the dirty record of the file handle hd is open on,
// locked, creating (journaling and delegating) it first if needed.
func (w *writeBack) acquire(ctx context.Context, hd handle) (*dirtyFile, error) {
	for {
		w.mu.Lock()
		df, ok := w.files[hd.ino]
		if !ok {
			tag := hd.attr.Version
			if fv, known := w.c.current(hd.ino); known && !isMinted(fv.version) {
				tag = fv.version
			}
			now := time.Now()
			df = &dirtyFile{ino: hd.ino, tag: tag, caller: hd.caller, hasAs: hd.hasAs, blocks: map[uint64]dirtyBlock{},
				path: hd.path, attr: hd.attr, cur: tag, size: int64(hd.attr.Size), mtime: now.UnixNano(), since: now}
			if fv, known := w.c.current(hd.ino); known && fv.version == tag {
				df.size = int64(fv.size)
			}
		}
		w.mu.Unlock()
		df.mu.Lock()
		if ok && df.gone {
			df.mu.Unlock()
			continue
		}
		if ok {
			return df, nil
		}
		if err := w.record(df); err != nil {
			df.mu.Unlock()
			return nil, err
		}
		w.mu.Lock()
		if _, raced := w.files[hd.ino]; raced {
			w.mu.Unlock()
			df.mu.Unlock()
			continue
		}
		w.files[hd.ino] = df
		w.mu.Unlock()
		w.delegate(ctx, hd.ino)
		return df, nil
	}
}

// record journals df's destination. Called with df.mu held.
func (w *writeBack) record(df *dirtyFile) error {
	w.mu.Lock()
	r := wbjournal.Record{Version: df.tag, Caller: df.caller, Path: df.path}
	w.mu.Unlock()
	if !df.hasAs {
		r.Caller = vfs.Caller{UID: noUID, GID: noUID}
	}
	if err := w.journal.Put(df.ino, r); err != nil {
		return fmt.Errorf("write-back: %v: %w", err, syscall.EIO)
	}
	return nil
}

// write stores a client's write in dirty frames and returns the file's
// attributes after it and the version clients saw right before it. Blocks
// it covers partly are completed from their current content; a gap past
// the end of the file is zeros.
func (w *writeBack) write(ctx context.Context, cl *client, h uint64, hd handle, off uint64, p []byte) (wire.Attr, uint64, error) {
	df, err := w.acquire(ctx, hd)
	if err != nil {
		return wire.Attr{}, 0, err
	}
	defer df.mu.Unlock()
	w.mu.Lock()
	size := df.size
	w.mu.Unlock()
	bs := int64(w.c.blockSize)
	start, end := int64(off), int64(off)+int64(len(p))
	for pos := min(start, size); pos < end; {
		idx := uint64(pos / bs)
		bstart := int64(idx) * bs
		n := min(bs-(pos-bstart), end-pos)
		base, err := w.base(ctx, cl, h, df, idx, size)
		if err != nil {
			return wire.Attr{}, 0, err
		}
		nb := make([]byte, max(int64(len(base)), pos-bstart+n))
		copy(nb, base)
		if lo := max(start, pos); lo < pos+n {
			copy(nb[lo-bstart:], p[lo-start:pos+n-start])
		}
		if err := w.putDirty(df, idx, nb); err != nil {
			return wire.Attr{}, 0, err
		}
		pos += n
	}
	now := time.Now().UnixNano()
	w.mu.Lock()
	prev := df.cur
	df.size, df.mtime, df.cur = max(df.size, end), now, w.mint()
	w.mu.Unlock()
	return w.attrOf(df), prev, nil
}

// putDirty stores block idx of df as dirty (lazily synced) and in memory.
// Called with df.mu held.
func (w *writeBack) putDirty(df *dirtyFile, idx uint64, data []byte) error {
	id := block.ID{File: df.ino, Index: idx}
	if err := w.c.disk.PutDirtyLazy(id, block.Version(df.tag), data); err != nil {
		var full *disk.FullError
		if errors.As(err, &full) {
			w.nudge()
			return fmt.Errorf("write-back at the proxy: %w", err)
		}
		return fmt.Errorf("write-back at the proxy: store block %d of %s: %v: %w", idx, df.path, err, syscall.EIO)
	}
	w.c.mem.Put(id, block.Version(df.tag), data)
	prev, had := df.blocks[idx]
	df.gen++
	df.blocks[idx] = dirtyBlock{n: len(data), gen: df.gen}
	w.mu.Lock()
	df.bytes += int64(len(data) - prev.n)
	w.dirty += int64(len(data) - prev.n)
	if !had {
		w.frames++
	}
	over := w.overLocked()
	w.mu.Unlock()
	if over {
		w.nudge()
	}
	return nil
}

// overLocked reports whether dirty blocks fill more than the high-water
// fraction of the disk tier's frames. Called with w.mu held.
func (w *writeBack) overLocked() bool {
	frames := w.c.disk.Capacity() / int64(w.c.disk.BlockSize())
	return float64(w.frames) > w.cfg.HighWater*float64(frames)
}

// base returns the current content of block idx of df, up to size: from
// the tiers, else from the upstream (through the client's handle, or, if
// that one cannot read, through a read-only open of the proxy's own).
// Called with df.mu held.
func (w *writeBack) base(ctx context.Context, cl *client, h uint64, df *dirtyFile, idx uint64, size int64) ([]byte, error) {
	bs := int64(w.c.blockSize)
	start := int64(idx) * bs
	if start >= size {
		return nil, nil
	}
	data, ok := w.c.get(block.ID{File: df.ino, Index: idx}, df.tag)
	if !ok {
		var err error
		if data, err = w.fetchBase(ctx, cl, h, df, idx); err != nil {
			return nil, err
		}
	}
	if lim := size - start; int64(len(data)) > lim {
		data = data[:lim]
	}
	return data, nil
}

// fetchBase reads block idx of df upstream and keeps it at df's tag: the
// upstream's content of a block not dirty here is the current one, whatever
// version partial write-backs gave the file.
func (w *writeBack) fetchBase(ctx context.Context, cl *client, h uint64, df *dirtyFile, idx uint64) ([]byte, error) {
	req := &wire.ReadBlock{Handle: h, File: df.ino, Index: idx, Version: df.tag}
	r, err := cl.call(ctx, req)
	if err != nil {
		// A write-only handle: read through one of our own.
		r, err = w.up.readBlock(ctx, df, idx)
	}
	if err != nil {
		return nil, fmt.Errorf("write-back at the proxy: read block %d of %s to complete a write: %w", idx, df.path, err)
	}
	br, ok := r.(*wire.BlockReply)
	if !ok || br.Forwarded {
		return nil, fmt.Errorf("write-back at the proxy: read block %d of %s: unexpected reply %v: %w", idx, df.path, r.Type(), syscall.EIO)
	}
	w.c.fill(block.ID{File: df.ino, Index: idx}, df.tag, br.Data)
	return br.Data, nil
}

// read serves a client's block read of a dirty file from the dirty state:
// its dirty and clean blocks here, the rest upstream. ok is false when the
// file is not dirty here.
func (w *writeBack) read(ctx context.Context, cl *client, m *wire.ReadBlock) (wire.Msg, bool, error) {
	df := w.file(m.File)
	if df == nil || !cl.mayRead(m.Handle, m.File) {
		return nil, false, nil
	}
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone {
		return nil, false, nil
	}
	w.mu.Lock()
	size := df.size
	w.mu.Unlock()
	data, err := w.base(ctx, cl, m.Handle, df, m.Index, size)
	if err != nil {
		return nil, true, err
	}
	a := w.attrOf(df)
	w.p.metrics.CountRead(obs.LayerProxy, len(data))
	return &wire.BlockReply{Version: a.Version, Size: a.Size, Layer: wire.LayerProxy, Data: data}, true, nil
}

// sync makes the dirty frames written so far durable (fsync).
func (w *writeBack) sync() error {
	if err := w.c.disk.Sync(); err != nil {
		return fmt.Errorf("write-back at the proxy: sync the disk cache: %v: %w", err, syscall.EIO)
	}
	return nil
}

// nudge wakes the background flusher.
func (w *writeBack) nudge() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// find returns the dirty file at path.
func (w *writeBack) find(path string) *dirtyFile {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, df := range w.files {
		if df.path == path {
			return df
		}
	}
	return nil
}

// removed drops the dirty data of the file at path (unlinked or renamed
// over): it goes on the stale list and is never written back.
func (w *writeBack) removed(path string) {
	df := w.find(path)
	if df == nil {
		return
	}
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone {
		return
	}
	if err := w.c.disk.MarkStale(df.ino); err != nil {
		w.p.log.Warn("write-back: putting a removed file on the stale list", "path", path, "err", err)
	}
	w.c.mem.RemoveFile(df.ino)
	w.forget(df)
}

// renamed moves the dirty files at or under oldPath to newPath, and the
// clients' handles with them.
func (w *writeBack) renamed(oldPath, newPath string) {
	under := func(p string) bool { return p == oldPath || strings.HasPrefix(p, oldPath+"/") }
	w.mu.Lock()
	var moved []*dirtyFile
	for _, df := range w.files {
		if under(df.path) {
			df.path = newPath + df.path[len(oldPath):]
			moved = append(moved, df)
		}
	}
	w.mu.Unlock()
	for _, df := range moved {
		df.mu.Lock()
		if !df.gone {
			if err := w.record(df); err != nil {
				w.p.log.Warn("write-back: recording a renamed file", "path", newPath, "err", err)
			}
		}
		df.mu.Unlock()
	}
}

// afterRename updates the dirty files after a rename the upstream did.
func (w *writeBack) afterRename(oldPath, newPath string, flags uint32) {
	const exchange = 2 // RENAME_EXCHANGE
	if flags&exchange != 0 {
		tmp := "\x00exchange"
		w.renamed(oldPath, tmp)
		w.renamed(newPath, oldPath)
		w.renamed(tmp, newPath)
		return
	}
	w.removed(newPath)
	w.renamed(oldPath, newPath)
}

// forget drops df from the dirty files and the journal and returns its
// delegation. Called with df.mu held.
func (w *writeBack) forget(df *dirtyFile) {
	df.gone = true
	w.mu.Lock()
	if w.files[df.ino] == df {
		delete(w.files, df.ino)
	}
	w.dirty -= df.bytes
	w.frames -= int64(len(df.blocks))
	w.mu.Unlock()
	if err := w.journal.Delete(df.ino); err != nil {
		w.p.log.Warn("write-back", "err", err)
	}
	w.giveBack(df.ino)
}
