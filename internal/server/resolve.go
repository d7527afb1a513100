package server

import (
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// Path resolution inside the export in one system call. os.Root walks a
// path one component at a time (an openat and a close per directory, then
// the call itself); the kernel's openat2 with RESOLVE_BENEATH walks it in
// one call under the same rule — no component, "..", or symlink may lead
// out of the export (the kernel answers EXDEV, reported here as EACCES, as
// clean reports a lexical ".."), and RESOLVE_NO_MAGICLINKS refuses
// /proc-style links. A lookup is then openat2 of the parent (O_PATH: only
// search permission on the way, as POSIX asks) and one statx relative to
// it, or a statx relative to the export itself for a name at its top.
// Every call runs with the caller's file system identity (identity.go), so
// the kernel checks search permission on each directory exactly as for a
// local process. Kernels without openat2 (before 5.6) keep os.Root.

// resolveFlags are the openat2 resolve flags of every lookup.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// Paths longer than one openat2 takes. The kernel refuses a path of
// PATH_MAX bytes or more (ENAMETOOLONG) though it reaches any depth one
// directory at a time, and a client's kernel sends the server paths from
// the export root, however deep its working directory. Such a path is
// resolved in chunks of whole components, each under pathMax bytes, each
// beneath the directory the chunk before it opened (O_PATH), so that every
// step stays beneath a directory that is itself beneath the export: a
// symbolic link or "..", in any chunk, cannot climb above the chunk's
// start, let alone out of the export, and a directory renamed while the
// walk holds it is still in the export (no request moves anything out of
// it). The chunks of a long path, its last one too, are resolved with
// RESOLVE_NO_SYMLINKS, so that its result never depends on where the cuts
// fall: a client's kernel resolves symbolic links itself and looks a path
// up one component at a time, so a symbolic link in a path it sends means
// the export changed under it, and the request fails with ELOOP — as an
// open of a final symbolic link does (openable). (The requests made
// through os.Root — mkdir, symlink, link, chmod, chown, readlink — walk one
// component at a time at any length, and follow a link that stays in the
// export.) Paths under pathMax bytes, nearly all of them, keep their single
// openat2 from the export.

// pathMax is the longest path one openat2 resolves (PATH_MAX less its NUL).
const pathMax = unix.PathMax - 1

// longResolveFlags are the resolve flags of every chunk of a long path.
const longResolveFlags = resolveFlags | unix.RESOLVE_NO_SYMLINKS

// beneath returns the directory p (cleaned) is resolved from, what is left
// of p to resolve from it and the resolve flags to do so: the export, p
// itself and resolveFlags for a path under pathMax bytes; for a longer one,
// the directory its leading chunks lead to (opened O_PATH), its last chunk
// and longResolveFlags. The caller closes dirfd with closeBeneath.
func (s *Server) beneath(p string) (dirfd int, rest string, res uint64, err error) {
	if len(p) <= pathMax {
		return s.exportFd, p, resolveFlags, nil
	}
	if strings.Contains("/"+p+"/", "/../") {
		// clean never leaves one, but a walk in chunks must not meet one:
		// it would climb above its chunk's start.
		return -1, "", 0, &os.PathError{Op: "open", Path: p, Err: syscall.EACCES}
	}
	dirfd, rest = s.exportFd, p
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: longResolveFlags}
	for len(rest) > pathMax {
		cut := strings.LastIndexByte(rest[:pathMax+1], '/')
		if cut <= 0 {
			s.closeBeneath(dirfd)
			return -1, "", 0, &os.PathError{Op: "open", Path: p, Err: syscall.ENAMETOOLONG}
		}
		fd, err := openat2(dirfd, rest[:cut], p, &how)
		s.closeBeneath(dirfd)
		if err != nil {
			return -1, "", 0, err
		}
		dirfd, rest = fd, rest[cut+1:]
	}
	if rest == "" {
		rest = "." // p ended in the slash of a directory the last chunk opened
	}
	return dirfd, rest, longResolveFlags, nil
}

// closeBeneath closes a directory beneath returned, unless it is the export.
func (s *Server) closeBeneath(dirfd int) {
	if dirfd != s.exportFd && dirfd >= 0 {
		unix.Close(dirfd)
	}
}

// initResolve checks once whether the kernel has openat2.
func (s *Server) initResolve() {
	fd, err := s.openBeneath(".", unix.O_PATH|unix.O_DIRECTORY)
	if err == nil {
		unix.Close(fd)
		s.openat2 = true
	}
}

// openBeneath opens p (cleaned, relative to the export) with flags,
// resolved beneath the export. It returns a descriptor the caller closes.
func (s *Server) openBeneath(p string, flags int) (int, error) {
	dirfd, rest, res, err := s.beneath(p)
	if err != nil {
		return -1, err
	}
	defer s.closeBeneath(dirfd)
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: res}
	return openat2(dirfd, rest, p, &how)
}

// openat2 is one openat2 of rest from dirfd (p, the whole path, names it
// in errors), retried when a signal or a racing rename interrupts it.
func openat2(dirfd int, rest, p string, how *unix.OpenHow) (int, error) {
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(dirfd, rest, how)
		switch {
		case err == nil:
			return fd, nil
		case err == unix.EINTR || (err == unix.EAGAIN && tries < 8):
			// EAGAIN: a rename elsewhere raced with the resolution of ".."
			// (RESOLVE_BENEATH then refuses rather than guess); try again.
			continue
		case err == unix.EXDEV:
			err = syscall.EACCES
		}
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
}

// statBeneath is lstat(p) with the birth time: p's parent resolved beneath
// the export, p's last component not followed.
func (s *Server) statBeneath(p string) (*unix.Statx_t, error) {
	dirfd, base := s.exportFd, p
	if p == "." {
		base = ""
	} else if dir, b := path.Split(p); dir != "" {
		fd, err := s.openBeneath(dir, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		dirfd, base = fd, b
	}
	flags := unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT
	if base == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var stx unix.Statx_t
	for {
		err := unix.Statx(dirfd, base, flags, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &stx)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "lstat", Path: p, Err: err}
		}
		return &stx, nil
	}
}

// attrOfStatx is the wire attributes of a statx result, with its
// generation and (for a regular file) its version.
func (s *Server) attrOfStatx(stx *unix.Statx_t) wire.Attr {
	st := statxStat(stx)
	a := s.attrOfStat(&st)
	a.Gen = genOf(stx)
	return a
}

// lstatFast is lstat through openat2 and statx; ok is false when the
// kernel lacks openat2 (the caller uses os.Root).
func (s *Server) lstatFast(p string) (r *wire.AttrReply, ok bool, err error) {
	if !s.openat2 {
		return nil, false, nil
	}
	stx, err := s.statBeneath(p)
	if err != nil {
		return nil, true, err
	}
	return &wire.AttrReply{Attr: s.attrOfStatx(stx)}, true, nil
}

// openParentFast opens the directory holding base for reading, resolved
// beneath the export (see openParent); ok is false without openat2.
func (s *Server) openParentFast(dir string) (f *os.File, ok bool, err error) {
	if !s.openat2 {
		return nil, false, nil
	}
	fd, err := s.openBeneath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, true, err
	}
	return os.NewFile(uintptr(fd), dir), true, nil
}

// openFileBeneath is os.Root.OpenFile through openat2: flags as open(2),
// mode's permission bits (with set-id and sticky) for a file it creates.
func (s *Server) openFileBeneath(p string, flags int, mode uint32) (*os.File, error) {
	dirfd, rest, res, err := s.beneath(p)
	if err != nil {
		return nil, err
	}
	defer s.closeBeneath(dirfd)
	how := unix.OpenHow{Flags: uint64(flags&validOpenFlags | unix.O_CLOEXEC), Resolve: res}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
		how.Mode = uint64(mode & 0o7777)
	}
	fd, err := openat2(dirfd, rest, p, &how)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// validOpenFlags are the open(2) flags openat2 accepts (the kernel's
// VALID_OPEN_FLAGS). openat2 refuses any other bit where open(2) ignores
// it, and a client's flags may carry some: the kernel's FMODE_EXEC of an
// open for exec(2), which travels in FUSE's open flags.
const validOpenFlags = unix.O_ACCMODE | unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY | unix.O_TRUNC |
	unix.O_APPEND | unix.O_NONBLOCK | unix.O_DSYNC | unix.O_ASYNC | unix.O_DIRECT | unix.O_LARGEFILE |
	unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_NOATIME | unix.O_CLOEXEC | unix.O_PATH | unix.O_TMPFILE | unix.O_SYNC

// lstatAny is lstat(p) (cleaned): through openat2 when the kernel has it,
// else os.Root's walk.
func (s *Server) lstatAny(p string) (os.FileInfo, error) {
	if s.openat2 {
		return s.lstatInfo(p)
	}
	return s.root.Lstat(p)
}

// lstatInfo is statBeneath as an os.FileInfo.
func (s *Server) lstatInfo(p string) (os.FileInfo, error) {
	stx, err := s.statBeneath(p)
	if err != nil {
		return nil, err
	}
	return statxInfo{name: path.Base(p), st: statxStat(stx)}, nil
}

// statxInfo is an os.FileInfo of a statx result.
type statxInfo struct {
	name string
	st   syscall.Stat_t
}

func (i statxInfo) Name() string       { return i.name }
func (i statxInfo) Size() int64        { return i.st.Size }
func (i statxInfo) ModTime() time.Time { return time.Unix(i.st.Mtim.Unix()) }
func (i statxInfo) IsDir() bool        { return i.st.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func (i statxInfo) Sys() any           { return &i.st }
func (i statxInfo) Mode() os.FileMode {
	m := os.FileMode(i.st.Mode & 0o777)
	switch i.st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= os.ModeDir
	case syscall.S_IFLNK:
		m |= os.ModeSymlink
	case syscall.S_IFIFO:
		m |= os.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= os.ModeSocket
	case syscall.S_IFCHR:
		m |= os.ModeDevice | os.ModeCharDevice
	case syscall.S_IFBLK:
		m |= os.ModeDevice
	}
	if i.st.Mode&syscall.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if i.st.Mode&syscall.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if i.st.Mode&syscall.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

// openDirFile opens directory p (cleaned) for listing.
func (s *Server) openDirFile(p string) (*os.File, error) {
	if !s.openat2 {
		return s.root.Open(p)
	}
	fd, err := s.openBeneath(p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// removeFast is remove (unlink or rmdir of p, cleaned) through openat2:
// the parent resolved beneath the export (O_PATH: write and search
// permission on it are what the kernel checks, as for a local unlink), one
// statx for the type check and the link count, one unlinkat.
func (s *Server) removeFast(p string, dir bool) error {
	d, base := path.Split(p)
	if base == "" || base == "." || base == ".." {
		return fmt.Errorf("remove %q: %w", p, syscall.EINVAL)
	}
	dirfd := s.exportFd
	if d != "" {
		fd, err := s.openBeneath(d, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		dirfd = fd
	}
	var stx unix.Statx_t
	if err := unix.Statx(dirfd, base, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_NLINK, &stx); err != nil {
		return &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	isDir := stx.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case dir && !isDir:
		return fmt.Errorf("rmdir %s: %w", p, syscall.ENOTDIR)
	case !dir && isDir:
		return fmt.Errorf("unlink %s: %w", p, syscall.EISDIR)
	}
	flags, op := 0, "unlink"
	if dir {
		flags, op = unix.AT_REMOVEDIR, "rmdir"
	}
	if err := unix.Unlinkat(dirfd, base, flags); err != nil {
		if err == unix.EEXIST {
			err = syscall.ENOTEMPTY
		}
		return &os.PathError{Op: op, Path: p, Err: err}
	}
	if !dir && stx.Nlink <= 1 {
		s.versions.forget(stx.Ino)
		s.cache.RemoveFile(stx.Ino)
	}
	return nil
}
