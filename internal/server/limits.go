package server

import (
	"context"
	"fmt"
	"net"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// Limits caps what one client connection may hold, so that no client can
// make the server exit or starve the others (issue 7). Connection-level
// caps (how many connections, per address, before authentication) are the
// listener's business, not these.
type Limits struct {
	// MaxHandles is the open files (handles) one connection may hold;
	// past it Open and Create fail with EMFILE. Default 4096.
	MaxHandles int
	// MaxInFlightBytes bounds the request bytes one connection has being
	// served at once (writes in flight); past it the server stops reading
	// from that connection until some finish. Default 64 MiB.
	MaxInFlightBytes int64
	// HandlerTimeout is the deadline of one request: a request that has
	// not finished by then (a hung export) is answered ETIMEDOUT.
	// Default 60s; it must stay below the clients' request timeout (2m).
	HandlerTimeout time.Duration
	// LockWait is the longest a blocking lock request waits in one
	// request before the server answers EINPROGRESS and the client asks
	// again. Default 5s.
	LockWait time.Duration
	// MaxLockWaiters is the blocked lock requests one connection may have
	// at once; past it F_SETLKW fails with ENOLCK. Default 64.
	MaxLockWaiters int
	// DirCursors is the directories one connection may be in the middle
	// of listing (readdir cursors kept between pages). Default 16.
	DirCursors int
	// ReplyCache is the number of write replies remembered for
	// exactly-once writes (all clients together). Default 8192.
	ReplyCache int
	// MaxFiles bounds the server's per-file tables (versions); the least
	// recently used entries are dropped past it. Default 1<<20.
	MaxFiles int
	// The caps above hold per connection; these hold for all the
	// connections from one address (an IPv6 /64) and for all clients
	// together, so that opening more connections does not multiply them.
	// MaxHandlesPerAddr defaults to 16384, MaxHandlesTotal to 65536,
	// MaxInFlightPerAddr to 256 MiB, MaxInFlightTotal to 1 GiB.
	MaxHandlesPerAddr, MaxHandlesTotal   int
	MaxInFlightPerAddr, MaxInFlightTotal int64
	// MaxLocks is the byte-range locks one connection may hold, and
	// MaxLocksTotal those of all clients; past them F_SETLK fails with
	// ENOLCK. Defaults 4096 and 65536.
	MaxLocks, MaxLocksTotal int
	// IdleTimeout: a client connection silent this long is pinged, and
	// closed when it stays silent as long again (an idle mount answers
	// pings, and stays). Default 60s.
	IdleTimeout time.Duration
}

// DefaultLimits are the limits a zero Limits gets.
var DefaultLimits = Limits{
	MaxHandles:       4096,
	MaxInFlightBytes: 64 << 20,
	HandlerTimeout:   60 * time.Second,
	LockWait:         5 * time.Second,
	MaxLockWaiters:   64,
	DirCursors:       16,
	ReplyCache:       8192,
	MaxFiles:         1 << 20,

	MaxHandlesPerAddr:  16384,
	MaxHandlesTotal:    65536,
	MaxInFlightPerAddr: 256 << 20,
	MaxInFlightTotal:   1 << 30,
	MaxLocks:           4096,
	MaxLocksTotal:      65536,
	IdleTimeout:        60 * time.Second,
}

func (l *Limits) setDefaults() {
	d := DefaultLimits
	setIfZero(&l.MaxHandles, d.MaxHandles)
	setIfZero(&l.MaxInFlightBytes, d.MaxInFlightBytes)
	setIfZero(&l.HandlerTimeout, d.HandlerTimeout)
	setIfZero(&l.LockWait, d.LockWait)
	setIfZero(&l.MaxLockWaiters, d.MaxLockWaiters)
	setIfZero(&l.DirCursors, d.DirCursors)
	setIfZero(&l.ReplyCache, d.ReplyCache)
	setIfZero(&l.MaxFiles, d.MaxFiles)
	setIfZero(&l.MaxHandlesPerAddr, max(d.MaxHandlesPerAddr, l.MaxHandles))
	setIfZero(&l.MaxHandlesTotal, max(d.MaxHandlesTotal, l.MaxHandlesPerAddr))
	setIfZero(&l.MaxInFlightPerAddr, max(d.MaxInFlightPerAddr, l.MaxInFlightBytes))
	setIfZero(&l.MaxInFlightTotal, max(d.MaxInFlightTotal, l.MaxInFlightPerAddr))
	setIfZero(&l.MaxLocks, d.MaxLocks)
	setIfZero(&l.MaxLocksTotal, max(d.MaxLocksTotal, l.MaxLocks))
	setIfZero(&l.IdleTimeout, d.IdleTimeout)
}

func setIfZero[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

func (l *Limits) validate() error {
	switch {
	case l.MaxHandles < 1:
		return fmt.Errorf("max handles per connection %d: want at least 1", l.MaxHandles)
	case l.MaxInFlightBytes < 1<<20:
		return fmt.Errorf("in-flight bytes per connection %d: want at least 1MiB", l.MaxInFlightBytes)
	case l.HandlerTimeout < time.Second:
		return fmt.Errorf("handler timeout %s: want at least 1s", l.HandlerTimeout)
	case l.LockWait <= 0 || l.LockWait >= l.HandlerTimeout:
		return fmt.Errorf("lock wait %s: want more than 0 and less than the handler timeout %s", l.LockWait, l.HandlerTimeout)
	case l.MaxLockWaiters < 1, l.DirCursors < 1, l.ReplyCache < 1, l.MaxFiles < 1:
		return fmt.Errorf("lock waiters %d, directory cursors %d, reply cache %d, files %d: want each at least 1",
			l.MaxLockWaiters, l.DirCursors, l.ReplyCache, l.MaxFiles)
	case l.MaxHandlesPerAddr < l.MaxHandles || l.MaxHandlesTotal < l.MaxHandlesPerAddr:
		return fmt.Errorf("handles %d per connection, %d per address, %d in total: want each at least the one before",
			l.MaxHandles, l.MaxHandlesPerAddr, l.MaxHandlesTotal)
	case l.MaxInFlightPerAddr < l.MaxInFlightBytes || l.MaxInFlightTotal < l.MaxInFlightPerAddr:
		return fmt.Errorf("in-flight bytes %d per connection, %d per address, %d in total: want each at least the one before",
			l.MaxInFlightBytes, l.MaxInFlightPerAddr, l.MaxInFlightTotal)
	case l.MaxLocks < 1 || l.MaxLocksTotal < l.MaxLocks:
		return fmt.Errorf("locks %d per connection, %d in total: want at least 1, and the total at least the per-connection cap", l.MaxLocks, l.MaxLocksTotal)
	case l.IdleTimeout < time.Second:
		return fmt.Errorf("idle timeout %s: want at least 1s", l.IdleTimeout)
	}
	return nil
}

// serveMsg is the wire.Handler of client connections: dispatch with a
// recovered panic and error messages that never name the export's absolute
// path. The deadline of each request is the connection's (HandlerTimeout
// in wire.ConnConfig): it costs a timer, not a goroutine.
func (s *Server) serveMsg(ctx context.Context, c *wire.Conn, m wire.Msg) (r wire.Msg, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("request handler panicked; the request fails, the server goes on",
				"type", m.Type().String(), "panic", p, "stack", string(debug.Stack()))
			r, err = nil, fmt.Errorf("server error serving %v: %w", m.Type(), syscall.EIO)
		}
	}()
	if as, ok := m.(*wire.As); ok {
		if b, ok := as.Msg.(*wire.EntryBatch); ok {
			return s.entryBatch(ctx, c, as, b) // entrybatch.go: each removal as itself
		}
	}
	r, err = s.serveCallbacks(ctx, c, m, func() (wire.Msg, error) { return s.serveAs(ctx, c, m) })
	if err == nil {
		r = s.withParent(c, m, r) // entry.go
	}
	return r, s.scrub(err)
}

// timedOut counts a request answered ETIMEDOUT (the export did not finish
// it in time).
func (s *Server) timedOut(t wire.Type) {
	s.stuck.Add(1)
	s.log.Warn("request exceeded its deadline (is the export hung?)", "type", t.String(),
		"deadline", s.cfg.Limits.HandlerTimeout.String())
}

// scrub keeps the error's errno and removes the export's absolute path
// from its message: clients see paths relative to the export only.
func (s *Server) scrub(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if !strings.Contains(msg, s.exportAbs) {
		return err
	}
	msg = strings.ReplaceAll(msg, s.exportAbs+"/", "")
	msg = strings.ReplaceAll(msg, s.exportAbs, ".")
	return &scrubbed{msg: msg, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// acceptLoop accepts until ln is closed (wire.AcceptLoop: connection
// caps and backoff on failed accepts).
func (s *Server) acceptLoop(ctx context.Context, ln net.Listener) error {
	return wire.AcceptLoop(ctx, ln, s.cfg.Conns, s.log, func(nc net.Conn, admitted func()) {
		if s.isClosed() {
			nc.Close()
			return
		}
		s.handshake(nc, admitted)
	})
}

// inline picks the requests a client connection serves on its read loop
// (wire.ConnConfig.Inline): metadata requests that do a few system calls
// on the export. Data transfers, fsync and locks (which may wait for
// another client) keep a goroutine of their own, so that they run
// concurrently.
func inline(m wire.Msg) bool { return quick(m) || inlineMayWait(m) }

// quick picks the inline requests that wait for the export only
// (wire.ConnConfig.InlineQuick): the read loop goes on without one only
// after the watchdog's slow tick, which a stream of them keeps running
// instead of arming a 1 ms timer after every quiet millisecond. One that
// turns out to wait for another client after all — a lookup, getattr or
// listing of a path in another client's delegated directory, which is
// recalled first, or a grant that raced and is answered by a break the
// caller must ack — hands the reading over before it waits (wire.HandOver
// in recallDirs, callbacks.grant and Break), so that it holds up nothing.
func quick(m wire.Msg) bool {
	switch unwrapAs(m).(type) {
	case *wire.Ping, *wire.Lookup, *wire.LookupPinned, *wire.GetAttr, *wire.Readlink,
		*wire.StatFsReq, *wire.ReadDirPlus, *wire.ReadDir, *wire.Release, *wire.ReleaseBatch,
		*wire.GetXattr, *wire.ListXattr, *wire.DirReturn:
		return true
	}
	return false
}

// inlineMayWait picks the inline requests that may wait for other
// clients — a change breaks their callbacks and waits for the
// acknowledgements, an open or a create may recall a write delegation, an
// open under hints asks the last opener for its hints: the read loop goes
// on without one after wire.InlineStall.
//
// An OpenRead may recall a write delegation as an Open does; a DirDelegate
// breaks the other clients' callbacks on the directory's entries; an
// EntryBatch's removals break callbacks as Unlink and Rmdir do.
func inlineMayWait(m wire.Msg) bool {
	switch unwrapAs(m).(type) {
	case *wire.Create, *wire.Mkdir, *wire.Unlink, *wire.Rmdir, *wire.SetAttr, *wire.Symlink,
		*wire.Link, *wire.Rename, *wire.Open, *wire.OpenPinned, *wire.OpenRead,
		*wire.DirDelegate, *wire.EntryBatch:
		return true
	}
	return false
}

// unwrapAs is the request an As wrapper carries, or m itself.
func unwrapAs(m wire.Msg) wire.Msg {
	if as, ok := m.(*wire.As); ok {
		return as.Msg
	}
	return m
}
