package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"
	"unsafe"

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
		*wire.Discard, *wire.Held, *wire.StatFsReq, *wire.WriteSeq, *wire.WriteBase, *wire.ParentAttrs, *wire.DirReturn,
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
	r, err := s.runAs(c, id, func() (wire.Msg, error) { return s.dispatch(ctx, c, m) })
	if sa, ok := m.(*wire.SetAttr); ok && errors.Is(err, syscall.EPERM) {
		return s.killPriv(c, id, sa, r, err)
	}
	return r, err
}

// killPriv handles the chmod a mount's kernel sends to clear the set-id
// bits of a file that a user who is not its owner writes to (or
// truncates): locally the kernel clears them itself, as part of the write,
// without the chmod permission check, so the mount's chmod fails here with
// EPERM and the write behind it would fail too. The refusal is lifted only
// for what the export's kernel would do itself for this caller's write:
//
//   - the file is opened as the caller (O_PATH, not following a symlink,
//     beneath the export), and everything after works on that descriptor:
//     a rename or symlink swap of the path in the meantime changes nothing;
//   - the caller may write to that very inode (faccessat2 on the
//     descriptor, as the caller: mode bits, ACLs, read-only and immutable
//     files, as the kernel checks a write);
//   - the mode asked for is the file's current mode without some of the
//     bits the kernel clears on a write by this caller (killBits), and
//     without anything else.
//
// Only then is the mode set through the descriptor with the server's
// rights, which is the write's own clearing done ahead of it. A concurrent
// chmod by the file's owner between the stat and the chmod can be undone
// by it; the kernel does both under the inode's lock. The owner could set
// that mode anyway, so the caller gains nothing from the race.
func (s *Server) killPriv(c *wire.Conn, id identity, m *wire.SetAttr, r wire.Msg, err error) (wire.Msg, error) {
	if m.Valid != wire.SetMode || !s.openat2 {
		return r, err
	}
	p, cerr := clean(m.Path)
	if cerr != nil || p == "." {
		return r, err
	}
	var fd int
	_, aerr := s.runAs(c, id, func() (wire.Msg, error) {
		var oerr error
		if fd, oerr = s.openBeneath(p, unix.O_PATH|unix.O_NOFOLLOW); oerr != nil {
			return nil, oerr
		}
		if oerr = unix.Faccessat2(fd, "", unix.W_OK, unix.AT_EACCESS|unix.AT_EMPTY_PATH); oerr != nil {
			unix.Close(fd)
		}
		return nil, oerr
	})
	if aerr != nil {
		return r, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return r, err
	}
	cur, want := st.Mode&0o7777, m.Mode&0o7777
	kill := killBits(st.Mode, st.Gid, id)
	cleared := cur &^ want
	if want&^cur != 0 || cleared == 0 || cleared&^kill != 0 {
		return r, err // not (part of) the clearing the caller's write does
	}
	if cerr := fchmodFd(fd, want); cerr != nil {
		return nil, cerr
	}
	// The attributes of the file changed, not of whatever the path names now.
	var after syscall.Stat_t
	if serr := syscall.Fstat(fd, &after); serr != nil {
		return nil, serr
	}
	return &wire.AttrReply{Attr: s.attrOfStat(&after)}, nil
}

// killBits is what the kernel clears of a regular file's mode when a
// caller without CAP_FSETID writes to it or truncates it
// (setattr_should_drop_suidgid): S_ISUID always; S_ISGID when the group may
// execute the file, or when the caller is not in the file's group. The
// server's own identity and a client's uid 0 that is not squashed hold
// CAP_FSETID: nothing is cleared for them.
func killBits(mode, gid uint32, id identity) uint32 {
	if mode&unix.S_IFMT != unix.S_IFREG || id.uid == 0 {
		return 0
	}
	kill := mode & unix.S_ISUID
	if mode&unix.S_ISGID != 0 && (mode&unix.S_IXGRP != 0 || (id.gid != gid && !slices.Contains(id.groups, gid))) {
		kill |= unix.S_ISGID
	}
	return kill
}

// fchmodFd sets the mode of the file an O_PATH descriptor names:
// fchmodat2 with AT_EMPTY_PATH (Linux 6.6), else through the descriptor's
// /proc link, which names the same inode whatever its path is now.
func fchmodFd(fd int, mode uint32) error {
	empty := [1]byte{}
	_, _, e := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), uintptr(mode), unix.AT_EMPTY_PATH, 0, 0)
	switch e {
	case 0:
		return nil
	case unix.ENOSYS, unix.EINVAL:
		if err := unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), mode); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
		return nil
	}
	return fmt.Errorf("chmod: %w", e)
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
func (s *Server) runAs(c *wire.Conn, id identity, fn func() (wire.Msg, error)) (m wire.Msg, err error) {
	// Every thread outside runAs holds the server's own groups, so a
	// caller with the same groups needs no setgroups either way.
	sameGroups := slices.Equal(id.groups, s.ownGroups)
	runtime.LockOSThread()
	// Deferred: a panic in fn (recovered by serveMsg, which then serves
	// the connection's next request on this goroutine) must not leave the
	// thread acting as the caller.
	defer s.endRunAs(c, sameGroups)
	if err := s.setCreds(id.uid, id.gid, id.groups, sameGroups); err != nil {
		return nil, fmt.Errorf("act as uid %d gid %d: %v: %w", id.uid, id.gid, err, syscall.EPERM)
	}
	return fn()
}

// endRunAs puts the thread back to the server's credentials and unlocks
// it. If they cannot be restored, the thread must never run anything
// again: the goroutine ends here (runtime.Goexit, also in the middle of a
// panic, which is dropped), still locked, and Go ends the thread with it.
// The request's connection (c, if not nil) is closed first: the goroutine
// may be its read loop, and its client reconnects.
func (s *Server) endRunAs(c *wire.Conn, sameGroups bool) {
	err := s.restoreCreds(sameGroups)
	if err == nil {
		runtime.UnlockOSThread()
		return
	}
	p := recover()
	s.log.Error("cannot restore the server's credentials on a thread: ending the thread and the request's connection", "err", err, "panic", p)
	if c != nil {
		c.Close()
	}
	runtime.Goexit()
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
	case *wire.CommitNew:
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

// threadIdentity is the file system identity the calling thread acts as:
// the server's own (uid 0) outside runAs, the caller's inside it.
func threadIdentity() identity {
	uid, _ := unix.SetfsuidRetUid(-1)
	gid, _ := unix.SetfsgidRetGid(-1)
	id := identity{uid: uint32(uid), gid: uint32(gid)}
	gs, _ := unix.Getgroups()
	for _, g := range gs {
		id.groups = append(id.groups, uint32(g))
	}
	return id
}

// killPrivOnWrite clears, before a write through of, the set-id bits the
// kernel clears when the opener writes to the file itself (killBits).
// Writes through a handle run as the server, which holds CAP_FSETID: the
// kernel keeps the bits for it, and a user's write would leave a setuid
// file with the user's content. They are cleared before the data is
// written, as the kernel does, so the new content is never set-id. One
// fstat per write through a handle a non-root caller opened for writing.
func (s *Server) killPrivOnWrite(of *openFile) error {
	if of.opener == nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(of.f.Fd()), &st); err != nil {
		return &os.PathError{Op: "stat", Path: of.f.Name(), Err: err}
	}
	kill := killBits(st.Mode, st.Gid, *of.opener)
	if st.Mode&kill == 0 {
		return nil
	}
	if err := unix.Fchmod(int(of.f.Fd()), st.Mode&0o7777&^kill); err != nil {
		return &os.PathError{Op: "chmod", Path: of.f.Name(), Err: err}
	}
	return nil
}
