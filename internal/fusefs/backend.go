package fusefs

import (
	"context"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Backend is what the FUSE adapter needs from a coopfs client (the agent).
// Paths are relative to the export root, "" being the root, "/" separated,
// never starting with "/". Every call's context carries the calling
// process's identity (vfs.CallerOf); the backend acts as that caller.
// Errors are returned as the agent produces them; the adapter turns them
// into errno in one place (ToErrno).
type Backend interface {
	Lookup(ctx context.Context, path string) (wire.Attr, error)
	GetAttr(ctx context.Context, path string) (wire.Attr, error)
	// SetAttr changes attributes; f is the open file when the kernel gave one
	// (ftruncate, fchmod), else nil.
	SetAttr(ctx context.Context, path string, f vfs.File, in vfs.SetAttrIn) (wire.Attr, error)
	ReadDir(ctx context.Context, path string) ([]wire.DirEntry, error)
	Mkdir(ctx context.Context, path string, mode uint32) (wire.Attr, error)
	Create(ctx context.Context, path string, flags uint32, mode uint32) (vfs.File, wire.Attr, error)
	Open(ctx context.Context, path string, flags uint32) (vfs.File, wire.Attr, error)
	Unlink(ctx context.Context, path string) error
	Rmdir(ctx context.Context, path string) error
	// Rename follows renameat2: flags may hold RENAME_NOREPLACE / RENAME_EXCHANGE.
	Rename(ctx context.Context, oldPath, newPath string, flags uint32) error
	// Link links newPath to the file (ino, gen) at oldPath; ino 0 stands
	// for whatever file oldPath names. A backend refuses with ESTALE when
	// oldPath names another file than (ino, gen).
	Link(ctx context.Context, oldPath, newPath string, ino, gen uint64) (wire.Attr, error)
	Symlink(ctx context.Context, target, path string) (wire.Attr, error)
	Readlink(ctx context.Context, path string) (string, error)
	StatFs(ctx context.Context) (wire.StatFs, error)
}

// Mknoder is an optional Backend interface: special files (FIFOs, sockets,
// devices) made in the export. The kernel of the mount handles their I/O
// locally; the backend never opens them.
type Mknoder interface {
	Mknod(ctx context.Context, path string, mode, rdev uint32) (wire.Attr, error)
}

// Xattrer is an optional Backend interface: extended attributes (and POSIX
// ACLs, which are the xattrs system.posix_acl_access/default). GetXattr and
// ListXattr with size 0 return the size the value needs; with a smaller
// non-zero size they fail with ERANGE, as getxattr(2) does.
type Xattrer interface {
	GetXattr(ctx context.Context, path, name string, size uint32) ([]byte, uint32, error)
	ListXattr(ctx context.Context, path string, size uint32) ([]byte, uint32, error)
	// SetXattr and RemoveXattr change the file (ino, gen) at path (ino 0:
	// whatever path names), refusing with ESTALE when path names another.
	SetXattr(ctx context.Context, path, name string, value []byte, flags uint32, ino, gen uint64) error
	RemoveXattr(ctx context.Context, path, name string, ino, gen uint64) error
}
