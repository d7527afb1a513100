package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// Squash modes, as NFS's root_squash / all_squash / no_root_squash.
const (
	SquashRoot = "root" // a client's uid 0 (and gid 0) become the anonymous user
	SquashAll  = "all"  // every client user becomes the anonymous user
	SquashNone = "none" // client identities are trusted as they are
)

// DefaultAnonID is the anonymous uid and gid: nobody / nogroup.
const DefaultAnonID = 65534

// identity is who the server acts as for one request.
type identity struct {
	uid, gid uint32
	groups   []uint32
}

// anon is the anonymous identity: no supplementary groups.
func (s *Server) anon() identity {
	return identity{uid: s.cfg.AnonUID, gid: s.cfg.AnonGID}
}

// squash maps a client's claimed identity to the one the server acts as.
func (s *Server) squash(m *wire.As) identity {
	switch s.cfg.Squash {
	case SquashAll:
		return s.anon()
	case SquashNone:
		return identity{uid: m.UID, gid: m.GID, groups: m.Groups}
	}
	id := identity{uid: m.UID, gid: m.GID, groups: m.Groups}
	if id.uid == 0 {
		return s.anon() // root's groups go with it
	}
	if id.gid == 0 {
		id.gid = s.cfg.AnonGID
	}
	if slices.Contains(id.groups, 0) {
		id.groups = slices.Clone(id.groups)
		for i, g := range id.groups {
			if g == 0 {
				id.groups[i] = s.cfg.AnonGID
			}
		}
	}
	return id
}

// needsIdentity reports whether m acts on the export by path and so must be
// performed as some user. Requests through an open handle (read, write,
// fsync, release) use the access the open granted, as a local file
// descriptor does; statfs needs no permission.
func needsIdentity(m wire.Msg) bool {
	switch m.(type) {
	case *wire.Ping, *wire.ReadBlock, *wire.Write, *wire.Release, *wire.ReleaseBatch, *wire.Fsync,
		*wire.Discard, *wire.StatFsReq, *wire.WriteSeq, *wire.WriteBase, *wire.ParentAttrs,
		*wire.LockSet, *wire.LockTest, *wire.LockRelease, *wire.LockCancel:
		return false
	}
	return true
}

// serveAs serves a request of a client connection (below serveMsg): it finds the
// identity of a request (the As wrapper's, squashed; the anonymous user for
// a path request that comes without one) and serves the request as that
// identity.
func (s *Server) serveAs(ctx context.Context, c *wire.Conn, m wire.Msg) (wire.Msg, error) {
	var id identity
	switch as := m.(type) {
	case *wire.As:
		id, m = s.squash(as), as.Msg
		if as.HasUmask {
			s.applyUmask(m, as.Umask)
		}
	default:
		if !needsIdentity(m) {
			return s.dispatch(ctx, c, m)
		}
		id = s.anon()
	}
	if !s.switchCreds || s.ownIdentity(id) {
		return s.dispatch(ctx, c, m)
	}
	r, err := s.runAs(id, func() (wire.Msg, error) { return s.dispatch(ctx, c, m) })
	if sa, ok := m.(*wire.SetAttr); ok && errors.Is(err, syscall.EPERM) {
		return s.killPriv(ctx, c, id, sa, r, err)
	}
	return r, err
}

// killPriv handles the chmod a mount's kernel sends to clear the set-id
// bits of a file that a user who is not its owner writes to (or
// truncates): locally the kernel clears them itself, without the chmod
// permission check. When a mode-only setattr that was refused would only
// clear S_ISUID/S_ISGID, and the identity may write to the file, the
// server clears them with its own rights. Otherwise the refusal stands.
func (s *Server) killPriv(ctx context.Context, c *wire.Conn, id identity, m *wire.SetAttr, r wire.Msg, err error) (wire.Msg, error) {
	const setID = syscall.S_ISUID | syscall.S_ISGID
	if m.Valid != wire.SetMode {
		return r, err
	}
	p, cerr := clean(m.Path)
	if cerr != nil {
		return r, err
	}
	fi, serr := s.root.Lstat(p)
	if serr != nil || !fi.Mode().IsRegular() {
		return r, err
	}
	cur := fi.Sys().(*syscall.Stat_t).Mode & 07777
	want := m.Mode & 07777
	sameRest := want&^setID == cur&^setID
	clears := want&setID&^cur == 0 && want&setID != cur&setID // a strict subset of the bits set
	if !sameRest || !clears {
		return r, err // not a pure clearing of set-id bits
	}
	_, aerr := s.runAs(id, func() (wire.Msg, error) {
		dir, base, err := s.openParent(p)
		if err != nil {
			return nil, err
		}
		defer dir.Close()
		return nil, unix.Faccessat2(int(dir.Fd()), base, unix.W_OK, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW)
	})
	if aerr != nil {
		return r, err
	}
	return s.dispatch(ctx, c, m)
}

// ownIdentity reports whether id is the server's own (root, its group and
// groups, every capability it has): every thread outside runAs holds
// exactly that, so a request acting as it needs no switch. The switch and
// its return are ten system calls, six of which allocate and commit new
// credentials: ~38 µs on the reference VM, more than the rest of a lookup
// (docs/benchmarks-meta.md).
func (s *Server) ownIdentity(id identity) bool {
	return id.uid == 0 && id.gid == s.ownGID && slices.Equal(id.groups, s.ownGroups)
}

// runAs runs fn on this goroutine's OS thread with the thread's file system
// credentials set to id: fsuid, fsgid and supplementary groups. The kernel
// then checks every permission of fn's system calls for id (including
// ACLs, the sticky bit, setgid inheritance and the clearing of set-id
// bits) and gives new files id's ownership, exactly as for a local
// process of that user. setfsuid, setfsgid and the raw setgroups system
// call change only the calling thread (unlike syscall.Setgroups and
// AllThreadsSyscall, which change every thread of the process), so the
// goroutine is locked to its thread for the call and the credentials are
// restored before it is unlocked. If they cannot be restored, the
// goroutine stays locked, and Go ends the thread when the goroutine exits.
func (s *Server) runAs(id identity, fn func() (wire.Msg, error)) (wire.Msg, error) {
	// Every thread outside runAs holds the server's own groups, so a
	// caller with the same groups needs no setgroups either way.
	sameGroups := slices.Equal(id.groups, s.ownGroups)
	runtime.LockOSThread()
	if err := s.setCreds(id.uid, id.gid, id.groups, sameGroups); err != nil {
		if s.restoreCreds(sameGroups) == nil {
			runtime.UnlockOSThread()
		}
		return nil, fmt.Errorf("act as uid %d gid %d: %v: %w", id.uid, id.gid, err, syscall.EPERM)
	}
	m, err := fn()
	if s.restoreCreds(sameGroups) == nil {
		runtime.UnlockOSThread()
	}
	return m, err
}

// setCreds sets the calling thread's file system identity (and its groups
// unless keepGroups) and checks that it applied.
func (s *Server) setCreds(uid, gid uint32, groups []uint32, keepGroups bool) error {
	if uid == 0 {
		// Back to (or acting as) root: the capabilities first, as the
		// switch below needs CAP_SETUID and CAP_SETGID.
		if err := s.setEffectiveCaps(true); err != nil {
			return err
		}
	}
	if !keepGroups {
		var buf [16]int
		gs := buf[:0]
		for _, g := range groups {
			gs = append(gs, int(g))
		}
		if err := unix.Setgroups(gs); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
	}
	// setfsgid/setfsuid report no error; read the value back instead.
	unix.Setfsgid(int(gid))
	unix.Setfsuid(int(uid))
	if cur, _ := unix.SetfsgidRetGid(-1); cur != int(gid) {
		return fmt.Errorf("setfsgid %d did not apply", gid)
	}
	if cur, _ := unix.SetfsuidRetUid(-1); cur != int(uid) {
		return fmt.Errorf("setfsuid %d did not apply", uid)
	}
	if uid != 0 {
		return s.setEffectiveCaps(false)
	}
	return nil
}

// setEffectiveCaps sets the calling thread's effective capabilities: all it
// is permitted (all), or only CAP_SETUID and CAP_SETGID, which the thread
// needs to switch back. setfsuid drops only the file system capabilities;
// the others (CAP_SYS_ADMIN for trusted.* xattrs, CAP_SETFCAP for
// security.capability, CAP_SYS_RESOURCE for the reserved blocks) must not
// serve a client user either. capset(2) changes only the calling thread.
func (s *Server) setEffectiveCaps(all bool) error {
	// The permitted set was read once (initCreds): the threads' permitted
	// sets never change, and a capget per switch was two system calls of
	// every request.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := s.permitted
	for i := range data {
		data[i].Effective = data[i].Permitted
	}
	if !all {
		data[0].Effective &= 1<<unix.CAP_SETUID | 1<<unix.CAP_SETGID
		data[1].Effective = 0
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// readPermitted records the process's capability sets.
func (s *Server) readPermitted() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&hdr, &s.permitted[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	return nil
}

// restoreCreds puts the thread back to the server's own credentials (root,
// its group and the groups it started with) and checks that they are back.
func (s *Server) restoreCreds(keepGroups bool) error {
	return s.setCreds(0, s.ownGID, s.ownGroups, keepGroups)
}

// initCreds decides whether the server acts as its clients: only as root
// (setfsuid needs CAP_SETUID). It then records the server's own groups and
// clears the umask (umaskOff).
func (s *Server) initCreds() error {
	if os.Geteuid() != 0 {
		s.log.Warn("not running as root: every request is performed as the server's own user, whatever --squash says")
		return nil
	}
	gs, err := unix.Getgroups()
	if err != nil {
		return fmt.Errorf("read the server's groups: %w", err)
	}
	for _, g := range gs {
		s.ownGroups = append(s.ownGroups, uint32(g))
	}
	s.ownGID = uint32(os.Getegid())
	if err := s.readPermitted(); err != nil {
		return fmt.Errorf("read the server's capabilities: %w", err)
	}
	syscall.Umask(umaskOff)
	s.switchCreds = true
	return nil
}

// umaskOff is the process's umask while the server acts for clients: 0,
// because the client's kernel has already applied the caller's umask to the
// mode of every create (and a parent's default ACL, which replaces the
// umask, is applied by the export's kernel).
const umaskOff = 0

// applyUmask applies the caller's umask to the mode of a Create, Mkdir or
// Mknod, unless the parent directory has a default ACL: then, as on a
// local file system, the ACL takes the umask's place (the export's kernel
// applies it). The mount's kernel leaves modes unmasked for this
// (FUSE_DONT_MASK). The parent is read as the server: its default ACL is
// not a secret, and a caller who may not search it fails in the create.
func (s *Server) applyUmask(m wire.Msg, umask uint32) {
	var p string
	var mode *uint32
	switch m := m.(type) {
	case *wire.Create:
		p, mode = m.Path, &m.Mode
	case *wire.Mkdir:
		p, mode = m.Path, &m.Mode
	case *wire.Mknod:
		p, mode = m.Path, &m.Mode
	default:
		return
	}
	if !s.parentHasDefaultACL(p) {
		*mode &^= umask & 0o777
	}
}

func (s *Server) parentHasDefaultACL(raw string) bool {
	p, err := clean(raw)
	if err != nil || p == "." {
		return false
	}
	dir, _, err := s.openParent(p)
	if err != nil {
		return false
	}
	defer dir.Close()
	n, err := unix.Fgetxattr(int(dir.Fd()), "system.posix_acl_default", nil)
	return err == nil && n > 0
}
