package writeback

import (
	"context"
	"errors"
	"syscall"

	"github.com/coopfs/coopfs/internal/wire"
)

// Write delegations (internal/server/recall.go): a file with dirty data
// here is declared upstream with DelegateWrite before the write that made
// it dirty is answered, so that another client's open of it recalls the
// data first — a CallbackBreak of kind CallbackWrite, answered (Recall)
// once the file is written back. After a write-back the delegation is
// returned (DelegateReturn). On every new connection the dirty files are
// declared again (the upstream forgot them with the old one), and then the
// upstream is told that nothing else is unflushed here (DelegateReturn of
// wire.SettledIno): what this client's name left orphaned — a delegation
// whose return a crash cut off, a record lost with the cache — is
// released at once instead of failing opens after the recall timeout.
// That is the one fix orphaned delegations need; Start, which connects and
// declares even with no dirty file left, makes it reach a restarted proxy
// as well as a mount. (The journal's records without dirty frames are also
// returned at Start, one by one: they free those files before the
// declarations are done, and even if one of those fails.)

// delegate declares ino's unflushed writes upstream. An upstream without
// delegations (or a mount without callbacks) answers EOPNOTSUPP or ENOSYS:
// close-to-open across clients then holds only after a write-back, and the
// engine says so once. It reports false on any other failure.
//
// The declaration names the file's path and goes as its writer: the
// upstream grants it only to a writer that may write the file (one that
// opened it on this very connection may; one declaring again on a new
// connection proves it by the path).
func (e *Engine) delegate(ctx context.Context, df *File) bool {
	e.mu.Lock()
	m := &wire.DelegateWrite{Ino: df.ino, Path: df.path}
	e.mu.Unlock()
	ino := df.ino
	_, _, err := e.fe.Call(ctx, as(df, m))
	switch {
	case err == nil:
	case errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS):
		e.NoDelegations(err)
	default:
		e.log.Warn("write-back: declaring unflushed writes to "+e.cfg.Upstream+" failed; it is tried again on the next connection", "file", ino, "err", err)
		return false
	}
	return true
}

// NoDelegations warns, once, that the upstream grants no write
// delegations (a front end whose callback registration was refused says
// so too).
func (e *Engine) NoDelegations(err error) {
	e.noDeleg.Do(func() {
		e.log.Warn("write-back: "+e.cfg.Upstream+" grants no write delegations (no callbacks): other clients see the writes made here only after they are written back", "err", err)
	})
}

// giveBack returns ino's delegation in the background. Returns of one file
// go in order, a new declaration of it waits for them (awaitReturn: else
// the return could reach the upstream after it and undo it), and Close
// waits for all.
func (e *Engine) giveBack(ino uint64) {
	e.mu.Lock()
	prev := e.returning[ino]
	ch := make(chan struct{})
	e.returning[ino] = ch
	e.mu.Unlock()
	go func() {
		if prev != nil {
			<-prev
		}
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RequestTimeout)
		e.fe.Call(ctx, &wire.DelegateReturn{Ino: ino})
		cancel()
		e.mu.Lock()
		if e.returning[ino] == ch {
			delete(e.returning, ino)
		}
		e.mu.Unlock()
		close(ch)
	}()
}

// awaitReturn waits until no return of ino's delegation is on its way.
func (e *Engine) awaitReturn(ctx context.Context, ino uint64) error {
	e.mu.Lock()
	ch := e.returning[ino]
	e.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitReturns waits until every return on its way is answered, or ctx ends.
func (e *Engine) awaitReturns(ctx context.Context) {
	for {
		e.mu.Lock()
		var ch chan struct{}
		for _, c := range e.returning {
			ch = c
			break
		}
		e.mu.Unlock()
		if ch == nil {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// Reconnected declares every dirty file again, in the background: the
// front end calls it when a new connection is up.
func (e *Engine) Reconnected() {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RequestTimeout)
		gen, err := e.fe.Gen(ctx)
		cancel()
		if err == nil {
			e.declare(gen)
		}
	}()
}

// declare declares every dirty file on connection gen, once per
// connection, and returns a channel closed when that is done.
func (e *Engine) declare(gen uint64) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.declDone != nil && e.declGen == gen {
		return e.declDone
	}
	ch := make(chan struct{})
	e.declGen, e.declDone = gen, ch
	dfs := make([]*File, 0, len(e.files))
	for _, df := range e.files {
		if df.path != "" { // an orphan's delegation went back (Removed)
			dfs = append(dfs, df)
		}
	}
	go func() {
		defer close(ch)
		e.declareAll(dfs)
	}()
	return ch
}

// declareAll declares dfs and then, when every declaration went through,
// says that nothing else is unflushed here (wire.SettledIno).
func (e *Engine) declareAll(dfs []*File) {
	call := func(f func(ctx context.Context) bool) bool {
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RequestTimeout)
		defer cancel()
		return f(ctx)
	}
	for _, df := range dfs {
		if !call(func(ctx context.Context) bool { return e.delegate(ctx, df) }) {
			return
		}
	}
	call(func(ctx context.Context) bool {
		_, _, err := e.fe.Call(ctx, &wire.DelegateReturn{Ino: wire.SettledIno})
		return err == nil
	})
}

// Recall answers the upstream's recall of write delegations (a break of
// kind CallbackWrite; others are ignored): each file named is written back
// before the front end acks, so the opener that caused it sees its data.
//
// One write-back suffices: it sends every block that was dirty when it
// started, so every write that completed before the recall is upstream
// after it. What it leaves dirty was written during the recall, after the
// opener's open: the upstream took the delegation with the recall, so it
// is declared again, and the next open elsewhere recalls it in turn.
func (e *Engine) Recall(ctx context.Context, m *wire.CallbackBreak) {
	if m.Kind != wire.CallbackWrite {
		return
	}
	for _, it := range m.Items {
		df := e.File(it.Ino)
		if df == nil {
			continue
		}
		e.stats.recalls.Add(1)
		if _, err := e.flushFile(ctx, df, false, nil); err != nil {
			e.log.Warn("write-back: a recalled file could not be written back", "file", it.Ino, "err", err)
			continue
		}
		df.mu.Lock()
		e.mu.Lock()
		dirty := !df.gone && df.path != "" && len(df.blocks) > 0
		e.mu.Unlock()
		if dirty {
			e.delegate(ctx, df) // under df.mu: no return of it can overtake
		}
		df.mu.Unlock()
	}
}
