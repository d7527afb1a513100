package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// Write delegations and their recall (issue 11): close-to-open across
// clients while one of them writes back.
//
// A write-back client that starts holding unflushed writes to a file sends
// DelegateWrite: the server grants it a callback of kind CallbackWrite on
// the file (callbacks.go, the one callback mechanism). Another client's
// open of the file — or its rename, setattr or unlink by path — recalls
// the delegation before it is served: the break
// goes out with Kind CallbackWrite, the holder writes the file back and
// then acks, and the open proceeds and sees the data. DelegateReturn
// (after a write-back) lowers the grant to an ordinary read callback.
//
// A holder that does not ack within RecallTimeout is disconnected, and the
// files it held delegations on become orphans: until a client of the same
// name (and certificate) comes back and declares or returns them (a
// restarted client writes back what its disk cache kept), an open of an
// orphan waits up to RecallTimeout and fails with EIO — or, with
// RecallStale, reads the last version written back. A holder whose
// connection drops also leaves orphans. An orphan lasts orphanLease at
// most (the holder's lease: its data stays in its cache, to be written
// back when it returns, but opens elsewhere no longer wait for it), and
// the server keeps maxOrphans at most, the oldest released first.
//
// A delegation is granted only to a client that may write the file
// (mayDelegate): any member could otherwise make any file, a root-only one
// included, an orphan whose opens fail.

// Recall timeout policies (serve --recall-timeout-policy).
const (
	RecallEIO   = "eio"
	RecallStale = "stale"
)

// DefaultRecallTimeout bounds a recall: the holder's write-back of one file.
const DefaultRecallTimeout = 20 * time.Second

// recalls is the server's write-delegation state.
type recalls struct {
	cb      *callbacks
	log     *slog.Logger
	timeout time.Duration
	stale   bool // RecallStale

	mu      sync.Mutex
	orphans map[uint64]orphan // file → the client that went away holding unflushed writes to it
	names   map[uint32]holder // the clients that took a delegation
	// granted: when each holder was last granted a delegation of each
	// file (mayDelegate lets it declare the file again: a recalled or
	// returned holder declares anew, and by then the path its
	// declaration names may be gone — the file renamed, unlinked, or a
	// proxy's client's name of it). At most maxGranted, each regrantAge.
	granted map[grantKey]time.Time

	recalled, failed, delegations atomic.Int64
}

func newRecalls(cb *callbacks, log *slog.Logger, timeout time.Duration, policy string) *recalls {
	return &recalls{cb: cb, log: log, timeout: timeout, stale: policy == RecallStale, orphans: make(map[uint64]orphan),
		names: make(map[uint32]holder), granted: make(map[grantKey]time.Time)}
}

// grantKey is a file a holder was granted a delegation of.
type grantKey struct {
	holder
	ino uint64
}

const (
	maxGranted = 1 << 16        // grants remembered (~100 bytes each)
	regrantAge = 24 * time.Hour // how long a grant lets its holder declare the file again
)

// noteGrantLocked remembers that h was granted a delegation of ino.
// Called with r.mu held.
func (r *recalls) noteGrantLocked(h holder, ino uint64, now time.Time) {
	k := grantKey{h, ino}
	if _, ok := r.granted[k]; !ok && len(r.granted) >= maxGranted {
		n := 0
		for old := range r.granted { // an eighth, at random: bounded work
			delete(r.granted, old)
			if n++; n >= maxGranted/8 {
				break
			}
		}
	}
	r.granted[k] = now
}

// grantedBefore reports whether cl's holder was granted a delegation of
// ino within regrantAge.
func (r *recalls) grantedBefore(cl *client, ino uint64, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.granted[grantKey{holderOf(cl), ino}]
	return ok && now.Sub(at) <= regrantAge
}

// holder names a client that holds delegations: its --name and the name
// in its certificate ("" without certificates).
type holder struct{ name, cert string }

func holderOf(cl *client) holder { return holder{cl.name, cl.cert} }

// orphan is a file a holder left with unflushed writes.
type orphan struct {
	holder
	since time.Time
}

// maxOrphans bounds the orphans the server keeps (~100 bytes each).
const maxOrphans = 1 << 16

// orphanLease is how long an orphan's opens wait for its holder to come
// back: six recall timeouts (two minutes by default).
func (r *recalls) orphanLease() time.Duration { return 6 * r.timeout }

// addOrphanLocked records ino as h's orphan, releasing the oldest orphan
// when there are maxOrphans already. Called with r.mu held.
func (r *recalls) addOrphanLocked(ino uint64, h holder, now time.Time) {
	if _, ok := r.orphans[ino]; !ok && len(r.orphans) >= maxOrphans {
		var oldest uint64
		var at time.Time
		for o, or := range r.orphans {
			if at.IsZero() || or.since.Before(at) {
				oldest, at = o, or.since
			}
		}
		delete(r.orphans, oldest)
		r.log.Warn("too many files left with unflushed writes: the oldest is released, its opens proceed", "max", maxOrphans, "holder", r.orphans[oldest].name)
	}
	r.orphans[ino] = orphan{holder: h, since: now}
}

// orphanOf is ino's orphan, if it has one whose lease has not run out (an
// expired one is released here).
func (r *recalls) orphanOf(ino uint64, now time.Time) (orphan, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.orphans[ino]
	if ok && now.Sub(o.since) > r.orphanLease() {
		delete(r.orphans, ino)
		r.log.Warn("the holder of unflushed writes to a file did not come back within its lease: opens of the file proceed", "file", ino, "holder", o.name, "lease", r.orphanLease().String())
		return orphan{}, false
	}
	return o, ok
}

// mayDelegate checks that cl may take a write delegation on dw.Ino: it
// opened the file for writing on this connection, or the caller m carries
// (squashed; the anonymous user without one) may write the file dw.Path
// names, checked on one descriptor opened as the caller, or the file is
// an orphan cl's name and certificate left (it declares it again), or the
// same holder was granted a delegation of it within regrantAge (after a
// recall or a return it declares again, and the path it names may be gone).
func (s *Server) mayDelegate(c *wire.Conn, cl *client, m wire.Msg, dw *wire.DelegateWrite) error {
	if s.cfg.ReadOnly {
		return fmt.Errorf("export is read-only: %w", syscall.EROFS)
	}
	if s.handles.openedForWriting(c, dw.Ino) {
		return nil
	}
	if o, ok := s.recalls.orphanOf(dw.Ino, time.Now()); ok && o.holder == holderOf(cl) {
		return nil
	}
	if s.recalls.grantedBefore(cl, dw.Ino, time.Now()) {
		return nil // it proved its right then; its path may be gone since
	}
	refused := fmt.Errorf("write delegation of file %d: this connection did not open it for writing and its path names no file the caller may write: %w", dw.Ino, syscall.EACCES)
	p, err := clean(dw.Path)
	if dw.Path == "" || err != nil || p == "." || !s.openat2 {
		return refused
	}
	id := s.anon()
	if as, ok := m.(*wire.As); ok {
		id = s.squash(as)
	}
	check := func() (wire.Msg, error) {
		fd, err := s.openBeneath(p, unix.O_PATH|unix.O_NOFOLLOW)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		if err := unix.Faccessat2(fd, "", unix.W_OK, unix.AT_EACCESS|unix.AT_EMPTY_PATH); err != nil {
			return nil, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != dw.Ino {
			return nil, syscall.ESTALE
		}
		return nil, nil
	}
	if s.switchCreds && !s.ownIdentity(id) {
		_, err = s.runAs(c, id, check)
	} else {
		_, err = check()
	}
	if err != nil {
		return refused
	}
	return nil
}

// serve handles the delegation messages and recalls before an open; done
// is true when it answered the request itself.
func (r *recalls) serve(ctx context.Context, s *Server, cl *client, m wire.Msg) (reply wire.Msg, done bool, err error) {
	var path string
	switch m := m.(type) {
	case *wire.DelegateWrite:
		if cl == nil {
			return nil, true, syscall.EPROTO
		}
		if !r.delegate(cl, m.Ino) {
			return nil, true, fmt.Errorf("write delegations need callbacks: register first: %w", syscall.EOPNOTSUPP)
		}
		// What other clients hold of the file is about to go stale: a
		// client that answers opens from its callbacks must ask again
		// (and so be recalled).
		r.cb.Break(ctx, []wire.BreakItem{{Ino: m.Ino}}, cl.id)
		return &wire.OK{}, true, nil
	case *wire.DelegateReturn:
		if cl == nil {
			return nil, true, syscall.EPROTO
		}
		if m.Ino == wire.SettledIno {
			r.settled(cl)
		} else {
			r.giveBack(cl, m.Ino)
		}
		return &wire.OK{}, true, nil
	case *wire.Open:
		path = m.Path
	case *wire.OpenPinned:
		path = m.Path
	case *wire.OpenRead:
		path = m.Path
	case *wire.Create:
		path = m.Path
	case *wire.Rename:
		// The holder writes back by path: it must do so before the
		// file moves under it.
		path = m.Old
	case *wire.SetAttr:
		// A truncation (or a mode, owner or times) by another client
		// applies to the data the holder wrote: it must be here first,
		// or its write-back would undo the change.
		path = m.Path
	case *wire.Unlink:
		// The file may live on under another name the holder does not
		// know: its data must reach it before this name goes.
		path = m.Path
	default:
		return nil, false, nil
	}
	if !r.busy() {
		return nil, false, nil
	}
	if mv, ok := m.(*wire.Rename); ok && s.isDir(mv.Old) {
		// The holders write back by path: every file below the
		// directory moves under them. The server knows its delegations
		// by file, not by path: every one another client holds is
		// recalled (a directory rename is rare; a write-back is cheap
		// next to data dropped).
		if err := r.recallAll(ctx, cl, path); err != nil {
			return nil, true, err
		}
		return nil, false, nil
	}
	if mv, ok := m.(*wire.Rename); ok {
		// The file renamed over may live on under another name the
		// holder does not know: its data must reach it first.
		if ino := s.inoOf(mv.New); ino != 0 {
			if err := r.recall(ctx, cl, ino, mv.New); err != nil {
				return nil, true, err
			}
		}
	}
	ino := s.inoOf(path)
	if ino == 0 {
		return nil, false, nil
	}
	if err := r.recall(ctx, cl, ino, path); err != nil {
		return nil, true, err
	}
	return nil, false, nil
}

// recallAll recalls every write delegation a client other than opener
// holds, before a change under path that moves their paths.
func (r *recalls) recallAll(ctx context.Context, opener *client, path string) error {
	var except uint32
	if opener != nil {
		except = opener.id
	}
	r.cb.mu.Lock()
	var inos []uint64
	for ino, hs := range r.cb.t.holders {
		for c, k := range hs {
			if c != except && k == wire.CallbackWrite {
				inos = append(inos, ino)
				break
			}
		}
	}
	r.cb.mu.Unlock()
	var errs []error
	for _, ino := range inos {
		if err := r.recall(ctx, opener, ino, path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// busy reports whether any delegation or orphan exists (else an open
// needs no lookup).
func (r *recalls) busy() bool {
	r.mu.Lock()
	orphans := len(r.orphans)
	r.mu.Unlock()
	return orphans > 0 || r.delegations.Load() > 0
}

// delegate grants cl a write delegation on ino; false if cl is not
// registered for callbacks.
func (r *recalls) delegate(cl *client, ino uint64) bool {
	cb := r.cb
	cb.mu.Lock()
	if cb.conns[cl.id] == nil {
		cb.mu.Unlock()
		return false
	}
	if k := cb.t.holders[ino][cl.id]; k != wire.CallbackWrite {
		cb.t.grant(cl.id, cb.t.seq, grantObj{ino: ino, kind: wire.CallbackWrite})
		r.delegations.Add(1)
	}
	cb.mu.Unlock()
	r.mu.Lock()
	r.names[cl.id] = holderOf(cl)
	r.noteGrantLocked(holderOf(cl), ino, time.Now())
	r.mu.Unlock()
	r.adopt(cl, ino)
	return true
}

// giveBack lowers cl's write delegation on ino to a read callback.
func (r *recalls) giveBack(cl *client, ino uint64) {
	cb := r.cb
	cb.mu.Lock()
	if h := cb.t.holders[ino]; h != nil && h[cl.id] == wire.CallbackWrite {
		h[cl.id] = wire.CallbackRead
		r.delegations.Add(-1)
	}
	cb.mu.Unlock()
	r.adopt(cl, ino)
}

// settled clears the orphans cl's name left that cl did not declare again
// (delegate adopts those): a restarted client that wrote them back before
// its predecessor's DelegateReturn got out, or that lost its cache, holds
// nothing for them, and opens of them need not wait for the recall timeout.
func (r *recalls) settled(cl *client) {
	r.mu.Lock()
	n := 0
	for ino, o := range r.orphans {
		if o.holder == holderOf(cl) {
			delete(r.orphans, ino)
			n++
		}
	}
	r.mu.Unlock()
	if n > 0 {
		r.log.Info("a returning client holds no unflushed writes to the files its name left: their opens proceed", "client", cl.id, "name", cl.name, "files", n)
	}
}

// adopt clears ino's orphan when cl is the client that left it.
func (r *recalls) adopt(cl *client, ino uint64) {
	r.mu.Lock()
	if o, ok := r.orphans[ino]; ok && o.holder == holderOf(cl) {
		delete(r.orphans, ino)
	}
	r.mu.Unlock()
}

// orphanLocked records the write delegations of a client whose callbacks
// are being forgotten (its connection ended, or it did not ack a break)
// as orphans. Called with callbacks.mu held.
func (r *recalls) orphanLocked(id uint32) {
	cb := r.cb
	if cb.t.held[id] == 0 {
		r.mu.Lock()
		delete(r.names, id)
		r.mu.Unlock()
		return
	}
	var files []uint64
	for o, h := range cb.t.holders {
		if h[id] == wire.CallbackWrite {
			files = append(files, o)
		}
	}
	if len(files) == 0 {
		return
	}
	r.delegations.Add(-int64(len(files)))
	r.mu.Lock()
	h, now := r.names[id], time.Now()
	for _, o := range files {
		r.addOrphanLocked(o, h, now)
	}
	delete(r.names, id)
	r.mu.Unlock()
	r.log.Warn("a client left holding unflushed writes: opens of those files wait for it to come back",
		"client", id, "name", h.name, "files", len(files), "lease", r.orphanLease().String())
}

// recall makes the holders of write delegations on ino (other than the
// opener) write it back before the open goes on.
func (r *recalls) recall(ctx context.Context, opener *client, ino uint64, path string) error {
	var except uint32
	if opener != nil {
		except = opener.id
	}
	cb := r.cb
	cb.mu.Lock()
	write := false
	for c, k := range cb.t.holders[ino] {
		write = write || (c != except && k == wire.CallbackWrite)
	}
	var msgs map[uint32]*wire.CallbackBreak
	conns := map[uint32]*wire.Conn{}
	if write {
		msgs = cb.t.take([]wire.BreakItem{{Ino: ino}}, except)
		for c, m := range msgs {
			conns[c] = cb.conns[c]
			if m.Kind == wire.CallbackWrite {
				r.delegations.Add(-1)
			}
		}
	}
	cb.mu.Unlock()
	if !write {
		return r.waitOrphan(ctx, opener, ino, path)
	}
	wire.HandOver(ctx) // an inline open waits for other clients from here
	var wg sync.WaitGroup
	// A holder that did not write back: in time (failed), or because its
	// connection ended first (left: the file is its orphan, waited for as
	// any orphan is).
	var (
		mu           sync.Mutex
		failed, left *holder
	)
	for id, m := range msgs {
		c := conns[id]
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			acked, dropped := r.send(ctx, id, c, m)
			if acked || m.Kind != wire.CallbackWrite {
				return
			}
			h := &holder{}
			if hc, ok := c.Value.Load().(*client); ok {
				*h = holderOf(hc)
			}
			mu.Lock()
			defer mu.Unlock()
			if dropped {
				left = h
			} else {
				failed = h
			}
		}()
	}
	wg.Wait()
	if failed == nil && left == nil && ctx.Err() == nil {
		r.recalled.Add(1)
		return nil
	}
	h := cmp.Or(failed, left, &holder{})
	r.mu.Lock()
	r.addOrphanLocked(ino, *h, time.Now())
	r.mu.Unlock()
	if failed == nil && left != nil && ctx.Err() == nil {
		return r.waitOrphan(ctx, opener, ino, path)
	}
	r.failed.Add(1)
	return r.unreachable(path, h.name)
}

// send delivers one break with the recall timeout and reports whether the
// holder acked, and if not, whether its connection had ended; one that
// did not ack in time is disconnected (callbacks.send).
func (r *recalls) send(ctx context.Context, client uint32, c *wire.Conn, m *wire.CallbackBreak) (acked, dropped bool) {
	cb := r.cb
	cb.breaksSent.Add(1)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	_, err := c.Call(cctx, m)
	if err == nil {
		return true, false
	}
	if c.Err() != nil {
		return false, true
	}
	r.log.Warn("a client did not write back a recalled file in time: disconnecting it",
		"client", client, "timeout", r.timeout.String(), "err", err)
	cb.disconnect(client, c) // its delegations become orphans (beforeDrop)
	return false, false
}

// waitOrphan waits up to the recall timeout for the client that left ino
// with unflushed writes to come back (its own opens go through).
func (r *recalls) waitOrphan(ctx context.Context, opener *client, ino uint64, path string) error {
	deadline := time.Now().Add(r.timeout)
	for {
		o, ok := r.orphanOf(ino, time.Now())
		if !ok || (opener != nil && o.holder == holderOf(opener)) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return r.unreachable(path, o.name)
		}
		wire.HandOver(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// unreachable is what an open of a file whose unflushed writes cannot be
// recalled gets: EIO, or nothing under RecallStale (the last version
// written back is served).
func (r *recalls) unreachable(path, holder string) error {
	if r.stale {
		r.log.Warn("serving the last written-back version: the holder of unflushed writes did not answer",
			"path", path, "holder", holder)
		return nil
	}
	return fmt.Errorf("%s: client %q holds unflushed writes to it and did not write them back within %v (serve --recall-timeout-policy stale serves the last written-back version): %w",
		path, holder, r.timeout, syscall.EIO)
}

// isDir reports whether p names a directory of the export.
func (s *Server) isDir(p string) bool {
	c, err := clean(p)
	if err != nil {
		return false
	}
	fi, err := s.lstatAny(c)
	return err == nil && fi.IsDir()
}
