package agent

import (
	"context"
	"fmt"
	"syscall"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// as wraps a request in the caller's identity when ctx carries one; the
// server performs it as that user (squashed as its --squash says). A
// request without one is performed as the server's anonymous user.
func as(ctx context.Context, m wire.Msg) wire.Msg {
	c, ok := vfs.CallerOf(ctx)
	if !ok {
		return m
	}
	return &wire.As{UID: c.UID, GID: c.GID, Groups: c.Groups, HasUmask: c.HasUmask, Umask: c.Umask, Msg: m}
}

// Mknod makes a special file in the export (fusefs.Mknoder).
func (a *Agent) Mknod(ctx context.Context, path string, mode, rdev uint32) (wire.Attr, error) {
	tok := a.cbs.token()
	at, err := a.entryAttrCall(ctx, &wire.Mknod{Path: path, Mode: mode, Rdev: rdev}, path, false)
	a.entryChanged(tok, path, true, err, nil)
	return at, err
}

func (a *Agent) xattrCall(ctx context.Context, m wire.Msg) ([]byte, uint32, error) {
	r, _, err := a.pathCall(ctx, m, true)
	if err != nil {
		return nil, 0, err
	}
	xr, ok := r.(*wire.XattrReply)
	if !ok {
		return nil, 0, fmt.Errorf("%v: unexpected reply %v: %w", m.Type(), r.Type(), syscall.EIO)
	}
	return xr.Value, xr.Size, nil
}

// GetXattr reads an extended attribute (fusefs.Xattrer).
func (a *Agent) GetXattr(ctx context.Context, path, name string, size uint32) ([]byte, uint32, error) {
	return a.xattrCall(ctx, &wire.GetXattr{Path: path, Name: name, Size: size})
}

// ListXattr lists extended attribute names (fusefs.Xattrer).
func (a *Agent) ListXattr(ctx context.Context, path string, size uint32) ([]byte, uint32, error) {
	return a.xattrCall(ctx, &wire.ListXattr{Path: path, Size: size})
}

// isACL reports whether extended attribute name is a POSIX ACL, on which
// the permissions to act in a directory, and a new file's mode, rest.
func isACL(name string) bool {
	return name == "system.posix_acl_access" || name == "system.posix_acl_default"
}

// SetXattr sets an extended attribute (fusefs.Xattrer).
func (a *Agent) SetXattr(ctx context.Context, path, name string, value []byte, flags uint32, ino, gen uint64) error {
	a.endAllHolds(ctx) // a held write would drop security.capability after it
	if isACL(name) {
		defer a.delegs.invalidate(ctx, path)() // deleg.go: an ACL changes what the verdicts rest on
	}
	t := a.dirs.begin(path) // an ACL changes a directory's mode
	defer a.dirs.end(t, nil)
	defer a.changedHere(false, path)
	return a.okCall(ctx, &wire.SetXattr{Path: path, Name: name, Value: value, Flags: flags, Ino: ino, Gen: gen}, true)
}

// RemoveXattr removes an extended attribute (fusefs.Xattrer).
func (a *Agent) RemoveXattr(ctx context.Context, path, name string, ino, gen uint64) error {
	a.endAllHolds(ctx)
	if isACL(name) {
		defer a.delegs.invalidate(ctx, path)() // deleg.go: an ACL changes what the verdicts rest on
	}
	t := a.dirs.begin(path)
	defer a.dirs.end(t, nil)
	defer a.changedHere(false, path)
	return a.okCall(ctx, &wire.RemoveXattr{Path: path, Name: name, Ino: ino, Gen: gen}, false)
}

// Allocate implements vfs.Allocator: fallocate(2) on the server's file.
func (f *file) Allocate(ctx context.Context, off, length uint64, mode uint32) error {
	if err := f.endHold(ctx, false); err != nil { // pipe.go
		return err
	}
	if err := f.a.wb.flushOpen(ctx, f); err != nil {
		return err // writeback.go: the server's file must hold what the range changes
	}
	r, err := f.call(ctx, func(h uint64) wire.Msg {
		return as(ctx, &wire.Fallocate{Handle: h, Mode: mode, Offset: off, Length: length})
	}, true)
	if err != nil {
		return err
	}
	ar, ok := r.(*wire.AttrReply)
	if !ok {
		return fmt.Errorf("fallocate: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	f.a.noteVersion(ar.Attr.Ino, ar.Attr.Version)
	f.setAttr(ar.Attr)
	return nil
}
