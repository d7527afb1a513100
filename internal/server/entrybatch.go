package server

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// What a delegation's holder answered on its own reaches the server in two
// messages (dirdeleg.go): removals in ordered batches (EntryBatch), each
// served as the Unlink or Rmdir it stands for — with its callback breaks,
// its watch expectations and its identity — stopping at the first that
// fails; and each file it created, with the file's close (CommitNew): the
// reserved unnamed file gets its mode and times, its name (linkat), and the
// held writes and attribute changes, as a Commit applies them.

// entryBatch serves an EntryBatch wrapped in as, exactly once per (client
// session, Seq).
func (s *Server) entryBatch(ctx context.Context, c *wire.Conn, as *wire.As, b *wire.EntryBatch) (wire.Msg, error) {
	return s.once(c, b.Seq, b.Release, func(e *drcEntry) (wire.Msg, error) {
		s.drcHits.Add(1)
		if e.batch == nil {
			return nil, e.err
		}
		return e.batch, nil
	}, func(_ *client, e *drcEntry) (wire.Msg, error) {
		e.batch = s.removeAll(ctx, c, as, b)
		s.drc.finish(e, nil, nil)
		return e.batch, nil
	})
}

// removeAll applies b's removals in order, each as the request it stands
// for, until one fails.
func (s *Server) removeAll(ctx context.Context, c *wire.Conn, as *wire.As, b *wire.EntryBatch) *wire.EntryDone {
	r := &wire.EntryDone{}
	for _, op := range b.Ops {
		var m wire.Msg = &wire.Unlink{Path: op.Path}
		if op.Dir {
			m = &wire.Rmdir{Path: op.Path}
		}
		one := *as
		one.Msg = m
		if _, err := s.serveMsg(ctx, c, &one); err != nil {
			r.Errno, r.Msg = uint32(wire.ErrnoOf(err)), s.scrub(err).Error()
			break
		}
		r.Done++
	}
	return r
}

// commitNew serves CommitNew (as the identity of its As; the umask is
// applied to Mode already), exactly once per (client session, Seq).
func (s *Server) commitNew(c *wire.Conn, m *wire.CommitNew) (wire.Msg, error) {
	cm := m.AsCommit()
	if err := checkCommit(cm); err != nil {
		return nil, err
	}
	return s.once(c, m.Seq, m.Release, func(e *drcEntry) (wire.Msg, error) {
		s.drcHits.Add(1)
		if e.open == nil {
			return nil, e.err
		}
		return e.open, nil
	}, func(cl *client, e *drcEntry) (wire.Msg, error) {
		r, err := s.createReserved(c, cl, m, cm)
		e.open = r
		s.drc.finish(e, nil, err)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
}

// once serves a request of c numbered seq exactly once per (client boot
// id, seq) (drc.go): apply serves it and records its outcome in e; a
// request served (or being served) before gets its recorded outcome
// (outcome, once it is in). The handles release lists (the client's
// queued releases ride on it: files closed before it was sent, never the
// one it goes through) are closed first, whatever its outcome: a file
// removed after its close frees its space before this request's writes,
// as on a local disk, even when its release reached the agent only after
// the removal (FUSE sends RELEASE without waiting for it).
func (s *Server) once(c *wire.Conn, seq uint64, release []uint64, outcome func(e *drcEntry) (wire.Msg, error),
	apply func(cl *client, e *drcEntry) (wire.Msg, error)) (wire.Msg, error) {
	cl, _ := c.Value.Load().(*client)
	if cl == nil {
		return nil, syscall.EPROTO
	}
	for _, h := range release {
		s.release(c, h) // an unknown handle: nothing to close
	}
	e, dup := s.drc.begin(writeID{cl.session, seq})
	if dup {
		<-e.done
		return outcome(e)
	}
	return apply(cl, e)
}

// createReserved names the reserved file of m at m.Path and applies the
// held operations; the file's handle is the client's from then on.
func (s *Server) createReserved(c *wire.Conn, cl *client, m *wire.CommitNew, cm *wire.Commit) (*wire.OpenReply, error) {
	p, err := clean(m.Path)
	if err != nil || p == "." {
		return nil, fmt.Errorf("create %q: %w", m.Path, syscall.EINVAL)
	}
	tf, err := s.ddelegs.takeTmp(cl.id, m.Token, p)
	if err != nil {
		return nil, err
	}
	fd := int(tf.f.Fd())
	now := [2]unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	if err := unix.Fchmod(fd, m.Mode&0o7777); err != nil {
		tf.f.Close()
		return nil, &os.PathError{Op: "chmod", Path: p, Err: err}
	}
	if err := futimens(fd, now); err != nil {
		tf.f.Close()
		return nil, &os.PathError{Op: "utimes", Path: p, Err: err}
	}
	dir, base, err := s.openParent(p)
	if err != nil {
		tf.f.Close()
		return nil, err
	}
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), int(dir.Fd()), base, unix.AT_SYMLINK_FOLLOW)
	dir.Close()
	if err != nil {
		tf.f.Close()
		return nil, &os.PathError{Op: "create", Path: p, Err: err}
	}
	of := s.newOpenFile(tf.f, tf.ino, c, syscall.O_RDWR)
	h := s.handles.add(of, s.cfg.Limits.MaxHandles+maxReserved) // reserved files count against their own bound
	if h == 0 {
		tf.f.Close()
		return nil, fmt.Errorf("create %s: %w", p, syscall.EMFILE)
	}
	ar, err := s.commitOnce(of, cm)
	if err != nil {
		s.release(c, h)
		return nil, err
	}
	if len(cm.Ops) == 0 {
		// No write: still a new file (its version is its first state).
		if fi, err := tf.f.Stat(); err == nil {
			ar = s.fattr(tf.f, fi)
		}
	}
	return &wire.OpenReply{Handle: h, Attr: ar.Attr}, nil
}
