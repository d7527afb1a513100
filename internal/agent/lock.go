package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Advisory locks are held by the server (wire types 90–94), so a lock taken
// through one mount is seen through every other. The agent only remembers
// which lock owners hold fcntl locks on which file, so that a close sends
// LockRelease only when there is something to release.

// SupportsLocks implements fusefs.LockBackend.
func (a *Agent) SupportsLocks() bool { return true }

// lockOwners is the fcntl lock owners of this client, per file.
type lockOwners struct {
	mu sync.Mutex
	m  map[uint64]map[uint64]struct{} // file id → owners
}

func (o *lockOwners) add(ino, owner uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[uint64]map[uint64]struct{})
	}
	if o.m[ino] == nil {
		o.m[ino] = make(map[uint64]struct{})
	}
	o.m[ino][owner] = struct{}{}
}

// take reports whether owner may hold locks on ino and forgets it.
func (o *lockOwners) take(ino, owner uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.m[ino][owner]; !ok {
		return false
	}
	delete(o.m[ino], owner)
	if len(o.m[ino]) == 0 {
		delete(o.m, ino)
	}
	return true
}

func (f *file) ino() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attr.Ino
}

// GetLock implements fusefs.LockFile.
func (f *file) GetLock(ctx context.Context, owner uint64, flock bool, lk wire.Lock) (wire.Lock, error) {
	r, err := f.call(ctx, func(h uint64) wire.Msg {
		return &wire.LockTest{Handle: h, Owner: owner, Flock: flock, Lock: lk}
	}, true)
	if err != nil {
		return wire.Lock{}, err
	}
	lr, ok := r.(*wire.LockReply)
	if !ok {
		return wire.Lock{}, fmt.Errorf("getlk: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	return lr.Lock, nil
}

// SetLock implements fusefs.LockFile. A blocking request is sent again
// whenever the server's wait slice ends (EINPROGRESS), so that no server
// handler waits for long; when ctx ends (the FUSE request was interrupted)
// the server is told to cancel the wait, and its answer — EINTR, or OK if
// the lock was granted first — is what the caller gets.
func (f *file) SetLock(ctx context.Context, owner uint64, flock bool, lk wire.Lock, wait bool) error {
	f.locked.Store(true)
	if err := f.endHold(ctx, false); err != nil {
		return err // a locker expects the data it wrote before on the server
	}
	if !flock && lk.Type != wire.LockUnlock {
		f.a.lockOwners.add(f.ino(), owner)
	}
	for {
		done := make(chan error, 1)
		go func() {
			_, err := f.call(context.WithoutCancel(ctx), func(h uint64) wire.Msg {
				return &wire.LockSet{Handle: h, Owner: owner, Flock: flock, Wait: wait, Lock: lk}
			}, false)
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-ctx.Done():
			f.call(context.WithoutCancel(ctx), func(h uint64) wire.Msg {
				return &wire.LockCancel{Handle: h, Owner: owner}
			}, true)
			if err = <-done; errors.Is(err, syscall.EINPROGRESS) {
				err = syscall.EINTR
			}
			return err
		}
		if wait && errors.Is(err, syscall.EINPROGRESS) {
			continue
		}
		return err
	}
}

// ReleaseLocks implements fusefs.LockFile.
func (f *file) ReleaseLocks(ctx context.Context, owner uint64) error {
	if !f.a.lockOwners.take(f.ino(), owner) {
		return nil
	}
	_, err := f.call(ctx, func(h uint64) wire.Msg {
		return &wire.LockRelease{Handle: h, Owner: owner}
	}, true)
	return err
}

// Revalidate implements fusefs.LockFile: it asks the server for the file's
// version and, when it moved since this open file last saw it, makes this
// open file see the new one (cached blocks of the old version are dropped).
func (f *file) Revalidate(ctx context.Context) (bool, error) {
	at, err := f.Attr(ctx) // a file with dirty data here keeps its version (writeback_attr.go)
	if err != nil {
		return false, err
	}
	f.mu.Lock()
	changed := at.Version != f.attr.Version
	if changed {
		f.attr = at
	}
	f.mu.Unlock()
	if changed {
		f.a.noteVersion(at.Ino, at.Version)
	}
	return changed, nil
}

// OpenPinned implements fusefs.PinnedOpener.
func (a *Agent) OpenPinned(ctx context.Context, path string, flags uint32, ino, gen uint64) (vfs.File, wire.Attr, error) {
	return a.open(ctx, &wire.OpenPinned{Path: path, Flags: flags, Ino: ino, Gen: gen}, path, flags)
}

// LookupPinned implements fusefs.PinnedOpener.
func (a *Agent) LookupPinned(ctx context.Context, path string) (wire.Attr, error) {
	tok := a.cbs.token()
	attr, err := a.settledAttr(func() (wire.Attr, error) { // a file with dirty data here (writeback_attr.go)
		return a.attrCall(ctx, &wire.LookupPinned{Path: path}, true)
	}, a.getAttr(ctx, path))
	if err == nil {
		a.cbs.install(ctx, tok, path, attr)
	}
	return attr, err
}
