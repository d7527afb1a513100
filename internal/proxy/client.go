package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
	"github.com/coopfs/coopfs/internal/writeback"
)

// client is one client connection and the upstream connection opened for
// it; each lives exactly as long as the other.
type client struct {
	p    *Proxy
	name string
	id   uint32 // the upstream's client id of up (the client was welcomed with it)
	up   *wire.Conn
	down atomic.Pointer[wire.Conn] // set once the handshake is over

	mu      sync.Mutex
	handles map[uint64]handle // upstream handles this client opened
	opens   uint64            // counts the opens, for handle.seq
}

// handle is what the proxy knows of an open handle: the file, whether it
// was opened for reading (a cached block is served only through one), and
// for write-back the path, the opener's identity and the attributes at open.
type handle struct {
	ino       uint64
	readable  bool
	writable  bool
	appending bool
	path      string
	links     []string // the file's other names made through this proxy since the open (never changed in place)
	caller    vfs.Caller
	hasAs     bool
	attr      wire.Attr
	seq       uint64 // the client's count of opens at this one: its latest handle of a file names the path
}

// maxInFlightBytes bounds the request bytes one client has being relayed
// at once (as the server's default): past it the proxy stops reading from
// that client.
const maxInFlightBytes = 64 << 20

// maxHandles bounds the handles tracked per client; past it one is
// forgotten at random (its reads go upstream, which still knows it).
const maxHandles = 1 << 16

// serveClient runs one client connection: the handshake (during which the
// upstream connection is opened), then the relay until either side closes.
func (p *Proxy) serveClient(ctx context.Context, nc net.Conn, authenticated func()) {
	cl := &client{p: p, handles: make(map[uint64]handle)}
	reply := wire.HelloReply{BlockSize: uint32(p.blockSize), Policy: "none", BootID: p.upBoot}
	hs, err := wire.ServerHandshake(nc, p.cfg.Security, reply, func(hs *wire.Handshake) (wire.Welcome, error) {
		return cl.connectUpstream(ctx, hs.Hello)
	})
	authenticated()
	if err != nil {
		name := ""
		if hs != nil && hs.Hello != nil {
			name = hs.Hello.Name
		}
		p.log.Warn("rejected a client", "remote", nc.RemoteAddr().String(), "name", name, "err", err)
		nc.Close()
		if cl.up != nil {
			cl.up.Close()
		}
		return
	}
	cl.name, cl.id = hs.Hello.Name, hs.Welcome.ClientID
	down := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{
		Handler:          wire.HandlerFunc(cl.serveDown),
		MaxInFlightBytes: maxInFlightBytes,
		Observer:         obs.WireObserver{M: p.metrics, Kind: obs.KindClient},
		Name:             fmt.Sprintf("client %d (%s, %s)", hs.Welcome.ClientID, cl.name, nc.RemoteAddr()),
	})
	cl.down.Store(down)
	if !p.add(cl) {
		cl.close()
		return
	}
	p.log.Info("client connected", "client", hs.Welcome.ClientID, "name", cl.name, "remote", nc.RemoteAddr().String(), "certificate", hs.PeerCert)
	var why error
	select {
	case <-down.Done():
		why = down.Err()
	case <-cl.up.Done():
		why = cl.up.Err()
	}
	p.drop(cl)
	p.remove(cl)
	p.log.Info("client disconnected", "client", hs.Welcome.ClientID, "name", cl.name, "reason", why)
}

// connectUpstream opens the client's upstream connection, in the client's
// name, with its boot id and the session it resumes (the server's reply
// cache of writes is keyed by the session), and returns the welcome the
// client gets: the upstream's client id and session. An unreachable upstream fails the handshake with EHOSTUNREACH, which
// the client's agent retries within its reconnect timeout.
func (cl *client) connectUpstream(ctx context.Context, h *wire.Hello) (wire.Welcome, error) {
	p := cl.p
	if h.Role != wire.RoleClient {
		return wire.Welcome{}, fmt.Errorf("a proxy serves clients only (role %d): %w", h.Role, syscall.EPROTO)
	}
	hello := wire.Hello{Role: wire.RoleClient, Name: h.Name + " via " + p.cfg.Name, BootID: h.BootID, Session: h.Session}
	dctx, cancel := context.WithTimeout(ctx, wire.HandshakeTimeout)
	defer cancel()
	hs, up, err := p.dial(dctx, hello, wire.HandlerFunc(cl.serveUp))
	if err != nil {
		return wire.Welcome{}, fmt.Errorf("%w: %s: %v: %w", ErrUpstreamUnreachable, p.cfg.Upstream, err, syscall.EHOSTUNREACH)
	}
	if int(hs.Reply.BlockSize) != p.blockSize {
		up.Close()
		return wire.Welcome{}, fmt.Errorf("upstream %s now has block size %d, not %d: restart the proxy: %w",
			p.cfg.Upstream, hs.Reply.BlockSize, p.blockSize, syscall.EIO)
	}
	cl.up = up
	return *hs.Welcome, nil
}

// close drops both connections.
func (cl *client) close() {
	if d := cl.down.Load(); d != nil {
		d.Close()
	}
	if cl.up != nil {
		cl.up.Close()
	}
}

// serveUp answers what the upstream sends on its own: pings here, forwards
// refused (the proxy has no peer listener), anything else (callbacks)
// relayed to the client.
func (cl *client) serveUp(ctx context.Context, _ *wire.Conn, m wire.Msg) (wire.Msg, error) {
	switch m.(type) {
	case *wire.Ping:
		return &wire.OK{}, nil
	case *wire.Forward:
		return nil, fmt.Errorf("a proxy holds no forwarded blocks: %w", syscall.EPROTO)
	}
	down := cl.down.Load()
	if down == nil {
		return nil, fmt.Errorf("%v: the client is still connecting: %w", m.Type(), syscall.EAGAIN)
	}
	if wire.OneWay(ctx) {
		return nil, down.Send(m)
	}
	// Under write-back the clients' write delegations are held by the
	// proxy (deleg.go): no recall comes this way.
	return relayReply(down.Call(ctx, m))
}

// relayReply turns a relayed call's outcome into the reply to pass on: an
// error reply travels unchanged (same errno and message); a broken
// connection becomes EIO.
func relayReply(r wire.Msg, err error) (wire.Msg, error) {
	if err == nil {
		return r, nil
	}
	var re *wire.RemoteError
	if errors.As(err, &re) {
		return &wire.Error{Errno: uint32(re.Errno), Msg: re.Msg}, nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("no reply in time: %w", syscall.ETIMEDOUT)
	}
	return nil, fmt.Errorf("%v: %w", err, syscall.EIO)
}

// serveDown serves one request of the client: reads from the cache, writes
// under the write policy, everything else relayed upstream.
func (cl *client) serveDown(ctx context.Context, _ *wire.Conn, m wire.Msg) (wire.Msg, error) {
	inner := m
	if as, ok := m.(*wire.As); ok && as.Msg != nil {
		inner = as.Msg
	}
	if cl.p.cfg.WritePolicy == cache.ReadOnly && wire.Mutates(inner) {
		return nil, fmt.Errorf("%v: the proxy is read-only (--write-policy read-only): %w", inner.Type(), syscall.EROFS)
	}
	if wire.OneWay(ctx) {
		cl.sentOneWay(inner)
		return nil, cl.up.Send(m)
	}
	switch r := inner.(type) {
	case *wire.ReadBlock:
		return cl.readBlock(ctx, m, r)
	case *wire.ParentAttrs:
		// Its replies would hide the opens the proxy follows (observe),
		// and a client that has it answered sends Commits, which a
		// write-back proxy could not take (writeback_relay.go).
		return nil, fmt.Errorf("the proxy does not relay ParentAttrs: %w", syscall.ENOSYS)
	case *wire.Release:
		cl.forget(r.Handle)
	case *wire.Commit:
		if cl.p.wb != nil {
			// Under write-back the proxy takes writes itself (writeback_relay.go):
			// the client sends its held writes one by one then.
			return nil, fmt.Errorf("a write-back proxy takes writes one by one, not as Commit: %w", syscall.ENOSYS)
		}
	}
	if w := cl.p.wb; w != nil {
		if rep, done, err := w.d.serve(ctx, cl, m); done {
			return rep, err
		}
		if rep, done, err := cl.writeBack(ctx, w, inner); done {
			return rep, err
		}
		if _, ok := inner.(*wire.Rename); ok {
			// The dirty files follow it (afterChange) before a write-back
			// that finds the old name gone takes the file for removed.
			defer w.e.RenameLock()()
		}
	}
	mark := cl.p.wb.mark() // writeback.go: replies from the middle of a write-back
	rep, err := cl.call(ctx, m)
	if err != nil {
		return relayReply(rep, err)
	}
	cl.observe(ctx, m, inner, rep, mark)
	return rep, nil
}

// call relays m upstream with the request timeout (a blocking lock waits
// as long as the upstream lets it).
func (cl *client) call(ctx context.Context, m wire.Msg) (wire.Msg, error) {
	inner := m
	if as, ok := m.(*wire.As); ok && as.Msg != nil {
		inner = as.Msg
	}
	timeout := cl.p.cfg.RequestTimeout
	if _, blocking := inner.(*wire.LockSet); blocking {
		timeout = 0
	}
	return cl.up.CallTimeout(ctx, m, timeout)
}

// sentOneWay notes what a one-way message changes: released handles.
func (cl *client) sentOneWay(m wire.Msg) {
	if rb, ok := m.(*wire.ReleaseBatch); ok {
		for _, h := range rb.Handles {
			cl.forget(h)
		}
	}
}

// observe learns from a relayed reply: the handles opened, the versions
// and sizes of files, and (write-through) the blocks written. Under
// write-back, the attributes of a file dirty here are overlaid, and those
// the upstream gave while it wrote the file back are asked for again
// (writeback.go, settle).
func (cl *client) observe(ctx context.Context, orig, req, rep wire.Msg, mark uint64) {
	c, wb := cl.p.cache, cl.p.wb
	switch r := rep.(type) {
	case *wire.OpenReply:
		c.noteAttr(&r.Attr)
		wb.settle(ctx, cl, orig, req, r.Handle, &r.Attr, mark)
		cl.opened(orig, req, r)
	case *wire.AttrReply:
		c.noteAttr(&r.Attr)
		wb.settle(ctx, cl, orig, req, 0, &r.Attr, mark)
		if cl.p.cfg.WritePolicy == cache.WriteThrough {
			cl.keepWritten(req, &r.Attr, 0)
		}
	case *wire.WriteReply:
		c.noteAttr(&r.Attr)
		wb.settle(ctx, cl, orig, req, 0, &r.Attr, mark)
		if cl.p.cfg.WritePolicy == cache.WriteThrough {
			cl.keepWritten(req, &r.Attr, r.Prev)
		}
	case *wire.ReadDirPlusReply:
		for i := range r.Entries {
			if e := &r.Entries[i]; e.HasAttr {
				c.noteAttr(&e.Attr)
				if !wb.overlaySince(&e.Attr, mark) {
					e.HasAttr, e.Attr = false, wire.Attr{} // from the middle of a write-back here
				}
			}
		}
	}
	if wb != nil {
		cl.afterChange(wb, req)
	}
}

// opened records a handle the upstream granted this client.
func (cl *client) opened(orig, req wire.Msg, r *wire.OpenReply) {
	var flags uint32
	var path string
	switch m := req.(type) {
	case *wire.Open:
		flags, path = m.Flags, m.Path
	case *wire.Create:
		flags, path = m.Flags, m.Path
	case *wire.OpenPinned:
		flags, path = m.Flags, m.Path
	default:
		return
	}
	caller, hasAs := callerOf(orig)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(cl.handles) >= maxHandles {
		for h := range cl.handles {
			delete(cl.handles, h)
			break
		}
	}
	acc := flags & syscall.O_ACCMODE
	cl.opens++
	cl.handles[r.Handle] = handle{ino: r.Attr.Ino, readable: acc != syscall.O_WRONLY, writable: acc != syscall.O_RDONLY,
		appending: flags&syscall.O_APPEND != 0, path: path, caller: caller, hasAs: hasAs, attr: r.Attr, seq: cl.opens}
}

// handleInfo returns what the proxy knows of handle h.
func (cl *client) handleInfo(h uint64) (handle, bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	hd, ok := cl.handles[h]
	return hd, ok
}

// renamedHandles moves this client's handles at or under oldPath.
func (cl *client) renamedHandles(oldPath, newPath string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for h, hd := range cl.handles {
		p, ok := writeback.Moved(hd.path, oldPath, newPath)
		links := make([]string, len(hd.links))
		for i, l := range hd.links {
			var moved bool
			if links[i], moved = writeback.Moved(l, oldPath, newPath); moved {
				ok = true
			}
		}
		if ok {
			hd.path, hd.links = p, links
			cl.handles[h] = hd
		}
	}
}

// linkedHandles notes that newPath was made a link to oldPath: one more
// name the handles of the file may go by once oldPath is removed.
func (cl *client) linkedHandles(oldPath, newPath string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for h, hd := range cl.handles {
		if hd.path == oldPath || slices.Contains(hd.links, oldPath) {
			hd.links = append(slices.Clone(hd.links), newPath)
			cl.handles[h] = hd
		}
	}
}

// unlinkedHandles notes that path was removed: the handles that named
// their file by it take another of its names, if they know one.
func (cl *client) unlinkedHandles(path string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for h, hd := range cl.handles {
		i := slices.Index(hd.links, path)
		switch {
		case i >= 0:
			hd.links = slices.Delete(slices.Clone(hd.links), i, i+1)
		case hd.path == path && len(hd.links) > 0:
			hd.path, hd.links = hd.links[0], slices.Clone(hd.links[1:])
		default:
			continue
		}
		cl.handles[h] = hd
	}
}

func (cl *client) forget(h uint64) {
	cl.mu.Lock()
	delete(cl.handles, h)
	cl.mu.Unlock()
}

// handleOf returns the latest handle this client opened on file ino (an
// older one may be of a removed file whose number was reused).
func (cl *client) handleOf(ino uint64) (handle, bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var last handle
	ok := false
	for _, hd := range cl.handles {
		if hd.ino == ino && (!ok || hd.seq > last.seq) {
			last, ok = hd, true
		}
	}
	return last, ok
}

// mayRead reports whether the client holds handle h open for reading file ino.
func (cl *client) mayRead(h, ino uint64) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	hd, ok := cl.handles[h]
	return ok && hd.ino == ino && hd.readable
}
