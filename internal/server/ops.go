package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// readDirPage bounds the entries of one ReadDirReply.
const readDirPage = 4096

// dispatch serves one request of a client connection (see serveMsg).
func (s *Server) dispatch(ctx context.Context, c *wire.Conn, m wire.Msg) (wire.Msg, error) {
	if s.cfg.ReadOnly && wire.Mutates(m) {
		return nil, fmt.Errorf("export is read-only: %w", syscall.EROFS)
	}
	switch m := m.(type) {
	case *wire.Ping:
		return &wire.OK{}, nil
	case *wire.Lookup:
		return s.lstat(m.Path)
	case *wire.LookupPinned:
		return s.lookup(m.Path)
	case *wire.Revalidate:
		return s.revalidate(m)
	case *wire.OpenPinned:
		return s.openPinned(c, m)
	case *wire.GetAttr:
		if of := s.handles.get(m.Handle, c); of != nil {
			return s.fstat(of.f)
		}
		return s.lstat(m.Path)
	case *wire.SetAttr:
		return s.setAttr(c, m)
	case *wire.ReadDir:
		return s.readDir(c, m)
	case *wire.ReadDirPlus:
		return s.readDirPlus(c, m)
	case *wire.Mkdir:
		return s.mkdir(m)
	case *wire.Create:
		return s.open(c, m.Path, m.Flags|syscall.O_CREAT, m.Mode, &m.UID, &m.GID)
	case *wire.Open:
		return s.open(c, m.Path, m.Flags&^(syscall.O_CREAT|syscall.O_EXCL), 0, nil, nil)
	case *wire.OpenRead:
		return s.openRead(c, m) // openread.go
	case *wire.DirDelegate:
		return s.dirDelegate(c, m) // dirdeleg.go
	case *wire.DirReturn:
		if cl, _ := c.Value.Load().(*client); cl != nil {
			s.ddelegs.returned(cl.id, m.Inos)
		}
		return nil, nil // one-way
	case *wire.CommitNew:
		return s.commitNew(c, m) // entrybatch.go
	case *wire.Unlink:
		return nil, s.remove(m.Path, false)
	case *wire.Rmdir:
		return nil, s.remove(m.Path, true)
	case *wire.Rename:
		return nil, s.rename(m)
	case *wire.Link:
		return s.link(m)
	case *wire.Symlink:
		return s.symlink(m)
	case *wire.Readlink:
		p, err := clean(m.Path)
		if err != nil {
			return nil, err
		}
		t, err := s.root.Readlink(p)
		if err != nil {
			return nil, err
		}
		return &wire.ReadlinkReply{Target: t}, nil
	case *wire.StatFsReq:
		return s.statFs()
	case *wire.Release:
		return s.release(c, m.Handle)
	case *wire.ReleaseBatch:
		for _, h := range m.Handles {
			s.release(c, h) // an unknown handle: nothing to close
		}
		return nil, nil // one-way
	case *wire.LockSet, *wire.LockTest, *wire.LockRelease, *wire.LockCancel:
		return s.serveLock(ctx, c, m)
	case *wire.WriteSeq:
		return s.writeSeq(c, m)
	case *wire.WriteBase:
		return s.writeBase(c, m)
	case *wire.Commit:
		return s.commit(c, m)
	case *wire.ParentAttrs:
		cl, _ := c.Value.Load().(*client)
		if cl == nil {
			return nil, syscall.EPROTO
		}
		cl.parents.Store(true)
		return &wire.OK{}, nil
	case *wire.Fsync:
		of := s.handles.get(m.Handle, c)
		if of == nil {
			return nil, fmt.Errorf("fsync of unknown handle %d: %w", m.Handle, syscall.EBADF)
		}
		return &wire.OK{}, of.f.Sync()
	case *wire.ReadBlock:
		return s.readBlock(c, m)
	case *wire.Write:
		return s.write(c, m)
	case *wire.Mknod, *wire.GetXattr, *wire.ListXattr, *wire.SetXattr, *wire.RemoveXattr, *wire.Fallocate:
		return s.servePosix(c, m)
	}
	return nil, fmt.Errorf("server does not serve %v: %w", m.Type(), syscall.ENOSYS)
}

// clean checks a client's path: relative, "/"-separated, no "..". The empty
// path is the export root. os.Root enforces the rest (symlinks that leave).
func clean(p string) (string, error) {
	if p == "" || p == "." {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("bad path %q: %w", p, syscall.EINVAL)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves the export: %w", p, syscall.EACCES)
	}
	return c, nil
}

func (s *Server) attrOf(fi os.FileInfo) wire.Attr {
	return s.attrOfStat(fi.Sys().(*syscall.Stat_t))
}

func (s *Server) attrOfStat(st *syscall.Stat_t) wire.Attr {
	a := wire.Attr{
		Ino: st.Ino, Mode: st.Mode, Nlink: uint32(st.Nlink), UID: st.Uid, GID: st.Gid,
		Size: uint64(st.Size), Blocks: uint64(st.Blocks), Atime: st.Atim.Nano(),
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Rdev: uint32(st.Rdev),
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		a.Version = s.versions.observe(st)
	}
	return a
}

func (s *Server) lstat(p string) (*wire.AttrReply, error) {
	p, err := clean(p)
	if err != nil {
		return nil, err
	}
	if r, ok, err := s.lstatFast(p); ok {
		return r, err
	}
	fi, err := s.root.Lstat(p)
	if err != nil {
		return nil, err
	}
	a := s.attrOf(fi)
	// The birth time comes from statx by path; it is used only if it
	// describes the very inode os.Root found inside the export.
	var stx unix.Statx_t
	// It is resolved from the export's own descriptor, not its absolute
	// path: the caller the server acts as may not search the export's
	// ancestors.
	if unix.Statx(int(s.exportDir.Fd()), p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME|unix.STATX_INO, &stx) == nil && stx.Ino == a.Ino {
		a.Gen = genOf(&stx)
	}
	return &wire.AttrReply{Attr: a}, nil
}

func (s *Server) fstat(f *os.File) (*wire.AttrReply, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return s.fattr(f, fi), nil
}

// fattr is the attributes of open file f, whose stat is fi, with its
// generation.
func (s *Server) fattr(f *os.File, fi os.FileInfo) *wire.AttrReply {
	a := s.attrOf(fi)
	var stx unix.Statx_t
	if unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_BTIME, &stx) == nil {
		a.Gen = genOf(&stx)
	}
	return &wire.AttrReply{Attr: a}
}

// genOf folds a file's birth time into a generation number, 0 if the file
// system does not record it.
func genOf(stx *unix.Statx_t) uint64 {
	if stx.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return uint64(stx.Btime.Sec)<<30 ^ uint64(stx.Btime.Nsec)
}

// fileMode converts a st_mode permission word to os.FileMode.
func fileMode(mode uint32) os.FileMode {
	m := os.FileMode(mode & 0o777)
	if mode&syscall.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if mode&syscall.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if mode&syscall.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

func (s *Server) setAttr(c *wire.Conn, m *wire.SetAttr) (*wire.AttrReply, error) {
	p, err := clean(m.Path)
	if err != nil {
		return nil, err
	}
	of := s.handles.get(m.Handle, c)
	if of != nil && m.Valid&^wire.SetSize != 0 {
		// Through the open file: its path may name another file by now.
		// In the order below: the truncation sets the mtime the times
		// may set after it.
		times := wire.SetAtime | wire.SetMtime | wire.SetAtimeNow | wire.SetMtimeNow
		if err := fsetAttr(of.f, &wire.SetAttr{Valid: m.Valid &^ (wire.SetSize | times), Mode: m.Mode,
			UID: m.UID, GID: m.GID}); err != nil {
			return nil, err
		}
		if m.Valid&wire.SetSize != 0 {
			if err := s.truncate(p, of, int64(m.Size), 0, 0); err != nil {
				return nil, err
			}
		}
		if err := fsetAttr(of.f, &wire.SetAttr{Valid: m.Valid & times, Atime: m.Atime, Mtime: m.Mtime}); err != nil {
			return nil, err
		}
		return s.fstat(of.f)
	}
	if of == nil && m.Ino != 0 {
		if err := s.sameFile(p, m.Ino, m.Gen); err != nil {
			return nil, err
		}
	}
	if m.Valid&wire.SetMode != 0 {
		if err := s.root.Chmod(p, fileMode(m.Mode)); err != nil {
			return nil, err
		}
	}
	if m.Valid&(wire.SetUID|wire.SetGID) != 0 {
		uid, gid := -1, -1
		if m.Valid&wire.SetUID != 0 {
			uid = int(m.UID)
		}
		if m.Valid&wire.SetGID != 0 {
			gid = int(m.GID)
		}
		if err := s.root.Lchown(p, uid, gid); err != nil {
			return nil, err
		}
	}
	if m.Valid&wire.SetSize != 0 {
		if err := s.truncate(p, of, int64(m.Size), m.Ino, m.Gen); err != nil {
			return nil, err
		}
	}
	if m.Valid&(wire.SetAtime|wire.SetMtime|wire.SetAtimeNow|wire.SetMtimeNow) != 0 {
		if err := s.chtimes(p, m); err != nil {
			return nil, err
		}
	}
	if of != nil {
		return s.fstat(of.f)
	}
	return s.lstat(p)
}

// truncate sets the size of the open file of, else of the file at p, which
// must be the file (ino, gen) when ino is not 0 (checked on the descriptor
// it truncates through: exact, whatever the name does meanwhile).
func (s *Server) truncate(p string, of *openFile, size int64, want, gen uint64) error {
	f := (*os.File)(nil)
	if of != nil {
		f = of.f
	} else {
		var err error
		if f, _, err = s.openData(p, syscall.O_WRONLY, 0); err != nil {
			return err
		}
		defer f.Close()
		if want != 0 {
			if err := s.isFile(f, p, want, gen); err != nil {
				return err
			}
		}
	}
	ino := uint64(0)
	if of != nil {
		ino = of.ino
	}
	_, _, err := s.mutate(f, ino, func() error { return f.Truncate(size) })
	return err
}

// changed starts a new version of an open file after a change through the
// server and drops its cached blocks. It returns the file's new stat.
func (s *Server) changed(f *os.File) (os.FileInfo, error) {
	fi, _, err := s.bumped(f)
	return fi, err
}

// bumped is changed, also returning the new version.
func (s *Server) bumped(f *os.File) (os.FileInfo, uint64, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if mt, ok := s.versions.nudge(st); ok {
		// A write within the timestamp granularity: move mtime on so that
		// the new content has a new, restart-stable version (versions.go).
		if setMtime(f, mt) == nil {
			if fi2, err := f.Stat(); err == nil {
				fi, st = fi2, fi2.Sys().(*syscall.Stat_t)
			}
		}
	}
	v := s.versions.bump(st)
	s.cache.RemoveFile(st.Ino)
	return fi, v, nil
}

// fileLocks serialize the changes through the server to one file (striped
// by file id): mutate holds one from the stat before a change to the
// attributes after it, so that the version before and the version after
// are consecutive versions of the file.
const fileLockStripes = 64

// mutate applies change to open file f (file id ino, 0: unknown) and starts
// the file's new version. It returns the attributes after the change and
// prev, the version the file had right before it with no other change
// through the server in between; prev is 0 when that cannot be told (a
// change by another program landed at the same time).
func (s *Server) mutate(f *os.File, ino uint64, change func() error) (r *wire.AttrReply, prev uint64, err error) {
	if ino == 0 {
		fi, err := f.Stat()
		if err != nil {
			return nil, 0, err
		}
		ino = fi.Sys().(*syscall.Stat_t).Ino
	}
	mu := &s.fileLocks[ino%fileLockStripes]
	mu.Lock()
	defer mu.Unlock()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	prev = s.versions.observe(fi.Sys().(*syscall.Stat_t))
	if err := change(); err != nil {
		return nil, 0, err
	}
	fi, v, err := s.bumped(f)
	if err != nil {
		return nil, 0, err
	}
	r = s.fattr(f, fi)
	if r.Attr.Version != v {
		prev = 0 // the file changed again between the bump and the stat
	}
	return r, prev, nil
}

// setMtime sets f's mtime to mt nanoseconds (futimens; the access time
// is left alone).
func setMtime(f *os.File, mt int64) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mt)}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, f.Fd(), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func (s *Server) chtimes(p string, m *wire.SetAttr) error {
	// utimensat with UTIME_OMIT for the time not being set keeps it as is;
	// UTIME_NOW (not the server's clock read here) keeps utimensat's rule
	// that setting both times to now needs only write access.
	ts := utimes(m)
	dir, base, err := s.openParent(p)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := unix.UtimesNanoAt(int(dir.Fd()), base, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimes", Path: p, Err: err}
	}
	return nil
}

// openParent opens the directory holding p (through the root, so it cannot
// leave the export) and returns it with p's last component, for the *at
// system calls os.Root does not offer.
func (s *Server) openParent(p string) (*os.File, string, error) {
	dir, base := path.Split(p)
	if base == "" || base == "." || base == ".." {
		return nil, "", fmt.Errorf("bad name %q: %w", p, syscall.EINVAL)
	}
	if dir == "" {
		dir = "."
	}
	if f, ok, err := s.openParentFast(dir); ok {
		if err != nil {
			return nil, "", err
		}
		return f, base, nil
	}
	f, err := s.root.Open(dir)
	if err != nil {
		return nil, "", err
	}
	return f, base, nil
}

func (s *Server) mkdir(m *wire.Mkdir) (*wire.AttrReply, error) {
	p, err := clean(m.Path)
	if err != nil {
		return nil, err
	}
	if err := s.root.Mkdir(p, fileMode(m.Mode)); err != nil {
		return nil, err
	}
	// A server acting as its callers has no umask and the kernel made
	// the directory as the caller (ownership, setgid inheritance). One
	// that is not root keeps its umask: the client's mode is already
	// masked, so restore it.
	if !s.switchCreds {
		if err := s.root.Chmod(p, fileMode(m.Mode)); err != nil {
			return nil, err
		}
	}
	return s.lstat(p)
}

func (s *Server) open(c *wire.Conn, p string, flags, mode uint32, uid, gid *uint32) (*wire.OpenReply, error) {
	p, err := clean(p)
	if err != nil {
		return nil, err
	}
	exists, err := s.openable(p)
	if err != nil {
		return nil, err
	}
	created := uid != nil && !exists
	f, fi, err := s.openData(p, flags, mode)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		f.Close()
		return nil, fmt.Errorf("open %s for writing: %w", p, syscall.EISDIR)
	}
	if created && !s.switchCreds {
		// OpenFile applied the server's umask; the client's mode is already masked.
		if err := f.Chmod(fileMode(mode)); err != nil {
			f.Close()
			return nil, err
		}
	}
	if flags&syscall.O_TRUNC != 0 || created {
		// The stat above may predate the truncation or the chmod/chown.
		if flags&syscall.O_TRUNC != 0 {
			fi, err = s.changed(f)
		} else {
			fi, err = f.Stat()
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	r := s.fattr(f, fi)
	h := s.handles.add(s.newOpenFile(f, r.Attr.Ino, c, flags), s.cfg.Limits.MaxHandles)
	if h == 0 {
		f.Close()
		return nil, fmt.Errorf("open %s: this client already holds %d open files on the server: %w", p, s.cfg.Limits.MaxHandles, syscall.EMFILE)
	}
	return &wire.OpenReply{Handle: h, Attr: r.Attr, Cap: s.openCap(c, flags, &r.Attr)}, nil
}

func (s *Server) remove(p string, dir bool) error {
	p, err := clean(p)
	if err != nil {
		return err
	}
	if s.openat2 {
		return s.removeFast(p, dir)
	}
	fi, err := s.root.Lstat(p)
	if err != nil {
		return err
	}
	switch {
	case dir && !fi.IsDir():
		return fmt.Errorf("rmdir %s: %w", p, syscall.ENOTDIR)
	case !dir && fi.IsDir():
		return fmt.Errorf("unlink %s: %w", p, syscall.EISDIR)
	}
	if err := s.root.Remove(p); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) && errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("rmdir %s: %w", p, syscall.ENOTEMPTY)
		}
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !dir && st.Nlink <= 1 {
		s.versions.forget(st.Ino)
		s.cache.RemoveFile(st.Ino)
	}
	return nil
}

func (s *Server) rename(m *wire.Rename) error {
	oldp, err := clean(m.Old)
	if err != nil {
		return err
	}
	newp, err := clean(m.New)
	if err != nil {
		return err
	}
	od, ob, err := s.openParent(oldp)
	if err != nil {
		return err
	}
	defer od.Close()
	nd, nb, err := s.openParent(newp)
	if err != nil {
		return err
	}
	defer nd.Close()
	if err := unix.Renameat2(int(od.Fd()), ob, int(nd.Fd()), nb, uint(m.Flags)); err != nil {
		return &os.LinkError{Op: "rename", Old: oldp, New: newp, Err: err}
	}
	return nil
}

func (s *Server) link(m *wire.Link) (*wire.AttrReply, error) {
	oldp, err := clean(m.Old)
	if err != nil {
		return nil, err
	}
	newp, err := clean(m.New)
	if err != nil {
		return nil, err
	}
	if m.Ino != 0 {
		if err := s.linkFile(oldp, newp, m.Ino, m.Gen); err != nil {
			return nil, err
		}
	} else if err := s.root.Link(oldp, newp); err != nil {
		return nil, err
	}
	return s.lstat(newp)
}

// linkFile links newp to the file at oldp, which must be (ino, gen): the
// file is opened (O_PATH, as the caller: the search of oldp's directories
// is checked), checked on its descriptor, and linked through it, so that
// the link is to that very file whatever oldp names meanwhile.
func (s *Server) linkFile(oldp, newp string, ino, gen uint64) error {
	f, err := s.root.OpenFile(oldp, unix.O_PATH|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := s.isFile(f, oldp, ino, gen); err != nil {
		return err
	}
	dir, base, err := s.openParent(newp)
	if err != nil {
		return err
	}
	defer dir.Close()
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), int(dir.Fd()), base, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		return &os.LinkError{Op: "link", Old: oldp, New: newp, Err: err}
	}
	return nil
}

func (s *Server) symlink(m *wire.Symlink) (*wire.AttrReply, error) {
	p, err := clean(m.Path)
	if err != nil {
		return nil, err
	}
	if err := s.root.Symlink(m.Target, p); err != nil {
		return nil, err
	}
	return s.lstat(p)
}

func (s *Server) statFs() (*wire.StatFsReply, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.cfg.Export, &st); err != nil {
		return nil, err
	}
	return &wire.StatFsReply{StatFs: wire.StatFs{
		Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail, Files: st.Files, Ffree: st.Ffree,
		Bsize: uint32(st.Bsize), NameLen: uint32(st.Namelen), Frsize: uint32(st.Frsize),
	}}, nil
}

// readBlock serves one block from the server's memory cache or the export.
// The reply carries the version the data belongs to, which is the file's
// current version (it may differ from the one the client asked for).
func (s *Server) readBlock(c *wire.Conn, m *wire.ReadBlock) (*wire.BlockReply, error) {
	of := s.handles.get(m.Handle, c)
	if of == nil {
		return nil, fmt.Errorf("read of unknown handle %d: %w", m.Handle, syscall.EBADF)
	}
	if of.writeOnly {
		return nil, fmt.Errorf("read through handle %d, opened write-only: %w", m.Handle, syscall.EBADF)
	}
	// No generation here (a block reply carries none): a plain fstat.
	fi, err := of.f.Stat()
	if err != nil {
		return nil, err
	}
	a := s.attrOf(fi)
	id := block.ID{File: a.Ino, Index: m.Index}
	reply := &wire.BlockReply{Version: a.Version, Size: a.Size}
	off := int64(m.Index) * int64(s.cfg.BlockSize)
	if uint64(off) >= a.Size {
		return reply, nil
	}
	cl, _ := c.Value.Load().(*client)
	if s.pol.read(c, cl, m, of.f, id, a.Version, reply) {
		return reply, nil
	}
	if data, ok := s.cache.Get(id, block.Version(a.Version)); ok {
		reply.Data, reply.Layer = data, 0
		s.cfg.Metrics.CountRead(obs.LayerServerMemory, len(data))
		s.pol.served(of.f, id, a.Version, data, false)
		return reply, nil
	}
	n := min(int64(s.cfg.BlockSize), int64(a.Size)-off)
	of.willNeed(m.Index, int64(s.cfg.BlockSize), int64(a.Size))
	buf := wire.AllocData(int(n)) // pread into fresh pages faulted once per 4 KiB
	got, err := of.f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	reply.Data, reply.Layer = buf[:got], 1
	s.cache.Put(id, block.Version(a.Version), reply.Data)
	s.pol.served(of.f, id, a.Version, reply.Data, true)
	s.cfg.Metrics.CountRead(obs.LayerServerDisk, got)
	return reply, nil
}

func (s *Server) write(c *wire.Conn, m *wire.Write) (*wire.AttrReply, error) {
	of := s.handles.get(m.Handle, c)
	if of == nil {
		return nil, fmt.Errorf("write to unknown handle %d: %w", m.Handle, syscall.EBADF)
	}
	r, _, err := s.writeTo(of, m)
	return r, err
}

// writeTo writes m's data to an open file. It returns the attributes after
// the write and the version right before it (mutate).
func (s *Server) writeTo(of *openFile, m *wire.Write) (*wire.AttrReply, uint64, error) {
	return s.mutate(of.f, of.ino, func() error {
		if err := s.killPrivOnWrite(of); err != nil {
			return err
		}
		return s.pwrite(of.f, m.Data, m.Offset)
	})
}

// pwrite writes p at off. It is pwrite(2) itself: os.File.WriteAt refuses
// O_APPEND files, for which the kernel appends whatever the offset, as a
// local append would.
func (s *Server) pwrite(f *os.File, p []byte, off uint64) error {
	err := pwriteAll(f, p, int64(off))
	if errors.Is(err, syscall.ENOSPC) {
		s.log.Warn("export disk is full", "err", err)
	}
	return err
}

func pwriteAll(f *os.File, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pwrite(int(f.Fd()), p, off)
		if err != nil {
			return &os.PathError{Op: "write", Path: f.Name(), Err: err}
		}
		if n == 0 {
			return &os.PathError{Op: "write", Path: f.Name(), Err: syscall.EIO}
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// forward consults the cache directory about a client's miss. When a holder
// is to serve it, it sends the holder a Forward, fills reply in as
// "forwarded" and returns true; the caller serves the block otherwise.
func (s *Server) forward(c *wire.Conn, m *wire.ReadBlock, f *os.File, id block.ID, v uint64, reply *wire.BlockReply) bool {
	cl, _ := c.Value.Load().(*client)
	if cl == nil || cl.listen == "" {
		// A client without a peer listener (a coopfs proxy) can receive no
		// forwarded block, and holds none for the directory to count on.
		return false
	}
	// A client warming up with others (warmup.go) takes blocks from its
	// peers before the server's memory: the warm-up's bytes cross the
	// server's link once.
	act, holder := s.coop.decide(cl.id, id, v, m.Retry, s.warm.warming(cl.id))
	if act.Ping != 0 {
		go s.coop.ping(act.Ping, s.cfg.PingTimeout)
	}
	if holder == nil {
		return false
	}
	// The requester admits the holder's block only if it has this digest.
	digest, err := s.digestFor(f, id, v, reply.Size)
	if err != nil {
		s.coop.decide(cl.id, id, v, uint32(act.To), false)
		return false
	}
	err = holder.conn.Send(&wire.Forward{File: id.File, Index: id.Index, Version: v,
		Requester: cl.id, RequesterAddr: cl.listen, Token: m.Token, Cap: s.caps.issue(cl.key, id.File, v)})
	if err != nil {
		// The holder is gone: count the miss against it and serve.
		s.coop.decide(cl.id, id, v, uint32(act.To), false)
		return false
	}
	reply.Forwarded, reply.Holder, reply.Digest = true, uint32(act.To), digest
	s.coop.sent(uint32(act.To), c, wire.PeerNack{Token: m.Token, File: id.File, Index: id.Index,
		Holder: uint32(act.To), Reason: "holder disconnected"})
	return true
}

// errOtherFile is the refusal of a change by path meant for another file
// than the one the path names (wire.SetAttr.Ino).
var errOtherFile = fmt.Errorf("the name denotes another file: %w", syscall.ESTALE)

// sameFile reports (as errOtherFile) whether p names another file than
// (ino, gen); a generation of 0 on either side matches any.
func (s *Server) sameFile(p string, ino, gen uint64) error {
	r, err := s.lstat(p)
	if err != nil {
		return err
	}
	if r.Attr.Ino != ino || gen != 0 && r.Attr.Gen != 0 && r.Attr.Gen != gen {
		return errOtherFile
	}
	return nil
}

// isFile is sameFile for a descriptor f opened at p.
func (s *Server) isFile(f *os.File, p string, ino, gen uint64) error {
	var stx unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_BTIME|unix.STATX_INO, &stx); err != nil {
		return &os.PathError{Op: "statx", Path: p, Err: err}
	}
	if stx.Ino != ino || gen != 0 && genOf(&stx) != 0 && genOf(&stx) != gen {
		return errOtherFile
	}
	return nil
}
