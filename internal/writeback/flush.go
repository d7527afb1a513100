package writeback

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/wire"
)

// FlushAll writes back every dirty file (coopfs flush, SIGUSR1), oldest
// first, calling progress (may be nil) after each block; it returns what
// it wrote.
func (e *Engine) FlushAll(ctx context.Context, progress func(Progress)) (Progress, error) {
	return e.flushAll(ctx, progress, nil)
}

// flushAll writes back the dirty files pick selects (nil: all), oldest first.
func (e *Engine) flushAll(ctx context.Context, progress func(Progress), pick func(*File) bool) (Progress, error) {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	e.mu.Lock()
	var todo []*File
	var p Progress
	for _, df := range e.files {
		if df.path == "" {
			continue // an orphan (Removed): never written back
		}
		if pick == nil || pick(df) {
			todo = append(todo, df)
			p.TotalBytes += df.bytes
		}
	}
	e.mu.Unlock()
	slices.SortFunc(todo, func(x, y *File) int { return x.since.Compare(y.since) })
	p.TotalFiles = len(todo)
	var errs []error
	for _, df := range todo {
		base := p.Bytes
		n, err := e.flushFile(ctx, df, true, func(b int64) {
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

// FlushFile writes df back (before a change that needs the upstream to
// hold its data) and returns the bytes written.
func (e *Engine) FlushFile(ctx context.Context, df *File) (int64, error) {
	return e.flushFile(ctx, df, true, nil)
}

// FlushIno writes file ino back if it is dirty here.
func (e *Engine) FlushIno(ctx context.Context, ino uint64) error {
	df := e.File(ino)
	if df == nil {
		return nil
	}
	_, err := e.FlushFile(ctx, df)
	return err
}

// goneRetries bounds the write-backs of one flushFile that find the file
// renamed away under them.
const goneRetries = 3

// flushFile writes df's dirty blocks upstream and marks them clean; once
// none is left it retags the file's blocks with the version the upstream
// gave the result, so they are not fetched again. Writers of the file
// wait only for the bookkeeping of each block, not for the network: a
// block rewritten while it was on its way stays dirty. It returns the
// bytes written; progress (may be nil) gets the running count. A file
// renamed while its write-back opened it is written back under its new
// name; one removed upstream loses its dirty data. wait says whether a
// rename in flight through the front end may be waited for to tell the
// two apart (not during a recall: the rename may be waiting for it).
func (e *Engine) flushFile(ctx context.Context, df *File, wait bool, progress func(int64)) (int64, error) {
	df.flushing.Lock()
	defer df.flushing.Unlock()
	var done int64
	for try := 0; ; try++ {
		base := done
		n, path, err := e.flushPass(ctx, df, func(b int64) {
			if progress != nil {
				progress(base + b)
			}
		})
		done += n
		if !errors.Is(err, errGoneFile) {
			return done, err
		}
		if !e.renamedAway(df, path, err, wait) || try >= goneRetries {
			return done, nil // dropped, or left dirty for the next flush
		}
	}
}

// flushPass is one write-back of df under its current path, which it
// returns; errGoneFile: the path no longer names the file upstream.
func (e *Engine) flushPass(ctx context.Context, df *File, progress func(int64)) (int64, string, error) {
	df.mu.Lock()
	if df.gone {
		df.mu.Unlock()
		return 0, "", nil
	}
	e.mu.Lock()
	path := df.path
	e.mu.Unlock()
	if path == "" {
		df.mu.Unlock()
		return 0, "", nil // an orphan: never written back
	}
	idxs := make([]uint64, 0, len(df.blocks))
	for idx := range df.blocks {
		idxs = append(idxs, idx)
	}
	df.mu.Unlock()
	e.stats.passes.Add(1)
	slices.Sort(idxs)
	h := &handle{e: e, df: df, path: path}
	defer h.release()
	var done int64
	var last wire.Attr
	for _, idx := range idxs {
		n, attr, err := e.flushBlock(ctx, df, h, idx)
		if errors.Is(err, errGoneFile) {
			return done, path, err
		}
		if err != nil {
			return done, path, fmt.Errorf("write back %s: %w", path, err)
		}
		if n > 0 {
			last = attr
			done += int64(n)
			progress(done)
		}
	}
	df.mu.Lock()
	defer df.mu.Unlock()
	if !df.gone && len(df.blocks) == 0 {
		e.mu.Lock()
		times := df.times
		e.mu.Unlock()
		if times != nil {
			// Times set while dirty, which the writes just changed.
			if attr, err := h.setAttr(ctx, *times); err != nil {
				e.log.Warn("write-back: setting the times of a written-back file", "path", path, "err", err)
			} else {
				last = attr
			}
		}
		e.settle(df, last)
	}
	return done, path, nil
}

// renamedAway tells why df's write-back under path found the file gone
// from the upstream: renamed through the front end (its path has moved on
// since: true, write it back again) or removed (its dirty data is
// dropped). A rename in flight is waited for when wait allows: between
// the upstream's reply and the dirty files following it (AfterRename),
// the old path is already gone; otherwise the file stays dirty.
func (e *Engine) renamedAway(df *File, path string, err error, wait bool) bool {
	if wait {
		e.renaming.Lock()
	} else if !e.renaming.TryLock() {
		return false
	}
	defer e.renaming.Unlock()
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone {
		return false
	}
	e.mu.Lock()
	now := df.path
	if now != path {
		e.mu.Unlock()
		return true
	}
	// Gone under this name, it may live on under another one known here
	// (a link): it is written back there.
	promoted := e.promoteLocked(df)
	if promoted {
		delete(df.links, path)
	}
	e.mu.Unlock()
	if promoted {
		if err := e.record(df); err != nil {
			e.log.Warn("write-back: recording a dirty file's other name", "path", path, "err", err)
		}
		return true
	}
	e.log.Warn("write-back: the file is gone from "+e.cfg.Upstream+"; dropping its dirty data", "path", path, "err", err)
	e.drop(df)
	return false
}

// flushBlock writes one dirty block back and marks it clean unless it was
// rewritten meanwhile; it returns the bytes sent (0: nothing to send).
func (e *Engine) flushBlock(ctx context.Context, df *File, h *handle, idx uint64) (int, wire.Attr, error) {
	id, v := block.ID{File: df.ino, Index: idx}, block.Version(df.tag)
	df.mu.Lock()
	b, ok := df.blocks[idx]
	if df.gone || !ok {
		df.mu.Unlock()
		return 0, wire.Attr{}, nil
	}
	data, ok := e.disk.Get(id, v)
	df.mu.Unlock()
	if !ok {
		e.log.Warn("write-back: a dirty block is unreadable; its data is lost", "path", h.path, "block", idx)
		df.mu.Lock()
		e.cleaned(df, idx, b)
		df.mu.Unlock()
		return 0, wire.Attr{}, nil
	}
	attr, err := h.write(ctx, int64(idx)*int64(e.disk.BlockSize()), data)
	if err != nil {
		return 0, attr, err
	}
	e.stats.blocks.Add(1)
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone || df.blocks[idx] != b {
		return len(data), attr, nil // rewritten (or dropped) meanwhile: it stays dirty
	}
	if _, err := e.disk.MarkClean(id, v); err != nil {
		e.log.Warn("write-back: marking a block clean", "path", h.path, "err", err)
	}
	e.cleaned(df, idx, b)
	return len(data), attr, nil
}

// cleaned takes block idx off df's dirty blocks. Called with df.mu held.
func (e *Engine) cleaned(df *File, idx uint64, b dirtyBlock) {
	delete(df.blocks, idx)
	e.mu.Lock()
	df.bytes -= int64(b.n)
	e.dirty -= int64(b.n)
	e.frames--
	e.mu.Unlock()
}

// settle finishes a written-back file: it leaves the dirty set, its clean
// blocks take the upstream's new version (the memory tier reads them
// again from the disk tier at it), and the front end is told. Called with
// df.mu held.
func (e *Engine) settle(df *File, last wire.Attr) {
	e.forget(df)
	e.mem.RemoveFile(df.ino)
	if last.Ino != df.ino || last.Version == 0 {
		e.fe.Settled(df.ino, df.tag, wire.Attr{})
		return
	}
	if _, err := e.disk.Retag(df.ino, block.Version(df.tag), block.Version(last.Version)); err != nil {
		e.log.Warn("write-back: retagging written-back blocks", "err", err)
	}
	e.fe.Settled(df.ino, df.tag, last)
}
