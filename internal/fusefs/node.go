package fusefs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// adapter is what every node of one mount shares.
type adapter struct {
	b      Backend
	log    *slog.Logger
	ids    *identities
	locks  bool        // the backend holds advisory locks (lock.go)
	owners flushOwners // lock owners of FLUSH requests in flight
	stale  staleNames  // paths just answered ESTALE (stale.go)
	// listingTTL is how long a listing's attributes answer READDIRPLUS
	// lookups (readdir.go): the shorter of the attribute and entry timeouts.
	listingTTL time.Duration
	// dirScans counts the listing entries compared by dirHandle.entry
	// beyond the one just handed out (tests: a big directory must not
	// cost a scan of its listing per entry).
	dirScans    atomic.Int64
	umasks      umasks // the umask of each create in flight (umask.go)
	kernelCache        // callbacks.go
}

// errno turns err into an errno with ToErrno and logs the errors that become
// EIO without being EIO (they are bugs or lost servers, worth a line).
func (a *adapter) errno(op, path string, err error) syscall.Errno {
	e := ToErrno(err)
	if e == syscall.EIO && !errors.Is(err, syscall.EIO) {
		a.log.Warn("fuse operation failed", "op", op, "path", path, "err", err)
	}
	return e
}

// node is one inode of the mount. It keeps no state of its own: its path
// comes from go-fuse's tree, its attributes from the backend.
type node struct {
	fs.Inode
	a        *adapter
	lookedUp atomic.Int64 // when the kernel last looked this node up (unix ns; stale.go)
	handed   atomic.Int64 // when a reply last handed it to the kernel (unix ns; inodes.go)
	caps     capsCache    // security.capability while open for writing (killpriv.go)
	// held is the handle of the create that made this node while its file
	// holds operations back (vfs.Holder): attribute changes by path go
	// through it, in order with its held writes.
	held  atomic.Pointer[handle]
	links links // the names it was handed out by (links.go)
}

// handle is an open file.
type handle struct {
	f      vfs.File
	writer *node // counted in writer.caps while open (killpriv.go); nil for a reader
}

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeReader     = (*node)(nil)
	_ fs.NodeWriter     = (*node)(nil)
	_ fs.NodeFlusher    = (*node)(nil)
	_ fs.NodeFsyncer    = (*node)(nil)
	_ fs.NodeReleaser   = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeLinker     = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
)

// path is the node's path relative to the export root ("" for the root).
// ok is false when the node is no longer in the tree (unlinked while open).
func (n *node) path() (p string, ok bool) {
	root := n.Root()
	var segs []string
	for in := &n.Inode; in != root; {
		name, parent := in.Parent()
		if parent == nil {
			return "", false
		}
		segs = append(segs, name)
		in = parent
	}
	slices.Reverse(segs)
	return strings.Join(segs, "/"), true
}

// childPath is the path of name in directory n.
func (n *node) childPath(name string) (string, bool) {
	p, ok := n.path()
	if !ok {
		return "", false
	}
	if p == "" {
		return name, true
	}
	return p + "/" + name, true
}

// newChild makes (or finds, for a hard link or an inode the kernel already
// knows) the inode of attr, the child name of n.
func (n *node) newChild(ctx context.Context, name string, attr wire.Attr, out *fuse.EntryOut) *fs.Inode {
	fillAttr(&out.Attr, attr)
	sa := fs.StableAttr{Mode: attr.Mode & syscall.S_IFMT, Ino: attr.Ino, Gen: attr.Gen}
	// The table's node is the one go-fuse would pick: reusing it spares
	// a node go-fuse would throw away, which the table would keep.
	c := n.a.inodes.find(sa)
	if c == nil {
		c = &node{a: n.a}
	}
	c.handed.Store(time.Now().UnixNano())
	in := n.NewInode(ctx, c, sa)
	n.a.inodes.add(c)
	if cn, ok := in.Operations().(*node); ok && sa.Mode != syscall.S_IFDIR {
		cn.links.add(&n.Inode, name) // a directory has one name
	}
	return in
}

func fillAttr(out *fuse.Attr, a wire.Attr) {
	out.Ino = a.Ino
	out.Mode = a.Mode
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.UID, a.GID
	out.Size = a.Size
	out.Blocks = a.Blocks
	out.Blksize = 4096
	out.Rdev = a.Rdev
	out.Atime, out.Atimensec = splitNanos(a.Atime)
	out.Mtime, out.Mtimensec = splitNanos(a.Mtime)
	out.Ctime, out.Ctimensec = splitNanos(a.Ctime)
}

func splitNanos(ns int64) (uint64, uint32) {
	sec, nsec := ns/1e9, ns%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return uint64(sec), uint32(nsec)
}

func joinNanos(sec uint64, nsec uint32) int64 { return int64(sec)*1e9 + int64(nsec) }

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, ok := n.childPath(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	var attr wire.Attr
	since := n.a.breakSeq()
	err := n.a.run(ctx, func(ctx context.Context) (err error) {
		attr, err = n.lookupBackend(ctx, p)
		return err
	})
	if err != nil {
		return nil, n.a.errno("lookup", p, err)
	}
	in := n.newChild(ctx, name, attr, out)
	n.a.coveredEntry(p, &n.Inode, since, out)
	lookedUpNow(in)
	return in, 0
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		attr, err := h.f.Attr(keep(ctx))
		if err != nil {
			return n.a.errno("fgetattr", "", err)
		}
		fillAttr(&out.Attr, attr)
		return 0
	}
	var attr wire.Attr
	since := n.a.breakSeq()
	p, err := n.byPaths(ctx, func(ctx context.Context, p string) (err error) {
		if attr, err = n.a.b.GetAttr(ctx, p); err == nil && !n.isNode(attr) {
			err = errOtherFile
		}
		return err
	})
	if err != nil {
		return n.a.errno("getattr", p, err)
	}
	fillAttr(&out.Attr, attr)
	n.a.coveredAttr(p, since, out)
	return 0
}

// setAttrIn translates the kernel's setattr request.
func setAttrIn(in *fuse.SetAttrIn) vfs.SetAttrIn {
	var s vfs.SetAttrIn
	v := in.Valid
	set := func(fuseBit, wireBit uint32) {
		if v&fuseBit != 0 {
			s.Valid |= wireBit
		}
	}
	set(fuse.FATTR_MODE, wire.SetMode)
	set(fuse.FATTR_UID, wire.SetUID)
	set(fuse.FATTR_GID, wire.SetGID)
	set(fuse.FATTR_SIZE, wire.SetSize)
	set(fuse.FATTR_ATIME, wire.SetAtime)
	set(fuse.FATTR_MTIME, wire.SetMtime)
	set(fuse.FATTR_ATIME_NOW, wire.SetAtimeNow)
	set(fuse.FATTR_MTIME_NOW, wire.SetMtimeNow)
	s.Mode = in.Mode
	s.UID, s.GID = in.Uid, in.Gid
	s.Size = in.Size
	s.Atime = joinNanos(in.Atime, in.Atimensec)
	s.Mtime = joinNanos(in.Mtime, in.Mtimensec)
	return s
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var f vfs.File
	if h, ok := fh.(*handle); ok {
		f = h.f
	}
	hf := n.holder(f)
	sin := setAttrIn(in)
	if f == nil {
		sin.Ino, sin.Gen = n.identity() // the server refuses a path that names another file
	}
	var attr wire.Attr
	setattr := func(ctx context.Context, p string) (err error) {
		if hf != nil {
			var held bool
			if attr, held, err = hf.SetAttrHeld(ctx, sin); held || err != nil {
				return err
			}
		}
		attr, err = n.a.b.SetAttr(ctx, p, f, sin)
		return err
	}
	var p string
	var err error
	if f != nil {
		p, _ = n.path()
		err = n.a.run(ctx, func(ctx context.Context) error { return setattr(ctx, p) })
	} else {
		p, err = n.byPaths(ctx, setattr)
	}
	if err != nil {
		return n.a.errno("setattr", p, err)
	}
	fillAttr(&out.Attr, attr)
	return 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, ok := n.childPath(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	var attr wire.Attr
	err := n.a.runCreate(ctx, func(ctx context.Context) (err error) {
		attr, err = n.a.b.Mkdir(ctx, p, mode)
		return err
	})
	if err != nil {
		return nil, n.a.errno("mkdir", p, err)
	}
	return n.newChild(ctx, name, attr, out), 0
}

// openFlags are the FOPEN flags of a new handle of f opened with flags.
//
// An O_APPEND handle is direct I/O: through the page cache the kernel
// splits one write(2) at every page it did not hold whole (a 200-byte
// append at 4000 arrives as [4000,4096) and [4096,4200)), and the server
// would apply each piece as its own append, so that another client's
// append lands between them. Direct, the kernel sends the whole write(2) in
// one request of up to MaxWrite bytes, which the server appends at once.
// Other handles keep the page cache (and KEEP_CACHE when the backend says
// the file did not change); mmap of an O_APPEND handle still works
// (CAP_DIRECT_IO_ALLOW_MMAP).
func openFlags(f vfs.File, flags uint32) uint32 {
	var fl uint32
	if f.KeepCache() {
		fl |= fuse.FOPEN_KEEP_CACHE
	}
	if flags&syscall.O_APPEND != 0 {
		fl |= fuse.FOPEN_DIRECT_IO
	}
	return fl
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p, ok := n.childPath(name)
	if !ok {
		return nil, nil, 0, syscall.ENOENT
	}
	var f vfs.File
	var attr wire.Attr
	err := n.a.runCreate(ctx, func(ctx context.Context) (err error) {
		f, attr, err = n.a.b.Create(ctx, p, flags, mode)
		return err
	})
	if err != nil {
		return nil, nil, 0, n.a.errno("create", p, err)
	}
	child := n.newChild(ctx, name, attr, out)
	h := writerHandle(&handle{f: f}, child, flags, true)
	if hf, ok := f.(vfs.Holder); ok && hf.Holding() {
		if cn, ok := child.Operations().(*node); ok {
			cn.held.Store(h)
		}
	}
	return child, h, openFlags(f, flags), 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	p, ok := n.path()
	if !ok {
		return nil, 0, syscall.ENOENT
	}
	var f vfs.File
	var attr wire.Attr
	err := n.a.run(ctx, func(ctx context.Context) (err error) {
		f, attr, err = n.openBackend(ctx, p, flags)
		return err
	})
	if err != nil {
		return nil, 0, n.openErrno(p, err)
	}
	if sa := n.StableAttr(); attr.Ino != sa.Ino || attr.Gen != sa.Gen {
		// The name now refers to another file (renamed over or replaced
		// by another client or in the export, while the kernel kept its
		// entry): ESTALE makes the kernel look the name up again and
		// retry the open on the new inode, instead of mixing two files
		// (old size, new data) in one inode.
		f.Release(keep(ctx))
		return nil, 0, n.openStale(p)
	}
	if !f.KeepCache() {
		// Close-to-open: the file changed since the kernel cached its
		// attributes, which may live up to AttrTimeout more. Drop them
		// (a negative offset leaves the pages alone; not keeping the cache
		// drops those) so that the size and mtime of this open are the
		// backend's. Best effort: the inode may not be known to the kernel.
		n.NotifyContent(-1, 0)
	}
	return writerHandle(&handle{f: f}, &n.Inode, flags, false), openFlags(f, flags), 0
}

func (n *node) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(*handle)
	if !ok {
		return nil, syscall.EBADF
	}
	ctx = n.a.ctxOf(ctx)
	if sr, ok := h.f.(vfs.SliceReader); ok {
		b, ok, err := sr.ReadSlice(ctx, off, len(dest))
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, n.a.errno("read", "", err)
		}
		if ok {
			return fuse.ReadResultData(b), 0
		}
	}
	nr, err := h.f.ReadAt(ctx, dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, n.a.errno("read", "", err)
	}
	return fuse.ReadResultData(dest[:nr]), 0
}

func (n *node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := fh.(*handle)
	if !ok {
		return 0, syscall.EBADF
	}
	nw, err := h.f.WriteAt(keep(ctx), data, off)
	if err != nil {
		return uint32(nw), n.a.errno("write", "", err)
	}
	return uint32(nw), 0
}

func (n *node) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		e := n.a.errno("flush", "", h.f.Flush(keep(ctx)))
		if n.held.CompareAndSwap(h, nil) {
			// The kernel keeps the attributes the held operations were
			// answered with; the server's differ in the times it set.
			n.NotifyContent(-1, 0)
		}
		if le := n.flushLocks(ctx, fh); e == 0 {
			e = le // the owner's locks go whatever the flush gave
		}
		return e
	}
	return 0
}

func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		return n.a.errno("fsync", "", h.f.Fsync(keep(ctx)))
	}
	return 0
}

func (n *node) Release(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		if h.writer != nil {
			h.writer.caps.closed()
		}
		n.held.CompareAndSwap(h, nil)
		return n.a.errno("release", "", h.f.Release(keep(ctx)))
	}
	return 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	p, ok := n.childPath(name)
	if !ok {
		return syscall.ENOENT
	}
	defer n.a.changedChildren(n.childInos(name))
	return n.a.errno("unlink", p, n.a.run(ctx, func(ctx context.Context) error { return n.a.b.Unlink(ctx, p) }))
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	p, ok := n.childPath(name)
	if !ok {
		return syscall.ENOENT
	}
	defer n.a.changedChildren(n.childInos(name))
	return n.a.errno("rmdir", p, n.a.run(ctx, func(ctx context.Context) error { return n.a.b.Rmdir(ctx, p) }))
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	oldPath, ok1 := n.childPath(name)
	newPath, ok2 := np.childPath(newName)
	if !ok1 || !ok2 {
		return syscall.ENOENT
	}
	defer n.a.changedChildren(append(n.childInos(name), np.childInos(newName)...))
	return n.a.errno("rename", oldPath, n.a.run(ctx, func(ctx context.Context) error {
		return n.a.b.Rename(ctx, oldPath, newPath, flags)
	}))
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	newPath, ok := n.childPath(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	var attr wire.Attr
	ino, gen := t.identity()
	_, err := t.byPaths(ctx, func(ctx context.Context, oldPath string) (err error) {
		attr, err = n.a.b.Link(ctx, oldPath, newPath, ino, gen)
		return err
	})
	if err != nil {
		return nil, n.a.errno("link", newPath, err)
	}
	return n.newChild(ctx, name, attr, out), 0
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, ok := n.childPath(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	var attr wire.Attr
	err := n.a.run(ctx, func(ctx context.Context) (err error) {
		attr, err = n.a.b.Symlink(ctx, target, p)
		return err
	})
	if err != nil {
		return nil, n.a.errno("symlink", p, err)
	}
	return n.newChild(ctx, name, attr, out), 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	p, ok := n.path()
	if !ok {
		return nil, syscall.ENOENT
	}
	var target string
	err := n.a.run(ctx, func(ctx context.Context) (err error) {
		target, err = n.a.b.Readlink(ctx, p)
		return err
	})
	if err != nil {
		return nil, n.a.errno("readlink", p, err)
	}
	return []byte(target), 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	st, err := n.a.b.StatFs(keep(ctx))
	if err != nil {
		return n.a.errno("statfs", "", err)
	}
	*out = fuse.StatfsOut{
		Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail,
		Files: st.Files, Ffree: st.Ffree,
		Bsize: st.Bsize, NameLen: st.NameLen, Frsize: st.Frsize,
	}
	return 0
}

// holder returns the file that holds back the node's operations (the
// handle f the kernel gave, or the create's), nil if none does.
func (n *node) holder(f vfs.File) vfs.Holder {
	if f == nil {
		if h := n.held.Load(); h != nil {
			f = h.f
		}
	}
	if hf, ok := f.(vfs.Holder); ok && hf.Holding() {
		return hf
	}
	return nil
}

// keep detaches an operation from the kernel's interrupt. A FUSE request is
// interrupted whenever the calling thread gets a signal (Go programs get
// SIGURG all the time), and an operation the server has already carried
// out must not be reported as EINTR: the program would redo an append or
// see mkdir fail for a directory that now exists. Only reads stay
// interruptible (they change nothing); every backend call has its own
// timeouts, so a detached operation still cannot hang forever.
func keep(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
