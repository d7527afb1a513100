package fusefs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// memFS is an in-memory Backend for the adapter's tests only: a tree of
// inodes behind one mutex, with sparse file data in chunks. It checks no
// permissions (the kernel does, with default_permissions) and returns the
// errno values a local Linux file system returns.
type memFS struct {
	mu      sync.Mutex
	nextIno uint64
	root    *memNode
	// failLookup makes Lookup of these names fail with the given error.
	failLookup map[string]error
	// reads counts File.ReadAt calls.
	reads atomic.Int64
	// readDirs, lookups, creates and writes count those calls.
	readDirs, lookups, creates, writes atomic.Int64
}

const memChunk = 64 << 10

type memNode struct {
	attr     wire.Attr
	chunks   map[int64][]byte    // regular files: chunk index → memChunk bytes
	target   string              // symlinks
	children map[string]*memNode // directories
	// lastOpen is the version seen by the previous open (for KeepCache).
	lastOpen uint64
}

func newMemFS() *memFS {
	m := &memFS{nextIno: 100, failLookup: map[string]error{}}
	m.root = m.newNode(syscall.S_IFDIR|0o755, vfs.Caller{})
	m.root.attr.Nlink = 2
	return m
}

func (m *memFS) newNode(mode uint32, c vfs.Caller) *memNode {
	m.nextIno++
	now := time.Now().UnixNano()
	n := &memNode{attr: wire.Attr{
		Ino: m.nextIno, Mode: mode, Nlink: 1, UID: c.UID, GID: c.GID,
		Atime: now, Mtime: now, Ctime: now, Version: 1,
	}}
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		n.children = map[string]*memNode{}
		n.attr.Nlink = 2
	case syscall.S_IFREG:
		n.chunks = map[int64][]byte{}
	}
	return n
}

func (n *memNode) isDir() bool { return n.attr.Mode&syscall.S_IFMT == syscall.S_IFDIR }

func (n *memNode) getAttr() wire.Attr {
	a := n.attr
	a.Blocks = uint64(len(n.chunks)) * memChunk / 512
	return a
}

func (n *memNode) touch(mtime bool) {
	now := time.Now().UnixNano()
	n.attr.Ctime = now
	if mtime {
		n.attr.Mtime = now
	}
}

// walk resolves path to its node.
func (m *memFS) walk(path string) (*memNode, error) {
	n := m.root
	if path == "" {
		return n, nil
	}
	for _, name := range strings.Split(path, "/") {
		if !n.isDir() {
			return nil, syscall.ENOTDIR
		}
		c, ok := n.children[name]
		if !ok {
			return nil, syscall.ENOENT
		}
		n = c
	}
	return n, nil
}

// parent resolves the directory of path and returns it with the last name.
func (m *memFS) parent(path string) (*memNode, string, error) {
	dir, name := "", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir, name = path[:i], path[i+1:]
	}
	d, err := m.walk(dir)
	if err != nil {
		return nil, "", err
	}
	if !d.isDir() {
		return nil, "", syscall.ENOTDIR
	}
	return d, name, nil
}

func (m *memFS) Lookup(ctx context.Context, path string) (wire.Attr, error) {
	m.lookups.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	base := path[strings.LastIndexByte(path, '/')+1:]
	if err := m.failLookup[base]; err != nil {
		return wire.Attr{}, err
	}
	n, err := m.walk(path)
	if err != nil {
		return wire.Attr{}, fmt.Errorf("memfs: lookup %q: %w", path, err)
	}
	return n.getAttr(), nil
}

func (m *memFS) GetAttr(ctx context.Context, path string) (wire.Attr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk(path)
	if err != nil {
		return wire.Attr{}, err
	}
	return n.getAttr(), nil
}

func (m *memFS) SetAttr(ctx context.Context, path string, f vfs.File, in vfs.SetAttrIn) (wire.Attr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n *memNode
	if f != nil {
		n = f.(*memFile).n
	} else {
		var err error
		if n, err = m.walk(path); err != nil {
			return wire.Attr{}, err
		}
	}
	now := time.Now().UnixNano()
	v := in.Valid
	if v&wire.SetMode != 0 {
		n.attr.Mode = n.attr.Mode&syscall.S_IFMT | in.Mode&0o7777
	}
	if v&wire.SetUID != 0 {
		n.attr.UID = in.UID
	}
	if v&wire.SetGID != 0 {
		n.attr.GID = in.GID
	}
	if v&wire.SetSize != 0 {
		if n.isDir() {
			return wire.Attr{}, syscall.EISDIR
		}
		n.truncate(in.Size)
		n.attr.Mtime = now
	}
	switch {
	case v&wire.SetAtimeNow != 0:
		n.attr.Atime = now
	case v&wire.SetAtime != 0:
		n.attr.Atime = in.Atime
	}
	switch {
	case v&wire.SetMtimeNow != 0:
		n.attr.Mtime = now
	case v&wire.SetMtime != 0:
		n.attr.Mtime = in.Mtime
	}
	n.attr.Ctime = now
	return n.getAttr(), nil
}

func (n *memNode) truncate(size uint64) {
	if size < n.attr.Size {
		for idx := range n.chunks {
			if uint64(idx)*memChunk >= size {
				delete(n.chunks, idx)
			}
		}
		if c := n.chunks[int64(size/memChunk)]; c != nil {
			clear(c[size%memChunk:])
		}
	}
	n.attr.Size = size
	n.attr.Version++
}

func (m *memFS) ReadDir(ctx context.Context, path string) ([]wire.DirEntry, error) {
	m.readDirs.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk(path)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, syscall.ENOTDIR
	}
	var out []wire.DirEntry
	for _, name := range slices.Sorted(maps.Keys(n.children)) {
		c := n.children[name]
		out = append(out, wire.DirEntry{Name: name, Ino: c.attr.Ino, Mode: c.attr.Mode})
	}
	return out, nil
}

// add creates a node of mode at path.
func (m *memFS) add(path string, mode uint32, c vfs.Caller) (*memNode, error) {
	d, name, err := m.parent(path)
	if err != nil {
		return nil, err
	}
	if _, ok := d.children[name]; ok {
		return nil, syscall.EEXIST
	}
	if c.HasUmask && mode&syscall.S_IFMT != syscall.S_IFLNK {
		mode &^= c.Umask & 0o777 // the mount leaves modes unmasked (DONT_MASK)
	}
	n := m.newNode(mode, c)
	d.children[name] = n
	if n.isDir() {
		d.attr.Nlink++
	}
	d.touch(true)
	return n, nil
}

func (m *memFS) Mkdir(ctx context.Context, path string, mode uint32) (wire.Attr, error) {
	c, _ := vfs.CallerOf(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.add(path, syscall.S_IFDIR|mode&0o7777, c)
	if err != nil {
		return wire.Attr{}, err
	}
	return n.getAttr(), nil
}

func (m *memFS) Create(ctx context.Context, path string, flags, mode uint32) (vfs.File, wire.Attr, error) {
	m.creates.Add(1)
	c, _ := vfs.CallerOf(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk(path)
	switch {
	case err == nil && flags&syscall.O_EXCL != 0:
		return nil, wire.Attr{}, syscall.EEXIST
	case err == nil:
		return m.open(n, flags)
	case !errors.Is(err, syscall.ENOENT):
		return nil, wire.Attr{}, err
	}
	n, err = m.add(path, syscall.S_IFREG|mode&0o7777, c)
	if err != nil {
		return nil, wire.Attr{}, err
	}
	return m.open(n, flags)
}

func (m *memFS) open(n *memNode, flags uint32) (vfs.File, wire.Attr, error) {
	if n.isDir() && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, wire.Attr{}, syscall.EISDIR
	}
	if flags&syscall.O_TRUNC != 0 && n.attr.Size > 0 {
		n.truncate(0)
	}
	keep := n.lastOpen == n.attr.Version
	n.lastOpen = n.attr.Version
	return &memFile{m: m, n: n, keep: keep}, n.getAttr(), nil
}

func (m *memFS) Open(ctx context.Context, path string, flags uint32) (vfs.File, wire.Attr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk(path)
	if err != nil {
		return nil, wire.Attr{}, err
	}
	return m.open(n, flags)
}

func (m *memFS) Unlink(ctx context.Context, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, name, err := m.parent(path)
	if err != nil {
		return err
	}
	n, ok := d.children[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case n.isDir():
		return syscall.EISDIR
	}
	delete(d.children, name)
	n.attr.Nlink--
	n.touch(false)
	d.touch(true)
	return nil
}

func (m *memFS) Rmdir(ctx context.Context, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if path == "" {
		return syscall.EBUSY
	}
	d, name, err := m.parent(path)
	if err != nil {
		return err
	}
	n, ok := d.children[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case !n.isDir():
		return syscall.ENOTDIR
	case len(n.children) > 0:
		return syscall.ENOTEMPTY
	}
	delete(d.children, name)
	d.attr.Nlink--
	d.touch(true)
	return nil
}

func (m *memFS) Rename(ctx context.Context, oldPath, newPath string, flags uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if newPath == oldPath || strings.HasPrefix(newPath, oldPath+"/") {
		return syscall.EINVAL
	}
	od, oname, err := m.parent(oldPath)
	if err != nil {
		return err
	}
	nd, nname, err := m.parent(newPath)
	if err != nil {
		return err
	}
	src, ok := od.children[oname]
	if !ok {
		return syscall.ENOENT
	}
	dst, exists := nd.children[nname]
	const noReplace, exchange = 1, 2 // RENAME_NOREPLACE, RENAME_EXCHANGE
	switch {
	case flags&^(noReplace|exchange) != 0 || flags == noReplace|exchange:
		return syscall.EINVAL
	case flags&noReplace != 0 && exists:
		return syscall.EEXIST
	case flags&exchange != 0 && !exists:
		return syscall.ENOENT
	case flags&exchange != 0:
		od.children[oname], nd.children[nname] = dst, src
		if src.isDir() != dst.isDir() && od != nd {
			d1, d2 := od, nd
			if !src.isDir() {
				d1, d2 = nd, od
			}
			d1.attr.Nlink--
			d2.attr.Nlink++
		}
		od.touch(true)
		nd.touch(true)
		return nil
	}
	if exists {
		switch {
		case src.isDir() && !dst.isDir():
			return syscall.ENOTDIR
		case !src.isDir() && dst.isDir():
			return syscall.EISDIR
		case dst.isDir() && len(dst.children) > 0:
			return syscall.ENOTEMPTY
		}
		if dst.isDir() {
			nd.attr.Nlink--
		} else {
			dst.attr.Nlink--
		}
	}
	delete(od.children, oname)
	nd.children[nname] = src
	if src.isDir() {
		od.attr.Nlink--
		nd.attr.Nlink++
	}
	src.touch(false)
	od.touch(true)
	nd.touch(true)
	return nil
}

func (m *memFS) Link(ctx context.Context, oldPath, newPath string, _, _ uint64) (wire.Attr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk(oldPath)
	if err != nil {
		return wire.Attr{}, err
	}
	if n.isDir() {
		return wire.Attr{}, syscall.EPERM
	}
	d, name, err := m.parent(newPath)
	if err != nil {
		return wire.Attr{}, err
	}
	if _, ok := d.children[name]; ok {
		return wire.Attr{}, syscall.EEXIST
	}
	d.children[name] = n
	n.attr.Nlink++
	n.touch(false)
	d.touch(true)
	return n.getAttr(), nil
}

func (m *memFS) Symlink(ctx context.Context, target, path string) (wire.Attr, error) {
	c, _ := vfs.CallerOf(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.add(path, syscall.S_IFLNK|0o777, c)
	if err != nil {
		return wire.Attr{}, err
	}
	n.target = target
	n.attr.Size = uint64(len(target))
	return n.getAttr(), nil
}

func (m *memFS) Readlink(ctx context.Context, path string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk(path)
	if err != nil {
		return "", err
	}
	if n.attr.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return "", syscall.EINVAL
	}
	return n.target, nil
}

func (m *memFS) StatFs(ctx context.Context) (wire.StatFs, error) {
	return wire.StatFs{Blocks: 1 << 30, Bfree: 1 << 29, Bavail: 1 << 29, Files: 1 << 20, Ffree: 1 << 19,
		Bsize: 4096, Frsize: 4096, NameLen: 255}, nil
}

// memFile is an open file of memFS.
type memFile struct {
	m    *memFS
	n    *memNode
	keep bool
}

func (f *memFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.m.reads.Add(1)
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.n.isDir() {
		return 0, syscall.EISDIR
	}
	size := int64(f.n.attr.Size)
	if off >= size {
		return 0, nil
	}
	p = p[:min(int64(len(p)), size-off)]
	for done := 0; done < len(p); {
		at := off + int64(done)
		idx, in := at/memChunk, at%memChunk
		n := min(len(p)-done, int(memChunk-in))
		if c := f.n.chunks[idx]; c != nil {
			copy(p[done:done+n], c[in:])
		} else {
			clear(p[done : done+n])
		}
		done += n
	}
	return len(p), nil
}

func (f *memFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.m.writes.Add(1)
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	for done := 0; done < len(p); {
		at := off + int64(done)
		idx, in := at/memChunk, at%memChunk
		c := f.n.chunks[idx]
		if c == nil {
			c = make([]byte, memChunk)
			f.n.chunks[idx] = c
		}
		done += copy(c[in:], p[done:])
	}
	if end := uint64(off) + uint64(len(p)); end > f.n.attr.Size {
		f.n.attr.Size = end
	}
	f.n.attr.Version++
	f.n.touch(true)
	return len(p), nil
}

func (f *memFile) KeepCache() bool { return f.keep }

func (f *memFile) Attr(ctx context.Context) (wire.Attr, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	return f.n.getAttr(), nil
}

func (f *memFile) Flush(ctx context.Context) error   { return nil }
func (f *memFile) Fsync(ctx context.Context) error   { return nil }
func (f *memFile) Release(ctx context.Context) error { return nil }

// replace sets the content of the file at path, as another client would
// (a new version).
func (m *memFS) replace(path string, data []byte) error {
	m.mu.Lock()
	n, err := m.walk(path)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	f := &memFile{m: m, n: n}
	m.mu.Lock()
	n.truncate(0)
	m.mu.Unlock()
	_, err = f.WriteAt(context.Background(), data, 0)
	return err
}
