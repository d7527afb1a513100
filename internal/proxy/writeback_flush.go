package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/wbjournal"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// wbCloseTimeout bounds the write-back when the proxy stops; what is left
// stays on disk for its next start.
const wbCloseTimeout = 20 * time.Second

// Flush writes back every dirty file (coopfs flush --proxy, SIGUSR1),
// calling progress after each block; without write-back it does nothing.
func (p *Proxy) Flush(ctx context.Context, progress func(agent.Progress)) (agent.Progress, error) {
	if p.wb == nil {
		return agent.Progress{}, nil
	}
	return p.wb.flushAll(ctx, progress, nil)
}

// flushAll writes back the dirty files pick selects (nil: all), oldest first.
func (w *writeBack) flushAll(ctx context.Context, progress func(agent.Progress), pick func(*dirtyFile) bool) (agent.Progress, error) {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	var p agent.Progress
	w.mu.Lock()
	var todo []*dirtyFile
	for _, df := range w.files {
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

// flushFile writes df's dirty blocks upstream and marks them clean; once
// none is left, its clean blocks are retagged with the upstream's new
// version and the delegation is returned. Writers wait only for each
// block's bookkeeping: a block rewritten meanwhile stays dirty.
func (w *writeBack) flushFile(ctx context.Context, df *dirtyFile, progress func(int64)) (int64, error) {
	df.flushing.Lock()
	defer df.flushing.Unlock()
	df.mu.Lock()
	if df.gone {
		df.mu.Unlock()
		return 0, nil
	}
	w.mu.Lock()
	path := df.path
	w.mu.Unlock()
	idxs := make([]uint64, 0, len(df.blocks))
	for idx := range df.blocks {
		idxs = append(idxs, idx)
	}
	df.mu.Unlock()
	slices.Sort(idxs)
	h := &wbHandle{s: w.up, df: df, path: path}
	defer h.release()
	var done int64
	var last wire.Attr
	for _, idx := range idxs {
		n, attr, err := w.flushBlock(ctx, df, h, idx)
		if errors.Is(err, errGoneFile) {
			w.p.log.Warn("write-back: the file is gone upstream; dropping its dirty data", "path", path, "err", err)
			df.mu.Lock()
			w.dropGone(df)
			df.mu.Unlock()
			return done, nil
		}
		if err != nil {
			return done, fmt.Errorf("write back %s: %w", path, err)
		}
		if n > 0 {
			last = attr
		}
		done += int64(n)
		if progress != nil && n > 0 {
			progress(done)
		}
	}
	df.mu.Lock()
	defer df.mu.Unlock()
	if !df.gone && len(df.blocks) == 0 {
		w.settle(df, last)
	}
	return done, nil
}

// flushBlock writes one dirty block upstream and marks it clean unless it
// was rewritten meanwhile; it returns the bytes sent.
func (w *writeBack) flushBlock(ctx context.Context, df *dirtyFile, h *wbHandle, idx uint64) (int, wire.Attr, error) {
	id, v := block.ID{File: df.ino, Index: idx}, block.Version(df.tag)
	df.mu.Lock()
	b, ok := df.blocks[idx]
	if df.gone || !ok {
		df.mu.Unlock()
		return 0, wire.Attr{}, nil
	}
	data, ok := w.c.disk.Get(id, v)
	df.mu.Unlock()
	if !ok {
		w.p.log.Warn("write-back: a dirty block is unreadable; its data is lost", "path", h.path, "block", idx)
		df.mu.Lock()
		w.cleaned(df, idx, b)
		df.mu.Unlock()
		return 0, wire.Attr{}, nil
	}
	attr, err := h.write(ctx, int64(idx)*int64(w.c.blockSize), data)
	if err != nil {
		return 0, attr, err
	}
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone || df.blocks[idx] != b {
		return len(data), attr, nil
	}
	if _, err := w.c.disk.MarkClean(id, v); err != nil {
		w.p.log.Warn("write-back: marking a block clean", "path", h.path, "err", err)
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

// settle finishes a written-back file: its blocks take the upstream's new
// version (clients holding a minted one are served at it). Called with
// df.mu held.
func (w *writeBack) settle(df *dirtyFile, last wire.Attr) {
	w.forget(df)
	w.c.mem.RemoveFile(df.ino)
	if last.Ino != df.ino || last.Version == 0 {
		w.c.forget(df.ino)
		return
	}
	if _, err := w.c.disk.Retag(df.ino, block.Version(df.tag), block.Version(last.Version)); err != nil {
		w.p.log.Warn("write-back: retagging written-back blocks", "err", err)
	}
	w.c.setVersion(df.ino, last.Version, last.Size)
}

// dropGone drops the dirty data of a file the upstream no longer has at
// its path. Called with df.mu held.
func (w *writeBack) dropGone(df *dirtyFile) {
	if err := w.c.disk.MarkStale(df.ino); err != nil {
		w.p.log.Warn("write-back: stale list", "err", err)
	}
	w.c.mem.RemoveFile(df.ino)
	w.forget(df)
}

// delegate declares the proxy's unflushed writes to ino upstream, before
// the write that made the file dirty returns.
func (w *writeBack) delegate(ctx context.Context, ino uint64) {
	_, _, err := w.up.call(ctx, &wire.DelegateWrite{Ino: ino})
	switch {
	case err == nil:
	case errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS):
		w.noDeleg.Do(func() {
			w.p.log.Warn("write-back: the upstream grants no write delegations: other clients see the proxy's writes only after they are written back", "err", err)
		})
	default:
		w.p.log.Warn("write-back: declaring unflushed writes upstream failed; it is tried again on the next connection", "file", ino, "err", err)
	}
}

// giveBack returns a delegation after the write-back, in the background.
func (w *writeBack) giveBack(ino uint64) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), w.p.cfg.RequestTimeout)
		defer cancel()
		w.up.call(ctx, &wire.DelegateReturn{Ino: ino})
	}()
}

// redeclare declares every dirty file again on a new own connection.
func (w *writeBack) redeclare() {
	w.mu.Lock()
	inos := make([]uint64, 0, len(w.files))
	for ino := range w.files {
		inos = append(inos, ino)
	}
	w.mu.Unlock()
	for _, ino := range inos {
		ctx, cancel := context.WithTimeout(context.Background(), w.p.cfg.RequestTimeout)
		w.delegate(ctx, ino)
		cancel()
	}
}

// recall answers the upstream's recall: the files named are written back
// before the break is acked.
func (w *writeBack) recall(ctx context.Context, m *wire.CallbackBreak) {
	for _, it := range m.Items {
		df := w.file(it.Ino)
		if df == nil {
			continue
		}
		w.recalls.Add(1)
		for try := 0; try < 3; try++ {
			if _, err := w.flushFile(ctx, df, nil); err != nil {
				w.p.log.Warn("write-back: a recalled file could not be written back", "file", it.Ino, "err", err)
				break
			}
			df.mu.Lock()
			gone := df.gone
			df.mu.Unlock()
			if gone {
				break
			}
		}
	}
}

// flushBefore writes file ino back before a change that needs the
// upstream to hold its data (a truncation, a mode, fallocate, a write
// this proxy cannot place).
func (w *writeBack) flushBefore(ctx context.Context, ino uint64) error {
	df := w.file(ino)
	if df == nil {
		return nil
	}
	_, err := w.flushFile(ctx, df, nil)
	return err
}

// openWriteBack starts write-back over the open disk tier: the journal,
// what a previous run left dirty (written back now, within the connect
// timeout; the rest later), and the background flusher.
func (p *Proxy) openWriteBack(ctx context.Context) error {
	c := p.cache
	if c.disk == nil {
		return errors.New("--write-policy write-back needs a disk cache: add --disk-cache DIR")
	}
	j, err := wbjournal.Open(p.cfg.Disk.Dir)
	if err != nil {
		return err
	}
	w := &writeBack{p: p, cfg: p.cfg.WriteBack, c: c, journal: j, files: map[uint64]*dirtyFile{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	w.minted.Store(uint64(time.Now().UnixNano()))
	w.up = &ownSession{w: w, boot: uint64(time.Now().UnixNano())}
	c.isDirty = w.holds
	p.wb = w
	if err := w.recover(ctx); err != nil {
		p.log.Warn("write-back: data left dirty by the previous run is kept for the next flush", "err", err)
	}
	go w.loop()
	return nil
}

// recover rebuilds the dirty files from the dirty frames and the journal
// and writes them back.
func (w *writeBack) recover(ctx context.Context) error {
	files, lost, err := w.journal.Recover(w.c.disk)
	for _, id := range lost {
		w.p.log.Warn("write-back: a dirty block has no journal record; it is kept but cannot be written back", "file", id.File, "block", id.Index)
	}
	if err != nil {
		return err
	}
	now := time.Now()
	for ino, rf := range files {
		df := &dirtyFile{ino: ino, tag: rf.Record.Version, caller: rf.Record.Caller, hasAs: rf.Record.Caller.UID != noUID,
			blocks: map[uint64]dirtyBlock{}, path: rf.Record.Path, cur: w.mint(), size: rf.Size, bytes: rf.Bytes,
			mtime: now.UnixNano(), since: now}
		if !df.hasAs {
			df.caller = vfs.Caller{}
		}
		df.attr = wire.Attr{Ino: ino, Mode: 0o100644, Size: uint64(rf.Size), Version: rf.Record.Version}
		for idx, n := range rf.Blocks {
			df.blocks[idx] = dirtyBlock{n: n}
		}
		w.files[ino] = df
		w.dirty += rf.Bytes
		w.frames += int64(len(rf.Blocks))
	}
	if len(files) == 0 {
		return nil
	}
	w.p.log.Info("write-back: writing back data left dirty by the previous run", "files", len(files), "bytes", block.Size(w.dirty).String())
	rctx, cancel := context.WithTimeout(ctx, wbCloseTimeout)
	defer cancel()
	if _, _, err := w.up.current(rctx); err != nil { // declares them (redeclare)
		return err
	}
	pr, err := w.flushAll(rctx, nil, nil)
	w.p.log.Info("write-back: recovered", "files", pr.Files, "bytes", block.Size(pr.Bytes).String())
	return err
}

// loop is the background flusher: every second (or when nudged) it syncs
// the dirty frames and writes back the files dirty for longer than Delay,
// or the oldest ones while over the high-water mark.
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
			w.p.log.Warn("write-back: syncing the disk cache", "err", err)
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
	w.mu.Unlock()
	pick := func(df *dirtyFile) bool { return df.since.Before(cutoff) }
	if over {
		pick = nil
	}
	if _, err := w.flushAll(ctx, nil, pick); err != nil && ctx.Err() == nil {
		w.p.log.Warn("write-back: background flush failed; it is tried again", "err", err)
	}
}

// close stops the flusher, writes back what it can within wbCloseTimeout
// and closes the journal and the own connection.
func (w *writeBack) close() error {
	close(w.stop)
	<-w.done
	if err := w.sync(); err != nil {
		w.p.log.Warn("write-back: syncing the disk cache at exit", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wbCloseTimeout)
	defer cancel()
	if p, err := w.flushAll(ctx, nil, nil); err != nil {
		w.p.log.Warn("write-back: dirty data left on disk for the next start", "files", p.TotalFiles-p.Files, "err", err)
	}
	w.up.close()
	return w.journal.Close()
}
