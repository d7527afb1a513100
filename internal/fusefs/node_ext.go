package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

var (
	_ fs.NodeMknoder       = (*node)(nil)
	_ fs.NodeGetxattrer    = (*node)(nil)
	_ fs.NodeSetxattrer    = (*node)(nil)
	_ fs.NodeListxattrer   = (*node)(nil)
	_ fs.NodeRemovexattrer = (*node)(nil)
	_ fs.NodeAllocater     = (*node)(nil)
)

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	mk, ok := n.a.b.(Mknoder)
	if !ok {
		return nil, syscall.EPERM
	}
	p, ok := n.childPath(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	var attr wire.Attr
	err := n.a.runCreate(ctx, func(ctx context.Context) (err error) {
		attr, err = mk.Mknod(ctx, p, mode, rdev)
		return err
	})
	if err != nil {
		return nil, n.a.errno("mknod", p, err)
	}
	return n.newChild(ctx, name, attr, out), 0
}

// xattrs returns the backend's xattr interface and the node's path; errno
// is EOPNOTSUPP when the backend has none.
func (n *node) xattrs() (Xattrer, string, syscall.Errno) {
	x, ok := n.a.b.(Xattrer)
	if !ok {
		return nil, "", syscall.EOPNOTSUPP
	}
	p, ok := n.path()
	if !ok {
		return nil, "", syscall.ENOENT
	}
	return x, p, 0
}

// fitValue copies a value into dest following getxattr(2): an empty dest
// asks for the size only; a short one is ERANGE.
func fitValue(dest, v []byte, size uint32) (uint32, syscall.Errno) {
	switch {
	case len(dest) == 0:
		return size, 0
	case int(size) > len(dest) || len(v) > len(dest):
		return size, syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// isACL reports whether name is a POSIX ACL, which the kernel reads (with
// POSIX ACLs on) before every permission check.
func isACL(name string) bool {
	return name == "system.posix_acl_access" || name == "system.posix_acl_default"
}

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	x, p, e := n.xattrs()
	if e == syscall.EOPNOTSUPP && isACL(attr) {
		// The kernel takes EOPNOTSUPP for a failed ACL read and denies
		// access; "no ACL" is ENODATA.
		return 0, syscall.ENODATA
	}
	if e != 0 {
		return 0, e
	}
	var gen uint64
	if attr == capsName {
		var absent bool
		if absent, gen = n.caps.absent(); absent {
			return 0, syscall.ENODATA
		}
	}
	var v []byte
	var size uint32
	err := n.a.run(ctx, func(ctx context.Context) (err error) {
		v, size, err = x.GetXattr(ctx, p, attr, uint32(len(dest)))
		return err
	})
	if attr == capsName && ToErrno(err) == syscall.ENODATA {
		n.caps.noteAbsent(gen)
	}
	if e := ToErrno(err); e != 0 {
		if e == syscall.EOPNOTSUPP && isACL(attr) {
			e = syscall.ENODATA // as above: an export without xattrs has no ACLs
		}
		return 0, e
	}
	return fitValue(dest, v, size)
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	x, p, e := n.xattrs()
	if e != 0 {
		return 0, e
	}
	var v []byte
	var size uint32
	err := n.a.run(ctx, func(ctx context.Context) (err error) {
		v, size, err = x.ListXattr(ctx, p, uint32(len(dest)))
		return err
	})
	if err != nil {
		return 0, n.a.errno("listxattr", p, err)
	}
	return fitValue(dest, v, size)
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	n.caps.invalidate()
	defer n.caps.invalidate() // also after: a lookup that raced with it
	x, _, e := n.xattrs()
	if e != 0 {
		return e
	}
	ino, gen := n.identity()
	p, err := n.byPaths(ctx, func(ctx context.Context, p string) error {
		return x.SetXattr(ctx, p, attr, data, flags, ino, gen)
	})
	return n.a.errno("setxattr", p, err)
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	n.caps.invalidate()
	defer n.caps.invalidate()
	x, _, e := n.xattrs()
	if e != 0 {
		return e
	}
	ino, gen := n.identity()
	_, err := n.byPaths(ctx, func(ctx context.Context, p string) error {
		return x.RemoveXattr(ctx, p, attr, ino, gen)
	})
	return ToErrno(err)
}

func (n *node) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	h, ok := fh.(*handle)
	if !ok {
		return syscall.EBADF
	}
	al, ok := h.f.(vfs.Allocator)
	if !ok {
		return syscall.EOPNOTSUPP
	}
	return n.a.errno("fallocate", "", n.a.run(ctx, func(ctx context.Context) error {
		return al.Allocate(ctx, off, size, mode)
	}))
}
