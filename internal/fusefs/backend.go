package fusefs

import (
	"context"

	"github.com/coopfs/coopfs/internal/wire"
)

// Caller is who asked for an operation, from the FUSE request header. The
// backend creates files and directories owned by the caller.
type Caller struct {
	UID, GID uint32
}

// SetAttrIn is a setattr request: Valid holds wire.Set* bits; only the fields
// named there apply.
type SetAttrIn struct {
	Valid        uint32
	Mode         uint32
	UID, GID     uint32
	Size         uint64
	Atime, Mtime int64 // nanoseconds since the epoch
}

// Backend is what the FUSE adapter needs from a coopfs client (the agent).
// Paths are relative to the export root, "" being the root, "/" separated,
// never starting with "/". Errors are returned as the agent produces them;
// the adapter turns them into errno in one place (ToErrno).
type Backend interface {
	Lookup(ctx context.Context, path string) (wire.Attr, error)
	GetAttr(ctx context.Context, path string) (wire.Attr, error)
	// SetAttr changes attributes; f is the open file when the kernel gave one
	// (ftruncate, fchmod), else nil.
	SetAttr(ctx context.Context, path string, f File, in SetAttrIn, c Caller) (wire.Attr, error)
	ReadDir(ctx context.Context, path string) ([]wire.DirEntry, error)
	Mkdir(ctx context.Context, path string, mode uint32, c Caller) (wire.Attr, error)
	Create(ctx context.Context, path string, flags uint32, mode uint32, c Caller) (File, wire.Attr, error)
	Open(ctx context.Context, path string, flags uint32) (File, wire.Attr, error)
	Unlink(ctx context.Context, path string) error
	Rmdir(ctx context.Context, path string) error
	// Rename follows renameat2: flags may hold RENAME_NOREPLACE / RENAME_EXCHANGE.
	Rename(ctx context.Context, oldPath, newPath string, flags uint32) error
	Link(ctx context.Context, oldPath, newPath string) (wire.Attr, error)
	Symlink(ctx context.Context, target, path string, c Caller) (wire.Attr, error)
	Readlink(ctx context.Context, path string) (string, error)
	StatFs(ctx context.Context) (wire.StatFs, error)
}

// SliceReader is an optional File interface for reads without a copy: when
// the whole range [off, off+n) (or its part before end of file) lies in one
// immutable buffer the backend holds, ReadSlice returns that buffer's slice
// and ok; otherwise ok is false and the adapter calls ReadAt. The slice must
// never be modified afterwards (the kernel copies it after Read returns).
type SliceReader interface {
	ReadSlice(ctx context.Context, off int64, n int) (b []byte, ok bool, err error)
}

// File is an open file of the backend.
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
