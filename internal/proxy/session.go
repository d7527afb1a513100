package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
	"github.com/coopfs/coopfs/internal/writeback"
)

// ownSession is the proxy's own upstream connection, for write-back: in
// the proxy's name, registered for callbacks so that it can hold write
// delegations, redialed when it breaks (the dirty files are then declared
// again). What the upstream sends on it: pings, and breaks — a recall
// (kind write) is answered once the files named are written back, by the
// clients holding them to the proxy, then by the proxy upstream.
type ownSession struct {
	p    *Proxy
	e    *writeback.Engine
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
	p := s.p
	dctx, cancel := context.WithTimeout(ctx, wire.HandshakeTimeout)
	defer cancel()
	hello := wire.Hello{Role: wire.RoleClient, Name: p.cfg.Name, BootID: s.boot}
	_, c, err := p.dial(dctx, hello, wire.HandlerFunc(s.serve))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v: %w", ErrUpstreamUnreachable, p.cfg.Upstream, err, syscall.EIO)
	}
	if _, err := c.CallTimeout(ctx, &wire.CallbackRegister{}, p.cfg.RequestTimeout); err != nil {
		s.e.NoDelegations(err)
	}
	s.conn, s.gen = c, s.gen+1
	s.e.Reconnected()
	return c, s.gen, nil
}

// call sends m on the live connection.
func (s *ownSession) call(ctx context.Context, m wire.Msg) (wire.Msg, uint64, error) {
	c, gen, err := s.current(ctx)
	if err != nil {
		return nil, 0, err
	}
	r, err := c.CallTimeout(ctx, m, s.p.cfg.RequestTimeout)
	return r, gen, err
}

// serve answers the upstream: pings, and breaks (recalls after the files
// are written back).
func (s *ownSession) serve(ctx context.Context, _ *wire.Conn, m wire.Msg) (wire.Msg, error) {
	switch m := m.(type) {
	case *wire.Ping:
		return &wire.OK{}, nil
	case *wire.CallbackBreak:
		s.p.wb.d.recallAll(ctx, m) // the clients holding the files first (deleg.go)
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

// release closes a handle of the own connection, if it still lives.
func (s *ownSession) release(h, gen uint64) {
	s.mu.Lock()
	c, cur := s.conn, s.gen
	s.mu.Unlock()
	if c != nil && cur == gen {
		c.Send(&wire.ReleaseBatch{Handles: []uint64{h}})
	}
}

// readBlock reads block b through a read-only open of its own, as the
// file's writer.
func (s *ownSession) readBlock(ctx context.Context, b writeback.BlockRef) (wire.Msg, error) {
	var open wire.Msg = &wire.Open{Path: b.Path, Flags: syscall.O_RDONLY}
	if b.HasCaller {
		open = &wire.As{UID: b.Caller.UID, GID: b.Caller.GID, Groups: b.Caller.Groups, Msg: open}
	}
	r, gen, err := s.call(ctx, open)
	if err != nil {
		return nil, err
	}
	or, ok := r.(*wire.OpenReply)
	if !ok {
		return nil, fmt.Errorf("open: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	defer s.release(or.Handle, gen)
	if or.Attr.Ino != b.Ino {
		return nil, fmt.Errorf("%s is now another file: %w", b.Path, syscall.ESTALE)
	}
	c, cur, err := s.current(ctx)
	if err != nil || cur != gen {
		return nil, fmt.Errorf("the upstream connection was lost: %w", syscall.EIO)
	}
	return c.CallTimeout(ctx, &wire.ReadBlock{Handle: or.Handle, File: b.Ino, Index: b.Index, Version: or.Attr.Version}, s.p.cfg.RequestTimeout)
}

// callerOf returns the identity an As carries, if any.
func callerOf(m wire.Msg) (vfs.Caller, bool) {
	as, ok := m.(*wire.As)
	if !ok {
		return vfs.Caller{}, false
	}
	return vfs.Caller{UID: as.UID, GID: as.GID, Groups: as.Groups}, true
}
