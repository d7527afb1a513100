package nullfs

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/fusefs"
)

// FileName is the name of the one file in the root of the mount.
const FileName = "data"

// period of the content pattern within a span: a prime, so that pages of a
// span never repeat the same bytes.
const period = 251

// span is the length after which the content repeats: the largest request
// (fusefs's MaxWrite limit), a multiple of the page size. A reply is a
// slice of a buffer holding two spans, so a page-aligned read gets a
// page-aligned slice, as coopfs's reads of its cached blocks do: the
// ceiling hands the kernel the same kind of buffer as what it bounds.
const span = 1 << 20

// Byte is the content of the file at offset off.
func Byte(off int64) byte { return byte(off % span % period) }

// Stats counts the FUSE read requests served, to tell reads that went
// through FUSE from reads served by the kernel page cache.
type Stats struct {
	Reads atomic.Int64 // READ requests
	Bytes atomic.Int64 // bytes returned by them
}

// Mount mounts a file system with one file, FileName, of size bytes at dir,
// with the same options and handling as a coopfs mount of cfg.
func Mount(ctx context.Context, dir string, size int64, cfg fusefs.Config) (*fusefs.Mounted, error) {
	m, _, err := MountStats(ctx, dir, size, cfg)
	return m, err
}

// MountStats is Mount that also returns the mount's request counters.
func MountStats(ctx context.Context, dir string, size int64, cfg fusefs.Config) (*fusefs.Mounted, *Stats, error) {
	if size < 0 {
		return nil, nil, fmt.Errorf("nullfs: negative size %d", size)
	}
	if cfg.MaxWrite > span {
		return nil, nil, fmt.Errorf("nullfs: max write %d above %d", cfg.MaxWrite, span)
	}
	buf := make([]byte, 2*span)
	for i := range buf {
		buf[i] = Byte(int64(i))
	}
	st := &Stats{}
	root := &rootNode{file: &fileNode{stats: st, size: size, buf: buf}}
	m, err := fusefs.MountNode(ctx, dir, root, cfg, nil)
	if err != nil {
		return nil, nil, err
	}
	return m, st, nil
}

type rootNode struct {
	fs.Inode
	file *fileNode
}

var _ fs.NodeOnAdder = (*rootNode)(nil)
var _ fs.NodeGetattrer = (*rootNode)(nil)

func (r *rootNode) OnAdd(ctx context.Context) {
	ch := r.NewPersistentInode(ctx, r.file, fs.StableAttr{Mode: syscall.S_IFREG, Ino: 2})
	r.AddChild(FileName, ch, false)
}

func (r *rootNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o755
	out.Nlink = 2
	return 0
}

type fileNode struct {
	fs.Inode
	stats *Stats
	size  int64
	buf   []byte // Byte(i) for i in [0, 2*span)
}

var (
	_ fs.NodeGetattrer = (*fileNode)(nil)
	_ fs.NodeOpener    = (*fileNode)(nil)
	_ fs.NodeReader    = (*fileNode)(nil)
)

func (f *fileNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Nlink = 1
	out.Size = uint64(f.size)
	out.Blksize = 4096
	out.Blocks = (uint64(f.size) + 511) / 512
	return 0
}

// Open keeps no state and asks for no KEEP_CACHE: like a coopfs open of a
// file not cached by the kernel, every open reads through FUSE again.
func (f *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EROFS
	}
	return nil, 0, 0
}

func (f *fileNode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.stats.Reads.Add(1)
	if off >= f.size {
		return fuse.ReadResultData(nil), 0
	}
	n := min(int64(len(dest)), f.size-off, span)
	start := off % span
	f.stats.Bytes.Add(n)
	return fuse.ReadResultData(f.buf[start : start+n]), 0
}
