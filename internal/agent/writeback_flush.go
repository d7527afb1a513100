package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/wbjournal"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// record writes df's journal record and syncs it. Called with df.mu held.
func (w *writeBack) record(df *dirtyFile) error {
	w.mu.Lock()
	r := wbjournal.Record{Version: df.version, Caller: df.caller, Path: df.path}
	w.mu.Unlock()
	if err := w.journal.Put(df.ino, r); err != nil {
		return fmt.Errorf("write-back: %v: %w", err, syscall.EIO)
	}
	return nil
}

// Progress reports a write-back in progress: files and bytes written back
// so far, out of the totals when it started.
type Progress struct {
	Files, TotalFiles int
	Bytes, TotalBytes int64
}

// Flush writes back every dirty file (coopfs flush, SIGUSR1), calling
// progress after each block; it returns what it wrote. Without write-back
// it does nothing.
func (a *Agent) Flush(ctx context.Context, progress func(Progress)) (Progress, error) {
	if a.wb == nil {
		return Progress{}, nil
	}
	return a.wb.flushAll(ctx, progress, nil)
}

// flushAll writes back the dirty files pick selects (nil: all), oldest first.
func (w *writeBack) flushAll(ctx context.Context, progress func(Progress), pick func(*dirtyFile) bool) (Progress, error) {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	var todo []*dirtyFile
	var p Progress
	for _, df := range w.files {
		if df.path == "" {
			continue // an orphan (writeback.go, removed): never written back
		}
		if pick == nil || pick(df) {
			todo = append(todo, df)
			p.TotalBytes += df.bytes
		}
	}
	w.mu.Unlock()
	slices.SortFunc(todo, func(x, y *dirtyFile) int { return x.since.Compare(y.since) })
	p.TotalFiles = len(todo)
	var errs []error
	for _, df := range todo {
		base := p.Bytes
		n, err := w.flushFile(ctx, df, func(b int64) {
			p.Bytes = base + b
			if progress != nil {
				progress(p)
			}
		})
		p.Bytes = base + n
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		p.Files++
		if progress != nil {
			progress(p)
		}
	}
	return p, errors.Join(errs...)
}

// flushFile writes df's dirty blocks back to the server and marks them
// clean; once none is left it retags the file's cached blocks with the
// version the server gave the result, so they need not be fetched again.
// Writers of the file wait only for the bookkeeping of each block, not for
// the network: a block rewritten while it was on its way stays dirty. It
// returns the bytes written; progress (may be nil) gets the running count.
// A file renamed while its write-back opened it is written back under its
// new name; one removed from the server loses its dirty data.
func (w *writeBack) flushFile(ctx context.Context, df *dirtyFile, progress func(int64)) (int64, error) {
	df.flushing.Lock()
	defer df.flushing.Unlock()
	var done int64
	for try := 0; ; try++ {
		base := done
		n, path, err := w.flushPass(ctx, df, func(b int64) {
			if progress != nil {
				progress(base + b)
			}
		})
		done += n
		if !errors.Is(err, errGoneFile) {
			return done, err
		}
		if !w.renamedAway(df, path, err) || try >= goneRetries {
			return done, nil // dropped, or left dirty for the next flush
		}
	}
}

// goneRetries bounds the write-backs of one flushFile that find the file
// renamed away under them.
const goneRetries = 3

// flushPass is one write-back of df under its current path, which it
// returns; errGoneFile: the path no longer names the file on the server.
func (w *writeBack) flushPass(ctx context.Context, df *dirtyFile, progress func(int64)) (int64, string, error) {
	df.mu.Lock()
	if df.gone {
		df.mu.Unlock()
		return 0, "", nil
	}
	w.mu.Lock()
	path := df.path
	w.mu.Unlock()
	if path == "" {
		df.mu.Unlock()
		return 0, "", nil // an orphan: never written back
	}
	idxs := make([]uint64, 0, len(df.blocks))
	for idx := range df.blocks {
		idxs = append(idxs, idx)
	}
	df.mu.Unlock()
	slices.Sort(idxs)
	h := &wbHandle{a: w.a, path: path, ino: df.ino, caller: df.caller}
	defer h.release()
	var done int64
	var last wire.Attr
	for _, idx := range idxs {
		n, attr, err := w.flushBlock(ctx, df, h, idx)
		if errors.Is(err, errGoneFile) {
			return done, path, err
		}
		if err != nil {
			return done, path, fmt.Errorf("write back %s: %w", path, err)
		}
		if n > 0 {
			last = attr
		}
		done += int64(n)
		if n > 0 {
			progress(done)
		}
	}
	df.mu.Lock()
	defer df.mu.Unlock()
	if !df.gone && len(df.blocks) == 0 {
		w.mu.Lock()
		times := df.times
		w.mu.Unlock()
		if times != nil {
			// Times set while dirty, which the writes just changed.
			if attr, err := h.setAttr(ctx, *times); err != nil {
				w.a.log.Warn("write-back: setting the times of a written-back file", "path", path, "err", err)
			} else {
				last = attr
			}
		}
		w.settle(df, last)
	}
	return done, path, nil
}

// renamedAway tells why df's write-back under path found the file gone
// from the server: renamed through this agent (its path has moved on since:
// true, write it back again) or removed (its dirty data is dropped). A
// rename in flight is waited for: between the server's reply and the dirty
// files following it (afterRename), the old path is already gone.
func (w *writeBack) renamedAway(df *dirtyFile, path string, err error) bool {
	w.renaming.Lock()
	defer w.renaming.Unlock()
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone {
		return false
	}
	w.mu.Lock()
	now := df.path
	w.mu.Unlock()
	if now != path {
		return true
	}
	w.a.log.Warn("write-back: the file is gone from the server; dropping its dirty data", "path", path, "err", err)
	w.dropGone(df)
	return false
}

// flushBlock writes one dirty block back and marks it clean unless it was
// rewritten meanwhile; it returns the bytes sent (0: nothing to send).
func (w *writeBack) flushBlock(ctx context.Context, df *dirtyFile, h *wbHandle, idx uint64) (int, wire.Attr, error) {
	id, v := block.ID{File: df.ino, Index: idx}, block.Version(df.version)
	df.mu.Lock()
	b, ok := df.blocks[idx]
	if df.gone || !ok {
		df.mu.Unlock()
		return 0, wire.Attr{}, nil
	}
	data, ok := w.a.disk.c.Get(id, v)
	df.mu.Unlock()
	if !ok {
		w.a.log.Warn("write-back: a dirty block is unreadable; its data is lost", "path", h.path, "block", idx)
		df.mu.Lock()
		w.cleaned(df, idx, b)
		df.mu.Unlock()
		return 0, wire.Attr{}, nil
	}
	attr, err := h.write(ctx, int64(idx)*int64(w.a.BlockSize()), data)
	if err != nil {
		return 0, attr, err
	}
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone || df.blocks[idx] != b {
		return len(data), attr, nil // rewritten (or dropped) meanwhile: it stays dirty
	}
	if _, err := w.a.disk.c.MarkClean(id, v); err != nil {
		w.a.log.Warn("write-back: marking a block clean", "path", h.path, "err", err)
	}
	w.cleaned(df, idx, b)
	return len(data), attr, nil
}

// cleaned takes block idx off df's dirty blocks. Called with df.mu held.
func (w *writeBack) cleaned(df *dirtyFile, idx uint64, b dirtyBlock) {
	delete(df.blocks, idx)
	w.mu.Lock()
	df.bytes -= int64(b.n)
	w.dirty -= int64(b.n)
	w.frames--
	w.mu.Unlock()
}

// settle finishes a written-back file: its clean blocks take the server's
// new version, open files see it, and the record goes. Called with df.mu held.
func (w *writeBack) settle(df *dirtyFile, last wire.Attr) {
	a := w.a
	old := df.version
	w.forget(df)
	if last.Ino != df.ino || last.Version == 0 {
		return
	}
	if _, err := a.disk.c.Retag(df.ino, block.Version(old), block.Version(last.Version)); err != nil {
		a.log.Warn("write-back: retagging written-back blocks", "err", err)
	}
	a.cache.RemoveFile(df.ino) // read again from the disk tier at the new version
	a.mu.Lock()
	a.versions[df.ino] = last.Version
	a.mu.Unlock()
	for _, f := range df.files {
		f.mu.Lock()
		if f.attr.Version == old {
			f.attr.Version, f.attr.Size = last.Version, last.Size
		}
		f.mu.Unlock()
	}
	w.sized(last, old)
}

// dropGone drops the dirty data of a file the server no longer has at its
// path. Called with df.mu held.
func (w *writeBack) dropGone(df *dirtyFile) {
	if err := w.a.disk.c.MarkStale(df.ino); err != nil {
		w.a.log.Warn("write-back: stale list", "err", err)
	}
	w.a.cache.RemoveFile(df.ino)
	w.forget(df)
}

// errGoneFile: the path no longer names the dirty file on the server.
var errGoneFile = errors.New("the file was removed or replaced on the server")

// wbHandle is a server handle opened for writing one file back; it is
// reopened after a reconnection.
type wbHandle struct {
	a      *Agent
	path   string
	ino    uint64
	caller vfs.Caller
	h, gen uint64
	open   bool
}

func (h *wbHandle) get(ctx context.Context) (uint64, uint64, error) {
	_, gen, err := h.a.sess.current(ctx)
	if err != nil {
		return 0, 0, err
	}
	if h.open && h.gen == gen {
		return h.h, gen, nil
	}
	r, gen, err := h.a.sess.call(ctx, as(vfs.WithCaller(ctx, h.caller), &wire.Open{Path: h.path, Flags: syscall.O_WRONLY}), true)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return 0, 0, fmt.Errorf("%w: %v", errGoneFile, err)
	}
	if err != nil {
		return 0, 0, err
	}
	or, ok := r.(*wire.OpenReply)
	if !ok {
		return 0, 0, fmt.Errorf("open: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	h.h, h.gen, h.open = or.Handle, gen, true
	if or.Attr.Ino != h.ino {
		return 0, 0, fmt.Errorf("%w: %s is now file %d, not %d", errGoneFile, h.path, or.Attr.Ino, h.ino)
	}
	return h.h, gen, nil
}

// write sends one block (exactly once, WriteSeq) and returns the attributes.
func (h *wbHandle) write(ctx context.Context, off int64, data []byte) (wire.Attr, error) {
	seq := h.a.writeSeq.Add(1)
	for attempt := 0; ; attempt++ {
		hd, gen, err := h.get(ctx)
		if err != nil {
			return wire.Attr{}, err
		}
		r, callGen, err := h.a.sess.call(ctx, &wire.WriteSeq{Seq: seq, Handle: hd, Offset: uint64(off), Data: data}, true)
		if callGen != gen && attempt < 2 {
			continue // the handle died with the old connection
		}
		if err != nil {
			return wire.Attr{}, err
		}
		ar, ok := r.(*wire.AttrReply)
		if !ok {
			return wire.Attr{}, fmt.Errorf("write: unexpected reply %v: %w", r.Type(), syscall.EIO)
		}
		return ar.Attr, nil
	}
}

// setAttr sends a setattr of the file through the handle, as the writer.
func (h *wbHandle) setAttr(ctx context.Context, m wire.SetAttr) (wire.Attr, error) {
	hd, _, err := h.get(ctx)
	if err != nil {
		return wire.Attr{}, err
	}
	m.Path, m.Handle = h.path, hd
	r, _, err := h.a.sess.call(ctx, as(vfs.WithCaller(ctx, h.caller), &m), true)
	if err != nil {
		return wire.Attr{}, err
	}
	ar, ok := r.(*wire.AttrReply)
	if !ok {
		return wire.Attr{}, fmt.Errorf("setattr: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	return ar.Attr, nil
}

func (h *wbHandle) release() {
	if !h.open {
		return
	}
	if _, gen, err := h.a.sess.current(context.Background()); err == nil && gen == h.gen {
		h.a.releases.add(h.gen, h.h)
	}
}

// openWriteBack starts the write-back policy over the open disk tier: it
// opens the journal, writes back what a previous run left dirty (a crash
// or an unmount without the server) and starts the background flusher.
func (a *Agent) openWriteBack(ctx context.Context) error {
	if a.disk.c == nil {
		return errors.New("--write-policy write-back needs a disk cache: add --disk-cache DIR")
	}
	j, err := wbjournal.Open(a.cfg.Disk.Dir)
	if err != nil {
		return err
	}
	cfg := a.cfg.WriteBack
	w := &writeBack{a: a, cfg: cfg, journal: j, files: map[uint64]*dirtyFile{}, open: map[*file]struct{}{}, left: map[uint64]uint64{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	a.wbMu.Lock()
	a.wb = w
	a.wbMu.Unlock()
	if err := w.recover(ctx); err != nil {
		a.log.Warn("write-back: data left dirty by a previous run is kept for the next flush", "err", err)
	}
	go w.loop()
	return nil
}

// recover rebuilds the dirty files from the disk tier's dirty frames and
// the journal, then writes them back. A dirty frame without a record
// cannot be placed: it is kept, with a warning.
func (w *writeBack) recover(ctx context.Context) error {
	files, lost, err := w.journal.Recover(w.a.disk.c)
	for _, id := range lost {
		w.a.log.Warn("write-back: a dirty block has no journal record; it is kept but cannot be written back", "file", id.File, "block", id.Index)
	}
	if err != nil {
		return err
	}
	for ino, rf := range files {
		df := &dirtyFile{ino: ino, version: rf.Record.Version, caller: rf.Record.Caller, path: rf.Record.Path,
			blocks: map[uint64]dirtyBlock{}, since: time.Now(), mtime: time.Now().UnixNano(), size: rf.Size, bytes: rf.Bytes}
		for idx, n := range rf.Blocks {
			df.blocks[idx] = dirtyBlock{n: n}
		}
		w.files[ino] = df
		w.dirty += rf.Bytes
		w.frames += int64(len(rf.Blocks))
	}
	if len(w.files) == 0 {
		return nil
	}
	for ino := range w.files {
		w.delegate(ctx, ino) // the server may hold the file for us since we left
	}
	w.a.log.Info("write-back: writing back data left dirty by the previous run", "files", len(w.files), "bytes", block.Size(w.dirty).String())
	p, err := w.flushAll(ctx, nil, nil)
	w.a.log.Info("write-back: recovered", "files", p.Files, "bytes", block.Size(p.Bytes).String())
	return err
}

// loop is the background flusher: once a second (or when nudged) it writes
// back the files dirty for longer than Delay, and the oldest files while
// dirty data is over the high-water mark.
func (w *writeBack) loop() {
	defer close(w.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.kick:
		}
		if err := w.sync(); err != nil {
			w.a.log.Warn("write-back: syncing the disk cache", "err", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-w.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		w.background(ctx)
		cancel()
	}
}

func (w *writeBack) background(ctx context.Context) {
	cutoff := time.Now().Add(-w.cfg.Delay)
	w.mu.Lock()
	over := w.overLocked()
	dirty := len(w.files) > 0
	w.mu.Unlock()
	if dirty {
		// Reconnect if the connection was lost: the server learns again
		// which files we hold unflushed writes to (reconnected).
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		w.a.sess.current(cctx)
		cancel()
	}
	pick := func(df *dirtyFile) bool { return df.since.Before(cutoff) }
	if over {
		pick = nil // everything, oldest first
	}
	if _, err := w.flushAll(ctx, nil, pick); err != nil && ctx.Err() == nil {
		w.a.log.Warn("write-back: background flush failed; it is tried again", "err", err)
	}
}

// close stops the flusher, writes back what it can within timeout (what is
// left stays on disk for the next mount) and closes the journal.
func (w *writeBack) close(timeout time.Duration) error {
	close(w.stop)
	<-w.done
	if err := w.sync(); err != nil {
		w.a.log.Warn("write-back: syncing the disk cache at unmount", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p, err := w.flushAll(ctx, nil, nil)
	if err != nil {
		w.a.log.Warn("write-back: dirty data left on disk for the next mount", "files", p.TotalFiles-p.Files, "err", err)
	}
	return w.journal.Close()
}
