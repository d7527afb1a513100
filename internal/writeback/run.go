package writeback

import (
	"context"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Start rebuilds the dirty files a previous run left (the disk tier's
// dirty frames paired with the journal's records), declares them upstream
// — and then that nothing else is unflushed here, also when nothing is
// left — writes them back (within RecoverTimeout; the rest in the
// background) and starts the background flusher. What fails is logged:
// the data stays dirty for the next flush. The front end calls it before
// it serves.
func (e *Engine) Start(ctx context.Context) {
	if err := e.recover(ctx); err != nil {
		e.log.Warn("write-back: data left dirty by the previous run is kept for the next flush", "err", err)
	}
	e.mu.Lock()
	e.started = true
	e.mu.Unlock()
	go e.loop()
}

// recover is Start's recovery. A dirty frame without a record cannot be
// placed: it is kept, with a warning.
func (e *Engine) recover(ctx context.Context) error {
	files, lost, settled, err := e.journal.Recover(e.disk)
	for _, ino := range settled {
		e.giveBack(ino) // written back before a crash that came before its return (deleg.go)
	}
	for _, id := range lost {
		e.log.Warn("write-back: a dirty block has no journal record; it is kept but cannot be written back", "file", id.File, "block", id.Index)
	}
	if err != nil {
		return err
	}
	now := time.Now()
	e.mu.Lock()
	for ino, rf := range files {
		r := rf.Record
		df := &File{ino: ino, tag: r.Version, caller: r.Caller, hasCaller: r.Caller.UID != noUID, blocks: map[uint64]dirtyBlock{},
			path: r.Path, size: rf.Size, bytes: rf.Bytes, mtime: now.UnixNano(), since: now, shown: r.Version}
		if !df.hasCaller {
			df.caller = vfs.Caller{}
		}
		if e.cfg.Mint != nil {
			df.shown = e.cfg.Mint()
		}
		df.attr = wire.Attr{Ino: ino, Mode: 0o100644, Size: uint64(rf.Size), Version: r.Version}
		for idx, n := range rf.Blocks {
			df.blocks[idx] = dirtyBlock{n: n}
		}
		e.files[ino] = df
		e.dirty += rf.Bytes
		e.frames += int64(len(rf.Blocks))
	}
	dirty := e.dirty
	e.mu.Unlock()
	if e.cfg.RecoverTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.RecoverTimeout)
		defer cancel()
	}
	// The upstream may hold the files for us since we left.
	gen, err := e.fe.Gen(ctx)
	if err != nil {
		return err
	}
	select {
	case <-e.declare(gen):
	case <-ctx.Done():
		return ctx.Err()
	}
	if len(files) == 0 {
		return nil
	}
	e.log.Info("write-back: writing back data left dirty by the previous run", "files", len(files), "bytes", block.Size(dirty).String())
	p, err := e.flushAll(ctx, nil, nil)
	e.log.Info("write-back: recovered", "files", p.Files, "bytes", block.Size(p.Bytes).String())
	return err
}

// loop is the background flusher: once a second (or when nudged) it syncs
// the dirty frames and writes back the files dirty for longer than Delay,
// and the oldest files while dirty data is over the high-water mark.
func (e *Engine) loop() {
	defer close(e.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		case <-e.kick:
		}
		if err := e.Sync(); err != nil {
			e.log.Warn("write-back: syncing the disk cache", "err", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-e.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		e.background(ctx)
		cancel()
	}
}

func (e *Engine) background(ctx context.Context) {
	cutoff := time.Now().Add(-e.cfg.Delay)
	e.mu.Lock()
	over := e.overLocked()
	dirty := len(e.files) > 0
	e.mu.Unlock()
	if dirty {
		// Reconnect if the connection was lost: the upstream learns again
		// which files we hold unflushed writes to (Reconnected).
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		e.fe.Gen(cctx)
		cancel()
	}
	pick := func(df *File) bool { return df.since.Before(cutoff) }
	if over {
		pick = nil // everything, oldest first
	}
	if _, err := e.flushAll(ctx, nil, pick); err != nil && ctx.Err() == nil {
		e.log.Warn("write-back: background flush failed; it is tried again", "err", err)
	}
}

// Close stops the flusher, writes back what it can within CloseTimeout
// (what is left stays on disk for the next run), waits for the delegations
// on their way back, and closes the journal. The front end calls it
// before it closes its connection; later calls return the first one's
// error.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.close() })
	return e.closeErr
}

func (e *Engine) close() error {
	e.mu.Lock()
	started := e.started
	e.mu.Unlock()
	if started {
		close(e.stop)
		<-e.done
	}
	if err := e.Sync(); err != nil {
		e.log.Warn("write-back: syncing the disk cache at close", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.CloseTimeout)
	defer cancel()
	if p, err := e.flushAll(ctx, nil, nil); err != nil {
		e.log.Warn("write-back: dirty data left on disk for the next run", "files", p.TotalFiles-p.Files, "err", err)
	}
	e.awaitReturns(ctx)
	return e.journal.Close()
}
