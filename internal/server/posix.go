package server

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// maxXattrSize is the largest xattr value or name list (XATTR_SIZE_MAX).
const maxXattrSize = 64 << 10

// servePosix serves the requests of wire/msg_posix.go: special files,
// extended attributes, fallocate.
func (s *Server) servePosix(c *wire.Conn, m wire.Msg) (wire.Msg, error) {
	switch m := m.(type) {
	case *wire.Mknod:
		return s.mknod(m)
	case *wire.GetXattr:
		return s.getXattr(m)
	case *wire.ListXattr:
		return s.listXattr(m)
	case *wire.SetXattr:
		return s.setXattr(m)
	case *wire.RemoveXattr:
		return s.removeXattr(m)
	case *wire.Fallocate:
		return s.fallocate(c, m)
	}
	return nil, fmt.Errorf("server does not serve %v: %w", m.Type(), syscall.ENOSYS)
}

// mknod makes a special file. The server never opens it: FIFOs, sockets and
// devices are handled by the kernel of the mount that opens them.
func (s *Server) mknod(m *wire.Mknod) (*wire.AttrReply, error) {
	p, err := clean(m.Path)
	if err != nil {
		return nil, err
	}
	dir, base, err := s.openParent(p)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	if err := unix.Mknodat(int(dir.Fd()), base, m.Mode, int(m.Rdev)); err != nil {
		return nil, &os.PathError{Op: "mknod", Path: p, Err: err}
	}
	if !s.switchCreds && m.Mode&syscall.S_IFMT == syscall.S_IFREG {
		// A server that keeps its umask: restore the client's mode.
		if err := s.root.Chmod(p, fileMode(m.Mode)); err != nil {
			return nil, err
		}
	}
	return s.lstat(p)
}

// xattrPath names p for the l*xattr calls without leaving the export: its
// parent is opened through the root and named by its /proc/self/fd link
// (the final component is not followed). The export root is named by an
// open descriptor. done closes what xattrPath opened.
func (s *Server) xattrPath(raw string) (name string, done func(), err error) {
	p, err := clean(raw)
	if err != nil {
		return "", nil, err
	}
	if p == "." {
		f, err := s.root.Open(".")
		if err != nil {
			return "", nil, err
		}
		// "/." follows the descriptor's magic link (the l*xattr calls would
		// otherwise act on the /proc link itself).
		return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) + "/.", func() { f.Close() }, nil
	}
	dir, base, err := s.openParent(p)
	if err != nil {
		return "", nil, err
	}
	return "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + base, func() { dir.Close() }, nil
}

// xattrErr names the export-relative path in an xattr error.
func xattrErr(op, p string, err error) error {
	if errors.Is(err, syscall.ENODATA) {
		// Keep the errno alone: "no such attribute" is an answer, not a failure.
		return fmt.Errorf("%s %s: %w", op, p, syscall.ENODATA)
	}
	return &os.PathError{Op: op, Path: p, Err: err}
}

func (s *Server) getXattr(m *wire.GetXattr) (*wire.XattrReply, error) {
	if err := serverXattr("getxattr", m.Path, m.Name); err != nil {
		return nil, err
	}
	name, done, err := s.xattrPath(m.Path)
	if err != nil {
		return nil, err
	}
	defer done()
	var buf []byte
	if m.Size > 0 {
		buf = make([]byte, min(m.Size, maxXattrSize))
	}
	n, err := unix.Lgetxattr(name, m.Name, buf)
	if err != nil {
		return nil, xattrErr("getxattr", m.Path, err)
	}
	r := &wire.XattrReply{Size: uint32(n)}
	if buf != nil {
		r.Value = buf[:n]
	}
	return r, nil
}

func (s *Server) listXattr(m *wire.ListXattr) (*wire.XattrReply, error) {
	name, done, err := s.xattrPath(m.Path)
	if err != nil {
		return nil, err
	}
	defer done()
	// The whole list is read so that the server's own names can be left
	// out of it, and of the size a size-only query is told.
	buf := make([]byte, maxXattrSize)
	n, err := unix.Llistxattr(name, buf)
	if err != nil {
		return nil, xattrErr("listxattr", m.Path, err)
	}
	list := hideServerXattrs(buf[:n])
	r := &wire.XattrReply{Size: uint32(len(list))}
	switch {
	case m.Size == 0:
	case int(m.Size) < len(list):
		return nil, fmt.Errorf("listxattr %s: %w", m.Path, syscall.ERANGE)
	default:
		r.Value = list
	}
	return r, nil
}

// serverXattrPrefix starts the names of the extended attributes the server
// keeps for itself (drc.go's append records): clients never see them, and
// may neither set nor remove them.
const serverXattrPrefix = "user.coopfs."

// hideServerXattrs drops the server's own names from a listxattr list.
func hideServerXattrs(list []byte) []byte {
	out := list[:0]
	for _, name := range bytes.SplitAfter(list, []byte{0}) {
		if len(name) > 0 && !bytes.HasPrefix(name, []byte(serverXattrPrefix)) {
			out = append(out, name...)
		}
	}
	return out
}

// serverXattr refuses a client's access to one of the server's own names.
func serverXattr(op, path, attr string) error {
	if !strings.HasPrefix(attr, serverXattrPrefix) {
		return nil
	}
	if op == "getxattr" || op == "removexattr" {
		return fmt.Errorf("%s %s: %w", op, path, syscall.ENODATA)
	}
	return fmt.Errorf("%s %s: %s* is reserved for the coopfs server: %w", op, path, serverXattrPrefix, syscall.EPERM)
}

func (s *Server) setXattr(m *wire.SetXattr) (*wire.OK, error) {
	if err := serverXattr("setxattr", m.Path, m.Name); err != nil {
		return nil, err
	}
	if err := s.meantFile(m.Path, m.Ino, m.Gen); err != nil {
		return nil, err
	}
	name, done, err := s.xattrPath(m.Path)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := unix.Lsetxattr(name, m.Name, m.Value, int(m.Flags)); err != nil {
		return nil, xattrErr("setxattr", m.Path, err)
	}
	return &wire.OK{}, nil
}

func (s *Server) removeXattr(m *wire.RemoveXattr) (*wire.OK, error) {
	if err := serverXattr("removexattr", m.Path, m.Name); err != nil {
		return nil, err
	}
	if err := s.meantFile(m.Path, m.Ino, m.Gen); err != nil {
		return nil, err
	}
	name, done, err := s.xattrPath(m.Path)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := unix.Lremovexattr(name, m.Name); err != nil {
		return nil, xattrErr("removexattr", m.Path, err)
	}
	return &wire.OK{}, nil
}

func (s *Server) fallocate(c *wire.Conn, m *wire.Fallocate) (*wire.AttrReply, error) {
	of := s.handles.get(m.Handle, c)
	if of == nil {
		return nil, fmt.Errorf("fallocate of unknown handle %d: %w", m.Handle, syscall.EBADF)
	}
	r, _, err := s.mutate(of.f, of.ino, func() error {
		if err := unix.Fallocate(int(of.f.Fd()), m.Mode, int64(m.Offset), int64(m.Length)); err != nil {
			return &os.PathError{Op: "fallocate", Path: "(handle)", Err: err}
		}
		return nil
	})
	return r, err
}

// meantFile is sameFile for a change by a client's path carrying the file
// it means (ino 0: any). Checked, then applied by path: a rename between
// the two is not covered.
func (s *Server) meantFile(raw string, ino, gen uint64) error {
	if ino == 0 {
		return nil
	}
	p, err := clean(raw)
	if err != nil {
		return err
	}
	return s.sameFile(p, ino, gen)
}
