package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
	"github.com/coopfs/coopfs/internal/writeback"
)

// The mount's front end of the write-back engine (internal/writeback):
// the engine keeps the dirty files, their journal, the flush and the
// delegations; this file says what they are to a mount — its session is
// the upstream, its open files write and follow renames, and a written-back
// file's blocks are read at the server's new version.

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

func (c *WriteBackConfig) tuning() writeback.Tuning {
	return writeback.Tuning{Delay: c.Delay, HighWater: c.HighWater}
}

func (c *WriteBackConfig) setDefaults() {
	t := c.tuning()
	t.SetDefaults()
	c.Delay, c.HighWater = t.Delay, t.HighWater
}

func (c WriteBackConfig) validate() error { return c.tuning().Validate() }

// Progress reports a write-back in progress (coopfs flush).
type Progress = writeback.Progress

// wbCloseTimeout bounds the write-back at unmount; what is left stays on
// disk and is written back by the next mount.
const wbCloseTimeout = 20 * time.Second

// writeBack is the agent's write-back: the engine, and the open files,
// whose paths follow renames and whose versions follow write-backs.
// Its methods do nothing on a nil writeBack (no write-back policy).
type writeBack struct {
	a *Agent
	e *writeback.Engine

	mu   sync.Mutex
	open map[*file]struct{}
}

var _ writeback.Frontend = (*writeBack)(nil)

// writePolicy returns the mount's write policy.
func (a *Agent) writePolicy() cache.WritePolicy { return a.cfg.WritePolicy }

// writeAccess reports whether open flags ask to modify the file.
func writeAccess(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_CREAT) != 0
}

// errReadOnly is returned for writes under the read-only policy.
var errReadOnly = fmt.Errorf("the mount's write policy is read-only: %w", syscall.EROFS)

// openWriteBackIf starts the write-back policy when the mount asks for it.
func (a *Agent) openWriteBackIf(ctx context.Context) error {
	if a.cfg.WritePolicy != cache.WriteBack {
		return nil
	}
	return a.openWriteBack(ctx)
}

// openWriteBack starts the write-back engine over the open disk tier: it
// writes back what a previous run left dirty (a crash or an unmount
// without the server) before the mount serves.
func (a *Agent) openWriteBack(ctx context.Context) error {
	w := &writeBack{a: a, open: map[*file]struct{}{}}
	e, err := writeback.New(writeback.Config{Tuning: a.cfg.WriteBack.tuning(), Dir: a.cfg.Disk.Dir, Disk: a.disk.c, Mem: a.cache,
		Upstream: "the server", RequestTimeout: a.cfg.RequestTimeout, CloseTimeout: wbCloseTimeout, Logger: a.log}, w)
	if err != nil {
		return err
	}
	w.e = e
	a.wbMu.Lock()
	a.wb = w
	a.wbMu.Unlock()
	e.Start(ctx)
	return nil
}

// Flush writes back every dirty file (coopfs flush, SIGUSR1), calling
// progress after each block; it returns what it wrote. Without write-back
// it does nothing.
func (a *Agent) Flush(ctx context.Context, progress func(Progress)) (Progress, error) {
	if a.wb == nil {
		return Progress{}, nil
	}
	return a.wb.e.FlushAll(ctx, progress)
}

// wbReconnected declares the dirty files again on a new connection; wb
// is set only after the first one.
func (a *Agent) wbReconnected() {
	a.wbMu.Lock()
	w := a.wb
	a.wbMu.Unlock()
	if w != nil {
		w.e.Reconnected()
	}
}

// close writes back what it can (unmount).
func (w *writeBack) close(time.Duration) error { return w.e.Close() }

// Call, Gen, Release and NextSeq make the mount's session the engine's
// upstream (writeback.Frontend).
func (w *writeBack) Call(ctx context.Context, m wire.Msg) (wire.Msg, uint64, error) {
	return w.a.sess.call(ctx, m, true)
}

func (w *writeBack) Gen(ctx context.Context) (uint64, error) {
	_, gen, err := w.a.sess.current(ctx)
	return gen, err
}

func (w *writeBack) Release(gen, h uint64) {
	if _, cur, err := w.a.sess.current(context.Background()); err == nil && cur == gen {
		w.a.releases.add(gen, h)
	}
}

func (w *writeBack) NextSeq() uint64 { return w.a.writeSeq.Add(1) }

// Settled implements writeback.Frontend: the file's blocks are at the
// server's new version, and so are the open files that saw the old one.
func (w *writeBack) Settled(ino, old uint64, at wire.Attr) {
	if at.Version == 0 {
		return
	}
	w.a.mu.Lock()
	w.a.versions[ino] = at.Version
	w.a.mu.Unlock()
	w.sized(at, old)
}

// holds reports whether file ino has dirty data here.
func (w *writeBack) holds(ino uint64) bool { return w != nil && w.e.Holds(ino) }

// write is WriteAt under the write-back policy (writeback.Engine.Write):
// blocks it covers partly are completed from the tiers, else read through
// f at the dirty file's version, which f sees from then on.
func (w *writeBack) write(ctx context.Context, f *file, p []byte, off int64) (int, error) {
	fetch := func(ctx context.Context, b writeback.BlockRef) ([]byte, error) {
		f.mu.Lock()
		f.attr.Version = b.Tag
		f.mu.Unlock()
		data, err := f.block(ctx, b.Index, false)
		if errors.Is(err, syscall.EBADF) && f.flags&syscall.O_ACCMODE == syscall.O_WRONLY {
			// The server's handle is write-only, as the open asked; the
			// rest of the block is read through one opened for reading.
			return f.readBlockAside(ctx, b.Index)
		}
		return data, err
	}
	for try := 0; ; try++ {
		f.mu.Lock()
		nf := writeback.NewFile{Ino: f.attr.Ino, Path: f.path, Tag: f.attr.Version, Size: int64(f.attr.Size), Caller: f.caller, HasCaller: true}
		f.mu.Unlock()
		wr, err := w.e.Write(ctx, nf, off, p, fetch)
		var full *disk.FullError
		if errors.As(err, &full) && try < fullRetries {
			// Every frame of a block's set is dirty (small files fill
			// sets long before the cache): write back what is dirty,
			// which frees them, and write again (the blocks written so
			// far are written again with the same bytes).
			if _, ferr := w.e.FlushAll(ctx, nil); ferr != nil {
				return 0, fmt.Errorf("%w (writing back to make room: %v)", err, ferr)
			}
			continue
		}
		if errors.Is(err, errNoRead) {
			// The writer may write the file but not read it: the block
			// cannot be completed here, so this write goes through to the
			// server, after the file's dirty data (which it may overlap).
			if err := w.e.FlushIno(ctx, nf.Ino); err != nil {
				return 0, err
			}
			return f.writeThrough(ctx, p, off)
		}
		if err != nil {
			return 0, err
		}
		f.mu.Lock()
		f.attr.Version, f.attr.Size, f.attr.Mtime, f.attr.Ctime = wr.Tag, uint64(wr.Size), wr.Mtime, wr.Mtime
		f.mu.Unlock()
		return len(p), nil
	}
}

// fullRetries bounds how often a write that found its block's set full of
// dirty frames writes everything back and tries again.
const fullRetries = 2

// errNoRead: the writer may not read the file, whose block a partial
// write must be completed with.
var errNoRead = errors.New("the file is not readable by its writer")

// readBlockAside reads block idx from the server through a handle opened
// for reading as f's caller (f's own is write-only); errNoRead when the
// caller may not read the file.
func (f *file) readBlockAside(ctx context.Context, idx uint64) ([]byte, error) {
	f.mu.Lock()
	path, ino, v := f.path, f.attr.Ino, f.attr.Version
	f.mu.Unlock()
	r, gen, err := f.a.pathCall(vfs.WithCaller(ctx, f.caller), &wire.Open{Path: path, Flags: syscall.O_RDONLY}, true)
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		return nil, fmt.Errorf("read block %d of %s to complete a write: %w", idx, path, errNoRead)
	}
	if err != nil {
		return nil, err
	}
	or, ok := r.(*wire.OpenReply)
	if !ok {
		return nil, fmt.Errorf("open: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	defer func() {
		if !f.a.releases.add(gen, or.Handle) {
			f.a.sess.call(ctx, &wire.Release{Handle: or.Handle}, false)
		}
	}()
	if or.Attr.Ino != ino {
		return nil, fmt.Errorf("read block %d of %s: the name is now another file: %w", idx, path, syscall.ESTALE)
	}
	// A file of its own for the read, at f's version: the read takes the
	// path f's would (peers, the server), on the readable handle.
	at := or.Attr
	at.Version = v
	rf := &file{a: f.a, path: path, flags: syscall.O_RDONLY, h: or.Handle, gen: gen, attr: at, caller: f.caller}
	return rf.fetch(ctx, block.ID{File: ino, Index: idx}, v, false)
}

// flushIno writes file ino back if it is dirty here.
func (w *writeBack) flushIno(ctx context.Context, ino uint64) error {
	if w == nil {
		return nil
	}
	return w.e.FlushIno(ctx, ino)
}

// sync makes the dirty frames written so far durable: fsync and close of
// a file under write-back.
func (w *writeBack) sync() error { return w.e.Sync() }

// dirtyData returns the dirty copy of block id, if the file holds one.
func (w *writeBack) dirtyData(id block.ID) ([]byte, bool) {
	if w == nil {
		return nil, false
	}
	return w.e.DirtyData(id)
}

// opened and released keep the set of open files; the last close of a
// dirty file removed while open (an orphan) drops its data.
func (w *writeBack) opened(f *file) {
	if w == nil {
		return
	}
	f.mu.Lock()
	ino := f.attr.Ino
	f.mu.Unlock()
	w.mu.Lock()
	w.open[f] = struct{}{}
	w.mu.Unlock()
	w.e.Opened(ino)
}

func (w *writeBack) released(f *file) {
	if w == nil {
		return
	}
	f.mu.Lock()
	ino := f.attr.Ino
	f.mu.Unlock()
	w.mu.Lock()
	_, ok := w.open[f]
	delete(w.open, f)
	w.mu.Unlock()
	if ok {
		w.e.Released(ino)
	}
}

// removed is called after path was unlinked or renamed over: a dirty
// file with another name here is written back under it, and its open
// files that named it by path take another of its names; otherwise its
// dirty data is never written back (an orphan while open here).
func (w *writeBack) removed(path string) {
	if w == nil {
		return
	}
	w.e.Removed(path)
	w.unlinkedOpen(path)
}

// unlinkedOpen makes the open files that named their file by path, now
// removed, take another of its names: the one its dirty data goes under,
// else one linked here.
func (w *writeBack) unlinkedOpen(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for f := range w.open {
		f.mu.Lock()
		i := slices.Index(f.links, path)
		switch {
		case i >= 0:
			f.links = slices.Delete(f.links, i, i+1)
		case f.path == path && len(f.links) > 0:
			f.path, f.links = f.links[0], f.links[1:]
		}
		if now := w.e.PathOf(f.attr.Ino); now != "" && f.path == path {
			f.path = now
		}
		f.mu.Unlock()
	}
}

// beforeRemove is called before path is unlinked or renamed over. A dirty
// file that has another name here is written back under it from then on
// (writeback.Engine.BeforeRemove); one whose other names were made
// elsewhere (the server's link count says so) is written back first, so
// that they show its data.
func (w *writeBack) beforeRemove(ctx context.Context, path string) error {
	if w == nil {
		return nil
	}
	df := w.e.BeforeRemove(path)
	if df == nil {
		return nil
	}
	at, err := w.a.attrCall(ctx, &wire.GetAttr{Path: path}, true)
	if err != nil || at.Ino != df.Ino() || at.Nlink <= 1 {
		return nil // the removal itself says what is wrong
	}
	_, err = w.e.FlushFile(ctx, df)
	return err
}

// flushOpen writes back the dirty data of open file f before an operation
// the server performs on its data (fallocate: a range zeroed, punched or
// allocated over dirty blocks, and the size it may give the file).
func (w *writeBack) flushOpen(ctx context.Context, f *file) error {
	if w == nil {
		return nil
	}
	f.mu.Lock()
	ino := f.attr.Ino
	f.mu.Unlock()
	return w.e.FlushIno(ctx, ino)
}

// linked is called after newPath was made a link to oldPath: one more
// name the dirty file and the open files of it may go by.
func (w *writeBack) linked(oldPath, newPath string) {
	if w == nil {
		return
	}
	w.e.Linked(oldPath, newPath)
	w.mu.Lock()
	defer w.mu.Unlock()
	for f := range w.open {
		f.mu.Lock()
		if f.path == oldPath || slices.Contains(f.links, oldPath) {
			f.links = append(f.links, newPath)
		}
		f.mu.Unlock()
	}
}

// renameLock is held by a rename through this agent while the server
// renames and the dirty files follow (afterRename); it returns the unlock.
func (w *writeBack) renameLock() func() {
	if w == nil {
		return func() {}
	}
	return w.e.RenameLock()
}

// afterRename updates the dirty files after a rename (one renamed over is
// stale, the ones moved are written back to their new paths) and the open
// files' paths (they write, and are written back, under their new names).
func (w *writeBack) afterRename(oldPath, newPath string, flags uint32) {
	if w == nil {
		return
	}
	w.e.AfterRename(oldPath, newPath, flags)
	if flags&unix.RENAME_EXCHANGE == 0 {
		w.unlinkedOpen(newPath) // renamed over
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, mv := range writeback.Renames(oldPath, newPath, flags) {
		for f := range w.open {
			f.mu.Lock()
			f.path, _ = writeback.Moved(f.path, mv[0], mv[1])
			for i := range f.links {
				f.links[i], _ = writeback.Moved(f.links[i], mv[0], mv[1])
			}
			f.mu.Unlock()
		}
	}
}

// renamedToItself reports whether a rename that succeeded left both names
// (oldPath and newPath named one file, which POSIX makes a no-op): the
// dirty file must not be taken for renamed over. It asks the server only
// when newPath names a dirty file here.
func (w *writeBack) renamedToItself(ctx context.Context, oldPath, newPath string, flags uint32) bool {
	if w == nil || flags&unix.RENAME_EXCHANGE != 0 {
		return false
	}
	if oldPath == newPath {
		return true
	}
	df := w.e.Find(newPath)
	if df == nil {
		return false
	}
	at, err := w.a.attrCall(ctx, &wire.GetAttr{Path: oldPath}, true)
	return err == nil && at.Ino == df.Ino()
}

// discard drops file ino's dirty data (an open with O_TRUNC emptied it on
// the server).
func (w *writeBack) discard(ino uint64) {
	if w != nil {
		w.e.Discard(ino)
	}
}

// beforeSetAttr refuses a setattr under the read-only policy and prepares
// one of a dirty file under write-back (writeback.Engine.PrepareSetAttr:
// a truncation or a mode without write permission writes it back first).
func (a *Agent) beforeSetAttr(ctx context.Context, path string, of *file, in vfs.SetAttrIn) error {
	if a.writePolicy() == cache.ReadOnly {
		return errReadOnly
	}
	w := a.wb
	if w == nil {
		return nil
	}
	var df *writeback.File
	if of == nil {
		df = w.e.Find(path)
		if df == nil && w.e.Dirty() {
			// path may be a link of a dirty file made elsewhere: the
			// file is known by its number here.
			if at, err := a.attrCall(ctx, &wire.GetAttr{Path: path}, true); err == nil {
				df = w.e.File(at.Ino)
			}
		}
	} else {
		of.mu.Lock()
		ino := of.attr.Ino
		of.mu.Unlock()
		df = w.e.File(ino)
	}
	if df == nil {
		return nil
	}
	return w.e.PrepareSetAttr(ctx, df, in)
}

// recall answers the server's recall of write delegations: the files
// named are written back before the break is acked.
func (w *writeBack) recall(ctx context.Context, m *wire.CallbackBreak) {
	if w != nil {
		w.e.Recall(ctx, m)
	}
}
