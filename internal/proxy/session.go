package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// ownSession is the proxy's own upstream connection, for write-back: in
// the proxy's name, registered for callbacks so that it can hold write
// delegations, redialed when it breaks (the dirty files are then declared
// again). What the upstream sends on it: pings, and breaks — a recall
// (kind write) is answered once the files named are written back.
type ownSession struct {
	w    *writeBack
	boot uint64 // the upstream's reply cache of WriteSeq is keyed by it

	mu     sync.Mutex
	conn   *wire.Conn
	gen    uint64
	closed bool
}

var errSessionClosed = errors.New("the proxy is closing")

// current returns the live connection, dialing one if needed.
func (s *ownSession) current(ctx context.Context) (*wire.Conn, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, errSessionClosed
	}
	if s.conn != nil && s.conn.Err() == nil {
		return s.conn, s.gen, nil
	}
	p := s.w.p
	dctx, cancel := context.WithTimeout(ctx, wire.HandshakeTimeout)
	defer cancel()
	hello := wire.Hello{Role: wire.RoleClient, Name: p.cfg.Name, BootID: s.boot}
	_, c, err := p.dial(dctx, hello, wire.HandlerFunc(s.serve))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v: %w", ErrUpstreamUnreachable, p.cfg.Upstream, err, syscall.EIO)
	}
	if _, err := c.CallTimeout(ctx, &wire.CallbackRegister{}, p.cfg.RequestTimeout); err != nil {
		s.w.noDeleg.Do(func() {
			p.log.Warn("write-back: the upstream grants no callbacks, so no write delegations: other clients see the proxy's writes only after they are written back", "err", err)
		})
	}
	s.conn, s.gen = c, s.gen+1
	go s.w.redeclare()
	return c, s.gen, nil
}

// call sends m on the live connection.
func (s *ownSession) call(ctx context.Context, m wire.Msg) (wire.Msg, uint64, error) {
	c, gen, err := s.current(ctx)
	if err != nil {
		return nil, 0, err
	}
	r, err := c.CallTimeout(ctx, m, s.w.p.cfg.RequestTimeout)
	return r, gen, err
}

// serve answers the upstream: pings, and breaks (recalls after the files
// are written back).
func (s *ownSession) serve(ctx context.Context, _ *wire.Conn, m wire.Msg) (wire.Msg, error) {
	switch m := m.(type) {
	case *wire.Ping:
		return &wire.OK{}, nil
	case *wire.CallbackBreak:
		if m.Kind == wire.CallbackWrite {
			s.w.recall(ctx, m)
		}
		return &wire.OK{}, nil
	}
	return nil, fmt.Errorf("%v: not served on the proxy's own connection: %w", m.Type(), syscall.EPROTO)
}

// close drops the connection for good.
func (s *ownSession) close() {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// as wraps m in the identity of a dirty file's writer.
func as(df *dirtyFile, m wire.Msg) wire.Msg {
	if !df.hasAs {
		return m
	}
	return &wire.As{UID: df.caller.UID, GID: df.caller.GID, Groups: df.caller.Groups, Msg: m}
}

// openFile opens df's path on the own connection with flags, as its writer.
func (s *ownSession) openFile(ctx context.Context, df *dirtyFile, path string, flags uint32) (*wire.OpenReply, uint64, error) {
	r, gen, err := s.call(ctx, as(df, &wire.Open{Path: path, Flags: flags}))
	if err != nil {
		return nil, 0, err
	}
	or, ok := r.(*wire.OpenReply)
	if !ok {
		return nil, 0, fmt.Errorf("open: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	return or, gen, nil
}

// release closes a handle of the own connection, if it still lives.
func (s *ownSession) release(h, gen uint64) {
	s.mu.Lock()
	c, cur := s.conn, s.gen
	s.mu.Unlock()
	if c != nil && cur == gen {
		c.Send(&wire.ReleaseBatch{Handles: []uint64{h}})
	}
}

// readBlock reads block idx of df through a read-only open of its own.
func (s *ownSession) readBlock(ctx context.Context, df *dirtyFile, idx uint64) (wire.Msg, error) {
	s.w.mu.Lock()
	path := df.path
	s.w.mu.Unlock()
	or, gen, err := s.openFile(ctx, df, path, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer s.release(or.Handle, gen)
	if or.Attr.Ino != df.ino {
		return nil, fmt.Errorf("%s is now another file: %w", path, syscall.ESTALE)
	}
	c, cur, err := s.current(ctx)
	if err != nil || cur != gen {
		return nil, fmt.Errorf("the upstream connection was lost: %w", syscall.EIO)
	}
	return c.CallTimeout(ctx, &wire.ReadBlock{Handle: or.Handle, File: df.ino, Index: idx, Version: or.Attr.Version}, s.w.p.cfg.RequestTimeout)
}

// wbHandle is an upstream handle of the own connection opened for writing
// one file back; reopened after a reconnection.
type wbHandle struct {
	s       *ownSession
	df      *dirtyFile
	path    string
	h, gen  uint64
	open    bool
	timeout time.Duration
}

// errGoneFile: the path no longer names the dirty file upstream.
var errGoneFile = errors.New("the file was removed or replaced upstream")

func (h *wbHandle) get(ctx context.Context) (uint64, uint64, error) {
	_, gen, err := h.s.current(ctx)
	if err != nil {
		return 0, 0, err
	}
	if h.open && h.gen == gen {
		return h.h, gen, nil
	}
	or, gen, err := h.s.openFile(ctx, h.df, h.path, syscall.O_WRONLY)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return 0, 0, fmt.Errorf("%w: %v", errGoneFile, err)
	}
	if err != nil {
		return 0, 0, err
	}
	h.h, h.gen, h.open = or.Handle, gen, true
	if or.Attr.Ino != h.df.ino {
		return 0, 0, fmt.Errorf("%w: %s is now file %d, not %d", errGoneFile, h.path, or.Attr.Ino, h.df.ino)
	}
	return h.h, gen, nil
}

// write sends one block, exactly once (WriteSeq), and returns the
// attributes after it.
func (h *wbHandle) write(ctx context.Context, off int64, data []byte) (wire.Attr, error) {
	seq := h.s.w.seq.Add(1)
	for attempt := 0; ; attempt++ {
		hd, gen, err := h.get(ctx)
		if err != nil {
			return wire.Attr{}, err
		}
		r, callGen, err := h.s.call(ctx, &wire.WriteSeq{Seq: seq, Handle: hd, Offset: uint64(off), Data: data})
		if callGen != gen && attempt < 2 {
			continue // the handle died with the old connection
		}
		if err != nil {
			return wire.Attr{}, err
		}
		ar, ok := r.(*wire.AttrReply)
		if !ok {
			return wire.Attr{}, fmt.Errorf("write: unexpected reply %v: %w", r.Type(), syscall.EIO)
		}
		return ar.Attr, nil
	}
}

func (h *wbHandle) release() {
	if h.open {
		h.s.release(h.h, h.gen)
	}
}

// callerOf returns the identity an As carries, if any.
func callerOf(m wire.Msg) (vfs.Caller, bool) {
	as, ok := m.(*wire.As)
	if !ok {
		return vfs.Caller{}, false
	}
	return vfs.Caller{UID: as.UID, GID: as.GID, Groups: as.Groups}, true
}
