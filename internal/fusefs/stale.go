package fusefs

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Names replaced by other clients. The kernel caches name → inode for the
// entry timeout; another client may rename a file over the name (or remove
// it) in that time. The open of such a name must neither fail nor return a
// mix of two files:
//
//   - An open whose name now denotes another file than the node (or none)
//     answers ESTALE: the kernel then walks the path again with a fresh
//     lookup (LOOKUP_REVAL) and opens the inode that lookup returns.
//   - That second open may race with the next rename. It asks the backend
//     for the very file its lookup found (PinnedOpener): the server opens
//     the name, and if it has moved on since, the file its lookup pinned a
//     moment ago. The retry therefore succeeds, or fails with the fresh
//     lookup's ENOENT when the name is really gone.

// PinnedOpener is an optional Backend interface: Open of a read-only file
// that the kernel knows as (ino, gen), which the server found at the name
// in a lookup a moment ago.
type PinnedOpener interface {
	OpenPinned(ctx context.Context, path string, flags uint32, ino, gen uint64) (vfs.File, wire.Attr, error)
	// LookupPinned is Lookup that has the server pin the file it finds
	// for the OpenPinned that follows.
	LookupPinned(ctx context.Context, path string) (wire.Attr, error)
}

// lookupBackend looks a name up; the lookup of a name whose open was just
// answered ESTALE (the kernel's fresh lookup before its retry) pins the file.
func (n *node) lookupBackend(ctx context.Context, p string) (wire.Attr, error) {
	if po, ok := n.a.b.(PinnedOpener); ok {
		if _, stale := n.a.stale.since(p); stale {
			return po.LookupPinned(ctx, p)
		}
	}
	return n.a.b.Lookup(ctx, p)
}

// staleNames is the paths whose open was answered ESTALE a moment ago: the
// kernel's next open of such a path follows its fresh lookup, and only
// that open may be served the pinned file (any other open revalidates by
// name: close-to-open).
type staleNames struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// staleRetry is how long after an ESTALE an open counts as its retry.
const staleRetry = time.Second

func (s *staleNames) mark(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= 4096 {
		s.m = make(map[string]time.Time) // bounded: forget them all
	}
	// Keep the first mark of a burst: a lookup made after any of the
	// ESTALEs of the burst is a fresh one (two readers answered ESTALE one
	// after the other must both count their retry's lookup as fresh).
	if t, ok := s.m[p]; ok && time.Since(t) < staleRetry {
		return
	}
	s.m[p] = time.Now()
}

// since returns when p was last answered ESTALE, if that was a moment ago.
func (s *staleNames) since(p string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.m[p]
	if !ok || time.Since(t) > staleRetry {
		return 0, false
	}
	return t.UnixNano(), true
}

// openBackend opens the node's file through the backend. The open that
// follows an ESTALE and the kernel's fresh lookup (the node was looked up
// after the ESTALE) asks for the pinned file; every other open goes by name.
func (n *node) openBackend(ctx context.Context, p string, flags uint32) (vfs.File, wire.Attr, error) {
	po, ok := n.a.b.(PinnedOpener)
	if !ok || flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return n.a.b.Open(ctx, p, flags)
	}
	if t, stale := n.a.stale.since(p); !stale || n.lookedUp.Load() < t {
		return n.a.b.Open(ctx, p, flags)
	}
	sa := n.StableAttr()
	return po.OpenPinned(ctx, p, flags, sa.Ino, sa.Gen)
}

// lookedUpNow notes that the kernel just looked the node up.
func lookedUpNow(in *fs.Inode) {
	if cn, ok := in.Operations().(*node); ok {
		cn.lookedUp.Store(time.Now().UnixNano())
	}
}

// openStale answers ESTALE for an open of path p and notes it.
func (n *node) openStale(p string) syscall.Errno {
	n.a.stale.mark(p)
	return syscall.ESTALE
}

// openErrno is the errno of a failed open: ENOENT for a node the kernel
// still has becomes ESTALE, so that the kernel looks the name up again.
func (n *node) openErrno(p string, err error) syscall.Errno {
	if errors.Is(err, syscall.ENOENT) {
		return n.openStale(p)
	}
	return n.a.errno("open", p, err)
}
