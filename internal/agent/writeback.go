package agent

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
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/cache/wbjournal"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// WriteBackConfig tunes the write-back policy (cache.WriteBack).
type WriteBackConfig struct {
	// Delay is how long a file's data may stay dirty before the background
	// flusher writes it back; default 30s.
	Delay time.Duration
	// HighWater is the fraction of the disk tier's frames that dirty
	// blocks may fill before the background flusher writes back the oldest
	// dirty files at once; default 0.5.
	HighWater float64
	// NoCloseSync leaves the sync of dirty frames to fsync and the
	// background flusher (every second): a close then costs no disk sync,
	// but a machine crash may take writes closed in the last second.
	NoCloseSync bool
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
		return fmt.Errorf("write-back delay %v is negative", c.Delay)
	case c.HighWater <= 0 || c.HighWater > 1:
		return fmt.Errorf("--write-back-high-water %v is not a fraction in (0, 1]", c.HighWater)
	}
	return nil
}

// dirtyFile is a file with data written locally and not yet written back.
//
// INVARIANT: every dirty disk frame of a file not on the stale list has a
// journal record (written and synced before the first PutDirty), so a
// restarted agent knows where to write it back.
type dirtyFile struct {
	ino     uint64
	version uint64 // the server version the dirty blocks are tagged with
	caller  vfs.Caller

	// flushing serializes the file's write-backs; it is taken before mu.
	flushing sync.Mutex
	// mu serializes the file's writes, block by block, its removal and
	// the bookkeeping of its write-back (not the write-back's messages:
	// a writer does not wait for the network).
	mu     sync.Mutex
	blocks map[uint64]dirtyBlock // the dirty blocks by index; under mu
	gen    uint64                // counts writes, to tell a block rewritten during its write-back; under mu
	gone   bool                  // written back or dropped: take a new dirtyFile; under mu
	files  []*file               // open files that wrote through this record; under mu

	// Under writeBack.mu:
	path  string
	size  int64
	mtime int64
	since time.Time // when the file became dirty
	bytes int64     // dirty bytes (frames' data)
	// times is a setattr of atime/mtime made while dirty: the write-back
	// would overwrite it on the server, so it is applied again after.
	times *wire.SetAttr
}

// dirtyBlock is a dirty block of a dirtyFile: its data length and the
// write that made it.
type dirtyBlock struct {
	n   int
	gen uint64
}

// writeBack is the agent's write-back state: the dirty files, their
// crash-safe journal, and the background flusher.
type writeBack struct {
	a       *Agent
	cfg     WriteBackConfig
	journal *wbjournal.Journal // file id → where to write it back

	mu     sync.Mutex
	files  map[uint64]*dirtyFile
	dirty  int64              // dirty bytes in all files
	frames int64              // dirty blocks (frames) in all files
	open   map[*file]struct{} // the open files, whose paths follow renames

	// Under mu: which files left the dirty set when (writeback_attr.go).
	epoch uint64            // counts files leaving the dirty set
	left  map[uint64]uint64 // file → the epoch it last left at
	floor uint64            // marks below it may have lost their entries in left

	// renaming is held shared by each rename through this agent from its
	// message until the dirty files follow it (afterRename), and taken
	// exclusively to tell a file renamed under its write-back from one
	// removed (renamedAway). Taken before a dirtyFile's mu.
	renaming sync.RWMutex

	flushMu sync.Mutex // one flush of everything at a time
	noDeleg sync.Once  // the warning that the server grants no delegations
	recalls atomic.Int64
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// writePolicy returns the mount's write policy.
func (a *Agent) writePolicy() cache.WritePolicy { return a.cfg.WritePolicy }

// writeAccess reports whether open flags ask to modify the file.
func writeAccess(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_CREAT) != 0
}

// errReadOnly is returned for writes under the read-only policy.
var errReadOnly = fmt.Errorf("the mount's write policy is read-only: %w", syscall.EROFS)

// holds reports whether file ino has dirty data here.
func (w *writeBack) holds(ino uint64) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.files[ino]
	return ok
}

// acquire returns f's dirty-file record, locked, creating (and journaling)
// it when the file has no dirty data yet.
func (w *writeBack) acquire(ctx context.Context, f *file) (*dirtyFile, error) {
	f.mu.Lock()
	ino, v, size, path := f.attr.Ino, f.attr.Version, int64(f.attr.Size), f.path
	f.mu.Unlock()
	for {
		w.mu.Lock()
		df, ok := w.files[ino]
		if !ok {
			df = &dirtyFile{ino: ino, version: v, caller: f.caller, blocks: map[uint64]dirtyBlock{},
				path: path, size: size, mtime: time.Now().UnixNano(), since: time.Now()}
		}
		w.mu.Unlock()
		df.mu.Lock()
		if ok && df.gone {
			df.mu.Unlock()
			continue
		}
		if !ok {
			if err := w.record(df); err != nil {
				df.mu.Unlock()
				return nil, err
			}
			w.mu.Lock()
			if _, raced := w.files[ino]; raced {
				w.mu.Unlock()
				df.mu.Unlock()
				continue
			}
			w.files[ino] = df
			w.mu.Unlock()
			w.delegate(ctx, ino)
		}
		df.register(f)
		return df, nil
	}
}

// register makes f see the record's version: its blocks are tagged so.
func (df *dirtyFile) register(f *file) {
	for _, g := range df.files {
		if g == f {
			return
		}
	}
	df.files = append(df.files, f)
	f.mu.Lock()
	f.attr.Version = df.version
	f.mu.Unlock()
}

// write is WriteAt under the write-back policy: every block the write
// touches is completed from its current content and stored as a dirty disk
// frame and in the memory tier. Once written there the data survives the
// mount process's death (SIGKILL: the kernel keeps the bank files' pages);
// fsync syncs the frames, and so does the background flusher every second,
// which bounds what a machine crash can take. A write past the end of the file
// fills the gap with zeros.
func (w *writeBack) write(ctx context.Context, f *file, p []byte, off int64) (int, error) {
	df, err := w.acquire(ctx, f)
	if err != nil {
		return 0, err
	}
	defer df.mu.Unlock()
	w.mu.Lock()
	size := df.size
	w.mu.Unlock()
	bs := int64(w.a.BlockSize())
	end := off + int64(len(p))
	for pos := min(off, size); pos < end; {
		idx := uint64(pos / bs)
		start := int64(idx) * bs
		n := min(bs-(pos-start), end-pos)
		base, err := w.base(ctx, f, df, idx, size)
		if err != nil {
			return 0, err
		}
		nb := make([]byte, max(int64(len(base)), pos-start+n))
		copy(nb, base)
		if lo := max(off, pos); lo < pos+n {
			copy(nb[lo-start:], p[lo-off:pos+n-off])
		}
		if err := w.putDirty(df, idx, nb); err != nil {
			return 0, err
		}
		pos += n
	}
	now := time.Now().UnixNano()
	w.mu.Lock()
	df.size, df.mtime = max(df.size, end), now
	size = df.size
	w.mu.Unlock()
	f.mu.Lock()
	f.attr.Size, f.attr.Mtime, f.attr.Ctime = uint64(size), now, now
	f.mu.Unlock()
	return len(p), nil
}

// putDirty stores block idx of df as dirty, durably, and in memory.
func (w *writeBack) putDirty(df *dirtyFile, idx uint64, data []byte) error {
	id := block.ID{File: df.ino, Index: idx}
	v := block.Version(df.version)
	if err := w.a.disk.c.PutDirtyLazy(id, v, data); err != nil {
		var full *disk.FullError
		if errors.As(err, &full) {
			w.nudge()
			return fmt.Errorf("write-back: %w", err)
		}
		return fmt.Errorf("write-back: store block %d of %s: %v: %w", idx, df.path, err, syscall.EIO)
	}
	w.a.cache.Put(id, v, data)
	prev, had := df.blocks[idx]
	old := prev.n
	df.gen++
	df.blocks[idx] = dirtyBlock{n: len(data), gen: df.gen}
	w.mu.Lock()
	df.bytes += int64(len(data) - old)
	w.dirty += int64(len(data) - old)
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

// base returns the current content of block idx of df (at most up to the
// file's size here): dirty or clean from the tiers, else from the server.
func (w *writeBack) base(ctx context.Context, f *file, df *dirtyFile, idx uint64, size int64) ([]byte, error) {
	bs := int64(w.a.BlockSize())
	start := int64(idx) * bs
	if start >= size {
		return nil, nil
	}
	id, v := block.ID{File: df.ino, Index: idx}, block.Version(df.version)
	data, ok := w.a.cache.Get(id, v)
	if !ok {
		data, ok = w.a.disk.c.Get(id, v)
	}
	if !ok {
		var err error
		if data, err = f.block(ctx, idx, false); err != nil {
			return nil, err
		}
	}
	if lim := size - start; int64(len(data)) > lim {
		data = data[:lim]
	}
	return data, nil
}

// overLocked reports whether dirty blocks fill more than the high-water
// fraction of the disk tier's frames (frames, not bytes: a small file's
// block takes a whole frame). Called with w.mu held.
func (w *writeBack) overLocked() bool {
	frames := w.a.disk.c.Capacity() / int64(w.a.disk.c.BlockSize())
	return float64(w.frames) > w.cfg.HighWater*float64(frames)
}

// sync makes the dirty frames written so far durable: fsync and close of
// a file under write-back.
func (w *writeBack) sync() error {
	if err := w.a.disk.c.Sync(); err != nil {
		return fmt.Errorf("write-back: sync the disk cache: %v: %w", err, syscall.EIO)
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

// dirtyData returns the dirty copy of block id, if the file holds one: a
// fetch that raced a write returns it instead of the server's older data.
func (w *writeBack) dirtyData(id block.ID) ([]byte, bool) {
	if w == nil {
		return nil, false
	}
	w.mu.Lock()
	df, ok := w.files[id.File]
	w.mu.Unlock()
	if !ok {
		return nil, false
	}
	return w.a.disk.c.Get(id, block.Version(df.version))
}

// opened and released keep the set of open files.
func (w *writeBack) opened(f *file) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.open[f] = struct{}{}
	w.mu.Unlock()
}

func (w *writeBack) released(f *file) {
	if w == nil {
		return
	}
	f.mu.Lock()
	ino := f.attr.Ino
	f.mu.Unlock()
	w.mu.Lock()
	delete(w.open, f)
	df := w.files[ino]
	orphan := df != nil && df.path == "" && !w.openLocked(ino)
	w.mu.Unlock()
	if orphan {
		// The last open file of a removed file is closed: its data goes.
		df.mu.Lock()
		if !df.gone {
			w.drop(df)
		}
		df.mu.Unlock()
	}
}

// openLocked reports whether a file open here is ino. Called with w.mu held.
func (w *writeBack) openLocked(ino uint64) bool {
	for g := range w.open {
		g.mu.Lock()
		same := g.attr.Ino == ino
		g.mu.Unlock()
		if same {
			return true
		}
	}
	return false
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

// removed is called after path was unlinked or renamed over: its dirty
// data is put on the stale list and never written back. A file still open
// here becomes an orphan: its open files keep reading and writing its data
// until the last one is closed, but it is never written back — its journal
// record loses its path, so a restart drops it too (wbjournal.Recover puts
// it on the stale list).
func (w *writeBack) removed(path string) {
	if w == nil {
		return
	}
	df := w.find(path)
	if df == nil {
		return
	}
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone {
		return
	}
	w.mu.Lock()
	open := w.openLocked(df.ino)
	if open {
		df.path = ""
	}
	w.mu.Unlock()
	if !open {
		w.drop(df)
		return
	}
	if err := w.record(df); err != nil {
		w.a.log.Warn("write-back: recording a removed file that is still open", "path", path, "err", err)
	}
	w.giveBack(df.ino)
}

// drop puts df on the stale list and forgets it. Called with df.mu held.
func (w *writeBack) drop(df *dirtyFile) {
	if err := w.a.disk.c.MarkStale(df.ino); err != nil {
		w.a.log.Warn("write-back: putting a removed file on the stale list", "file", df.ino, "err", err)
	}
	w.a.cache.RemoveFile(df.ino)
	w.forget(df)
}

// renamed is called after oldPath was renamed to newPath: dirty files at
// or under oldPath are written back to their new path.
func (w *writeBack) renamed(oldPath, newPath string) {
	if w == nil {
		return
	}
	under := func(p string) bool { return p == oldPath || strings.HasPrefix(p, oldPath+"/") }
	w.mu.Lock()
	var moved []*dirtyFile
	for _, df := range w.files {
		if under(df.path) {
			df.path = newPath + df.path[len(oldPath):]
			moved = append(moved, df)
		}
	}
	for f := range w.open {
		// An open file renamed writes (and is written back) under its new name.
		f.mu.Lock()
		if under(f.path) {
			f.path = newPath + f.path[len(oldPath):]
		}
		f.mu.Unlock()
	}
	w.mu.Unlock()
	for _, df := range moved {
		df.mu.Lock()
		if !df.gone {
			if err := w.record(df); err != nil {
				w.a.log.Warn("write-back: recording a renamed file", "path", newPath, "err", err)
			}
		}
		df.mu.Unlock()
	}
}

// discard drops file ino's dirty data (an open with O_TRUNC emptied it on
// the server).
func (w *writeBack) discard(ino uint64) {
	if w == nil {
		return
	}
	w.mu.Lock()
	df, ok := w.files[ino]
	w.mu.Unlock()
	if !ok {
		return
	}
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone {
		return
	}
	if err := w.a.disk.c.Truncate(ino, 0); err != nil {
		w.a.log.Warn("write-back: dropping a truncated file's dirty data", "path", df.path, "err", err)
	}
	w.a.cache.RemoveFile(ino)
	w.forget(df)
}

// forget drops df from the dirty files and the journal. Called with df.mu held.
func (w *writeBack) forget(df *dirtyFile) {
	df.gone = true
	w.mu.Lock()
	if w.files[df.ino] == df {
		delete(w.files, df.ino)
	}
	w.leftLocked(df.ino)
	w.dirty -= df.bytes
	w.frames -= int64(len(df.blocks))
	w.mu.Unlock()
	if err := w.journal.Delete(df.ino); err != nil {
		w.a.log.Warn("write-back: journal", "err", err)
	}
	w.giveBack(df.ino)
}

// beforeSetAttr prepares a setattr of a dirty file. A truncation drops
// the dirty data past the new size and writes the rest back, so the server
// truncates the data the writer saw (and a later write-back cannot undo
// it); so does a mode that takes the owner's write permission away (the
// write-back needs it). Times set explicitly (touch, tar) are kept and set
// again after the write-back, which would change them on the server.
// Other changes (owner, mode) go to the server as they are.
func (w *writeBack) beforeSetAttr(ctx context.Context, path string, of *file, in vfs.SetAttrIn) error {
	if w == nil {
		return nil
	}
	df := w.dirtyOf(path, of)
	if df == nil {
		return nil
	}
	if in.Valid&wire.SetSize != 0 {
		if err := w.truncate(df, int64(in.Size)); err != nil {
			return err
		}
	}
	if in.Valid&wire.SetSize != 0 || (in.Valid&wire.SetMode != 0 && in.Mode&0o200 == 0) {
		_, err := w.flushFile(ctx, df, nil)
		return err
	}
	if tv := in.Valid & (wire.SetAtime | wire.SetMtime | wire.SetAtimeNow | wire.SetMtimeNow); tv != 0 {
		now := time.Now().UnixNano()
		w.mu.Lock()
		t := df.times
		if t == nil {
			t = &wire.SetAttr{}
		}
		if tv&(wire.SetAtime|wire.SetAtimeNow) != 0 {
			t.Valid, t.Atime = t.Valid&^(wire.SetAtimeNow)|wire.SetAtime, in.Atime
			if tv&wire.SetAtimeNow != 0 {
				t.Atime = now
			}
		}
		if tv&(wire.SetMtime|wire.SetMtimeNow) != 0 {
			t.Valid, t.Mtime = t.Valid&^(wire.SetMtimeNow)|wire.SetMtime, in.Mtime
			if tv&wire.SetMtimeNow != 0 {
				t.Mtime = now
			}
		}
		df.times = t
		w.mu.Unlock()
	}
	return nil
}

// dirtyOf returns the dirty file an open file or a path names, if any.
func (w *writeBack) dirtyOf(path string, of *file) *dirtyFile {
	if of == nil {
		return w.find(path)
	}
	of.mu.Lock()
	ino := of.attr.Ino
	of.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.files[ino]
}

// truncate drops df's dirty data past size.
func (w *writeBack) truncate(df *dirtyFile, size int64) error {
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone {
		return nil
	}
	if err := w.a.disk.c.Truncate(df.ino, size); err != nil {
		return fmt.Errorf("write-back: truncate %s: %v: %w", df.path, err, syscall.EIO)
	}
	w.a.cache.RemoveFile(df.ino)
	bs := int64(w.a.BlockSize())
	var freed, gone int64
	for idx, b := range df.blocks {
		start, n := int64(idx)*bs, int64(b.n)
		switch {
		case start >= size:
			delete(df.blocks, idx)
			freed += n
			gone++
		case start+n > size:
			df.gen++
			df.blocks[idx] = dirtyBlock{n: int(size - start), gen: df.gen}
			freed += start + n - size
		}
	}
	w.mu.Lock()
	df.bytes -= freed
	w.dirty -= freed
	w.frames -= gone
	df.size = min(df.size, size)
	w.mu.Unlock()
	return nil
}

// wbReconnected declares the dirty files again on a new connection; wb
// is set only after the first one.
func (a *Agent) wbReconnected() {
	a.wbMu.Lock()
	w := a.wb
	a.wbMu.Unlock()
	w.reconnected()
}

// wbCloseTimeout bounds the write-back at unmount; what is left stays on
// disk and is written back by the next mount.
const wbCloseTimeout = 20 * time.Second

// openWriteBackIf starts the write-back policy when the mount asks for it.
func (a *Agent) openWriteBackIf(ctx context.Context) error {
	if a.cfg.WritePolicy != cache.WriteBack {
		return nil
	}
	return a.openWriteBack(ctx)
}

// beforeSetAttr refuses a setattr under the read-only policy and writes a
// dirty file back before one under write-back.
func (a *Agent) beforeSetAttr(ctx context.Context, path string, of *file, in vfs.SetAttrIn) error {
	if a.writePolicy() == cache.ReadOnly {
		return errReadOnly
	}
	return a.wb.beforeSetAttr(ctx, path, of, in)
}

// renameLock is held by a rename through this agent while the server
// renames and the dirty files follow (afterRename); it returns the unlock.
func (w *writeBack) renameLock() func() {
	if w == nil {
		return func() {}
	}
	w.renaming.RLock()
	return w.renaming.RUnlock
}

// afterRename updates the dirty files after a rename: one renamed over is
// stale, the ones moved are written back to their new paths.
func (w *writeBack) afterRename(oldPath, newPath string, flags uint32) {
	if w == nil {
		return
	}
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
