package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/wire"
)

// Advisory locks. When the backend's files implement LockFile, the mount
// asks the kernel to send fcntl and flock locks to it (go-fuse's
// EnableLocks) instead of keeping them in the kernel, where other mounts
// would not see them; the backend has them held by the server.
//
// The kernel's lock owner comes with every lock request. fcntl locks also
// end when their owner closes any descriptor of the file: the kernel then
// sends FLUSH with that owner, and go-fuse's node API does not pass the
// owner on, so the mount wraps go-fuse's raw file system (ownerRaw) to
// note it for the request. flock and OFD locks end with the open file:
// the backend drops them when the file is released.

// LockFile is an optional File interface: locks held outside the kernel.
type LockFile interface {
	// GetLock returns a lock that conflicts with lk for owner, or one of
	// type wire.LockUnlock.
	GetLock(ctx context.Context, owner uint64, flock bool, lk wire.Lock) (wire.Lock, error)
	// SetLock takes, changes or drops owner's lock. With wait it waits for
	// a conflicting lock to go away, until ctx ends (the FUSE request was
	// interrupted: EINTR); without it a conflict is EAGAIN.
	SetLock(ctx context.Context, owner uint64, flock bool, lk wire.Lock, wait bool) error
	// ReleaseLocks drops owner's fcntl locks on the file: the owner closed
	// a descriptor of it.
	ReleaseLocks(ctx context.Context, owner uint64) error
	// Revalidate reports whether the file's content changed on the server
	// since this open file last saw it, and makes it see the new content.
	// Taking a lock revalidates (as NFS does), so that a program that
	// coordinates through locks (SQLite) never reads pages older than the
	// last writer's unlock.
	Revalidate(ctx context.Context) (bool, error)
}

// LockBackend is an optional Backend interface: a backend whose files are
// LockFiles says so, and its mounts send locks to it.
type LockBackend interface {
	SupportsLocks() bool
}

var (
	_ fs.NodeGetlker  = (*node)(nil)
	_ fs.NodeSetlker  = (*node)(nil)
	_ fs.NodeSetlkwer = (*node)(nil)
)

func lockFile(fh fs.FileHandle) (LockFile, bool) {
	h, ok := fh.(*handle)
	if !ok {
		return nil, false
	}
	lf, ok := h.f.(LockFile)
	return lf, ok
}

func toWireLock(lk *fuse.FileLock) wire.Lock {
	return wire.Lock{Type: lk.Typ, Start: lk.Start, End: lk.End, Pid: lk.Pid}
}

func isFlock(flags uint32) bool { return flags&fuse.FUSE_LK_FLOCK != 0 }

// Getlk implements F_GETLK.
func (n *node) Getlk(ctx context.Context, fh fs.FileHandle, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	lf, ok := lockFile(fh)
	if !ok {
		return syscall.ENOLCK
	}
	got, err := lf.GetLock(keep(ctx), owner, isFlock(flags), toWireLock(lk))
	if err != nil {
		return n.a.errno("getlk", "", err)
	}
	*out = fuse.FileLock{Typ: got.Type, Start: got.Start, End: got.End, Pid: got.Pid}
	return 0
}

// Setlk implements F_SETLK and non-blocking flock.
func (n *node) Setlk(ctx context.Context, fh fs.FileHandle, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	lf, ok := lockFile(fh)
	if !ok {
		return syscall.ENOLCK
	}
	if err := lf.SetLock(keep(ctx), owner, isFlock(flags), toWireLock(lk), false); err != nil {
		return n.a.errno("setlk", "", err)
	}
	return n.locked(ctx, lf, lk)
}

// locked revalidates the file after a lock was taken: pages the kernel
// cached before another client's last write under the lock are dropped.
func (n *node) locked(ctx context.Context, lf LockFile, lk *fuse.FileLock) syscall.Errno {
	if lk.Typ == syscall.F_UNLCK {
		return 0
	}
	changed, err := lf.Revalidate(keep(ctx))
	if err != nil {
		return n.a.errno("revalidate", "", err)
	}
	if changed {
		n.NotifyContent(0, 0) // best effort: drops the inode's pages and attributes
		n.forgetSiblings()
	}
	return 0
}

// maxSiblingNotify bounds the entries a lock drops from the kernel's cache.
const maxSiblingNotify = 1024

// forgetSiblings drops the kernel's cached entries of the names beside the
// node, so that the next lookup of each asks the server: another client
// changed the file under its lock and may have created or removed files
// beside it (SQLite's journal, which the next locker checks with access()).
func (n *node) forgetSiblings() {
	name, parent := n.Parent()
	if parent == nil {
		return
	}
	kids := parent.Children()
	if len(kids) > maxSiblingNotify {
		return
	}
	for k := range kids {
		if k != name {
			parent.NotifyEntry(k)
		}
	}
}

// Setlkw implements F_SETLKW and blocking flock. It is the one operation
// besides read that stays interruptible: a signal to the waiting process
// ends the wait with EINTR, as on a local file system.
func (n *node) Setlkw(ctx context.Context, fh fs.FileHandle, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	lf, ok := lockFile(fh)
	if !ok {
		return syscall.ENOLCK
	}
	if err := lf.SetLock(ctx, owner, isFlock(flags), toWireLock(lk), true); err != nil {
		return n.a.errno("setlkw", "", err)
	}
	return n.locked(ctx, lf, lk)
}

// flushLocks drops the fcntl locks of the owner that closed a descriptor.
func (n *node) flushLocks(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	lf, ok := lockFile(fh)
	if !ok {
		return 0
	}
	owner, ok := n.a.owners.of(ctx)
	if !ok {
		return 0
	}
	return n.a.errno("flush locks", "", lf.ReleaseLocks(keep(ctx), owner))
}

// flushOwners remembers the lock owner of each FLUSH request in flight,
// by the request's cancel channel (unique while the request runs; go-fuse
// hands it to the node as fuse.Context.Cancel).
type flushOwners struct{ m sync.Map }

func (o *flushOwners) of(ctx context.Context) (uint64, bool) {
	fc, ok := ctx.(*fuse.Context)
	if !ok || fc.Cancel == nil {
		return 0, false
	}
	v, ok := o.m.Load(fc.Cancel)
	if !ok {
		return 0, false
	}
	return v.(uint64), true
}

// ownerRaw is go-fuse's raw file system with the FLUSH lock owner noted.
type ownerRaw struct {
	fuse.RawFileSystem
	owners *flushOwners
}

func (r *ownerRaw) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	r.owners.m.Store(cancel, in.LockOwner)
	defer r.owners.m.Delete(cancel)
	return r.RawFileSystem.Flush(cancel, in)
}

// mountFS mounts root like fs.Mount does, with the FLUSH owner noted and
// locks sent to the file system when root is a coopfs node over a backend
// that supports them.
func mountFS(dir string, root fs.InodeEmbedder, opts *fs.Options) (*fuse.Server, error) {
	n, ok := root.(*node)
	if !ok {
		return fs.Mount(dir, root, opts)
	}
	var raw fuse.RawFileSystem = fs.NewNodeFS(root, opts)
	if n.a.locks {
		opts.MountOptions.EnableLocks = true
		raw = &ownerRaw{RawFileSystem: raw, owners: &n.a.owners}
	}
	raw = &umaskRaw{RawFileSystem: raw, u: &n.a.umasks}
	server, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, err
	}
	return server, nil
}
