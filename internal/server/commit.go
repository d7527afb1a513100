package server

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// Commit (wire type 120): the writes and attribute changes a client held
// back while it had a file it created open, applied in order through the
// open handle when the client closes the file. The attribute changes go
// through the descriptor (fchmod, fchown, futimens), as the caller whose
// identity the request carries: the permission rules are those of the
// path calls they stand for, and a rename of the file in the meantime
// does not matter.

// commit applies m once per (client session, m.Seq), as a write (drc.go).
func (s *Server) commit(c *wire.Conn, m *wire.Commit) (*wire.AttrReply, error) {
	if err := checkCommit(m); err != nil {
		return nil, err
	}
	r, err := s.once(c, m.Seq, m.Release, func(e *drcEntry) (wire.Msg, error) {
		if errors.Is(e.err, syscall.EBADF) {
			return s.commit(c, &wire.Commit{Seq: m.Seq, Handle: m.Handle, Ops: m.Ops, Data: m.Data}) // the first try never ran
		}
		s.drcHits.Add(1)
		if e.err != nil {
			return nil, e.err
		}
		return &wire.AttrReply{Attr: e.reply.Attr}, nil
	}, func(cl *client, e *drcEntry) (wire.Msg, error) {
		return s.commitTo(c, writeID{cl.session, m.Seq}, e, m)
	})
	ar, _ := r.(*wire.AttrReply)
	return ar, err
}

// commitTo applies m through its handle (its cache entry e, named id).
func (s *Server) commitTo(c *wire.Conn, id writeID, e *drcEntry, m *wire.Commit) (*wire.AttrReply, error) {
	of := s.handles.get(m.Handle, c)
	if of == nil {
		s.drc.abort(id, e)
		return nil, fmt.Errorf("commit to unknown handle %d: %w", m.Handle, syscall.EBADF)
	}
	var r *wire.AttrReply
	var err error
	if of.appending && len(m.Data) > 0 {
		err = fmt.Errorf("commit of writes to an O_APPEND handle (send them as WriteSeq): %w", syscall.EINVAL)
	} else {
		r, err = s.commitOnce(of, m)
	}
	var wr *wire.WriteReply
	if r != nil {
		wr = &wire.WriteReply{Attr: r.Attr}
	}
	s.drc.finish(e, wr, err)
	return r, err
}

// checkCommit checks that the operations account for the data exactly.
func checkCommit(m *wire.Commit) error {
	var n uint64
	for _, op := range m.Ops {
		if op.Attr == nil {
			n += uint64(op.Len)
		}
	}
	if n != uint64(len(m.Data)) {
		return fmt.Errorf("commit: its writes add up to %d bytes but it carries %d: %w", n, len(m.Data), syscall.EINVAL)
	}
	return nil
}

// commitOnce applies the operations of m in order, stopping at the first
// that fails; written data bumps the file's version even then.
func (s *Server) commitOnce(of *openFile, m *wire.Commit) (*wire.AttrReply, error) {
	data, wrote := m.Data, false
	var opErr error
	for _, op := range m.Ops {
		if op.Attr == nil {
			if opErr = pwriteAll(of.f, data[:op.Len], int64(op.Offset)); opErr != nil {
				if errors.Is(opErr, syscall.ENOSPC) {
					s.log.Warn("export disk is full", "err", opErr)
				}
				break
			}
			data, wrote = data[op.Len:], wrote || op.Len > 0
			continue
		}
		if opErr = fsetAttr(of.f, op.Attr); opErr != nil {
			break
		}
	}
	var fi os.FileInfo
	var err error
	if wrote {
		fi, err = s.changed(of.f)
	} else {
		fi, err = of.f.Stat()
	}
	if opErr != nil {
		return nil, opErr
	}
	if err != nil {
		return nil, err
	}
	return s.fattr(of.f, fi), nil
}

// fsetAttr applies an attribute change (no size) through an open file.
func fsetAttr(f *os.File, m *wire.SetAttr) error {
	fd := int(f.Fd())
	wrap := func(op string, err error) error {
		if err == nil {
			return nil
		}
		return &os.PathError{Op: op, Path: f.Name(), Err: err}
	}
	if m.Valid&wire.SetSize != 0 {
		return fmt.Errorf("commit: a truncation is never held: %w", syscall.EINVAL)
	}
	if m.Valid&wire.SetMode != 0 {
		if err := wrap("chmod", unix.Fchmod(fd, m.Mode&0o7777)); err != nil {
			return err
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
		if err := wrap("chown", unix.Fchown(fd, uid, gid)); err != nil {
			return err
		}
	}
	if m.Valid&(wire.SetAtime|wire.SetMtime|wire.SetAtimeNow|wire.SetMtimeNow) != 0 {
		return wrap("utimes", futimens(fd, utimes(m)))
	}
	return nil
}

// utimes is the utimensat(2) argument of a setattr of times: UTIME_OMIT
// for the time not being set, UTIME_NOW (not the server's clock read here)
// so that setting both to now needs only write access.
func utimes(m *wire.SetAttr) [2]unix.Timespec {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	switch {
	case m.Valid&wire.SetAtimeNow != 0:
		ts[0] = unix.Timespec{Nsec: unix.UTIME_NOW}
	case m.Valid&wire.SetAtime != 0:
		ts[0] = unix.NsecToTimespec(m.Atime)
	}
	switch {
	case m.Valid&wire.SetMtimeNow != 0:
		ts[1] = unix.Timespec{Nsec: unix.UTIME_NOW}
	case m.Valid&wire.SetMtime != 0:
		ts[1] = unix.NsecToTimespec(m.Mtime)
	}
	return ts
}

// futimens is utimensat(fd, NULL, ts, 0): the times of the open file
// itself (x/sys/unix has no call with a NULL path).
func futimens(fd int, ts [2]unix.Timespec) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
