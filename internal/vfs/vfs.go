package vfs

import (
	"context"

	"github.com/coopfs/coopfs/internal/wire"
)

// Caller is who asked for an operation: the uid, gid and supplementary
// groups of the calling process as the kernel reported them. The server
// performs the operation as this identity (after squashing, see
// docs/security.md).
type Caller struct {
	UID, GID uint32
	Groups   []uint32
	PID      uint32 // the calling thread, 0 if unknown (for logs)
	// Umask is the caller's umask, for the calls that create a file
	// (HasUmask is false when it is unknown). The kernel leaves the mode
	// of a create unmasked, so that a parent's default ACL can replace
	// the umask as on a local file system; the server applies it.
	Umask    uint32
	HasUmask bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c: every Backend call made with it is
// performed as c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the caller ctx carries; ok is false when it carries none
// (the call is then performed as the server's anonymous user).
func CallerOf(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// SetAttrIn is a setattr request: Valid holds wire.Set* bits; only the fields
// named there apply.
type SetAttrIn struct {
	Valid        uint32
	Mode         uint32
	UID, GID     uint32
	Size         uint64
	Atime, Mtime int64 // nanoseconds since the epoch
	// Ino and Gen name the file the change is meant for when it goes by
	// path (0: whatever the path names): the path may name another file
	// by now (wire.SetAttr).
	Ino, Gen uint64
}

// SliceReader is an optional File interface for reads without a copy: when
// the whole range [off, off+n) (or its part before end of file) lies in one
// immutable buffer the backend holds, ReadSlice returns that buffer's slice
// and ok; otherwise ok is false and the adapter calls ReadAt. The slice must
// never be modified afterwards (the kernel copies it after Read returns).
type SliceReader interface {
	ReadSlice(ctx context.Context, off int64, n int) (b []byte, ok bool, err error)
}

// File is an open file of a backend.
type File interface {
	// ReadAt reads up to len(p) bytes at off; it returns fewer only at end of file.
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	WriteAt(ctx context.Context, p []byte, off int64) (int, error)
	// KeepCache reports whether the kernel may keep the page cache of this
	// file from an earlier open: true when the file's version did not change.
	KeepCache() bool
	// Attr returns the attributes as this open file sees them (size grows with writes).
	Attr(ctx context.Context) (wire.Attr, error)
	Flush(ctx context.Context) error
	Fsync(ctx context.Context) error
	Release(ctx context.Context) error
}

// Allocator is an optional File interface: fallocate(2) with its mode bits.
type Allocator interface {
	Allocate(ctx context.Context, off, length uint64, mode uint32) error
}

// Holder is an optional File interface: a file that holds back its writes
// and attribute changes and sends them together (at close, fsync, or when
// an operation needs them on the server first). Flush sends what it holds
// and ends the holding; a failure of a held operation is returned there
// (or by the operation that made the file send early).
type Holder interface {
	// Holding reports whether the file may still hold operations back.
	Holding() bool
	// SetAttrHeld holds back a change of the file's attributes, made
	// through any handle or by path, when its outcome is certain, and
	// returns the attributes the file has after it. Otherwise it sends
	// what it holds, so that the caller can make the change in order, and
	// returns ok false.
	SetAttrHeld(ctx context.Context, in SetAttrIn) (attr wire.Attr, ok bool, err error)
}

// Invalidator is the kernel's cache of a mount (the FUSE adapter), which
// a backend holding the server's callbacks tells what broke.
type Invalidator interface {
	// Invalidate drops the kernel's attributes of the object whose inode
	// number the server gives as ino and, when name is not ""
	// (wire.BreakAttr), the entry name of that directory; name "/"
	// (wire.BreakEntries) is every entry of it. It reaches whatever the
	// kernel holds of the object, whether or not the backend still caches
	// it, and an answer about the object the backend read before the call
	// is not cached by the kernel.
	Invalidate(ino uint64, name string)
	// InvalidateAll drops everything the kernel cached of the mount.
	InvalidateAll()
}

// Callbacks is what a backend under the server's callbacks offers the
// FUSE adapter: whether what it just answered for a path is covered by a
// callback (the kernel may then cache it for long), and a place to hand it
// the kernel's cache, to invalidate when callbacks break.
type Callbacks interface {
	Covered(path string) bool
	SetInvalidator(inv Invalidator)
	// Changed says that inode ino changed through the mount (a removal
	// or a rename of one of its names): what is cached of it under other
	// names is stale.
	Changed(ino uint64)
}
