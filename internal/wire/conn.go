package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Handler serves the requests that arrive on a connection. It returns the
// reply (ignored for one-way messages) or an error, which becomes an Error
// reply carrying its errno. ServeMsg runs on its own goroutine, so it may
// block; the number running at once per connection is bounded.
type Handler interface {
	ServeMsg(ctx context.Context, c *Conn, m Msg) (Msg, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *Conn, m Msg) (Msg, error)

// ServeMsg calls f.
func (f HandlerFunc) ServeMsg(ctx context.Context, c *Conn, m Msg) (Msg, error) {
	return f(ctx, c, m)
}

// oneWayKey marks the context of a one-way request's handler.
type oneWayKey struct{}

// OneWay reports whether the request a handler serves was sent one-way
// (Send): its reply is dropped. A relay (coopfs proxy) passes such a
// request on with Send rather than waiting for a reply that never comes.
func OneWay(ctx context.Context) bool {
	v, _ := ctx.Value(oneWayKey{}).(bool)
	return v
}

// Observer sees every message for metrics. dir is "in" or "out"; n counts
// header, metadata and data bytes.
type Observer interface {
	Message(dir string, t Type, n int)
}

// ConnConfig configures a multiplexed connection.
type ConnConfig struct {
	Limits      Limits
	Handler     Handler  // nil: requests are answered with ENOSYS
	Observer    Observer // nil: none
	MaxInFlight int      // concurrent handler goroutines; default 256
	// MaxInFlightBytes bounds the request bytes (metadata and data) whose
	// handlers are still running; the read loop stops reading, which pushes
	// back through TCP, until they finish. 0: no bound beyond MaxInFlight.
	MaxInFlightBytes int64
	// HandlerTimeout, when set, is the deadline of one request: if the
	// handler has not returned by then, the request is answered ETIMEDOUT
	// at once (its late reply is dropped; its
	// in-flight slot stays taken until it returns). OnTimeout, if set, is
	// called for each such request.
	HandlerTimeout time.Duration
	OnTimeout      func(t Type)
	// Inline, when set, picks the requests (without a data section) that
	// are served on the connection's read loop itself instead of a
	// goroutine of their own: cheap ones, such as a lookup, whose reply
	// then goes out with no goroutine hand-off. An inline request that
	// holds up the read loop too long hands it over to a fresh goroutine
	// (watchdog.go), so a slow one delays the requests behind it by at most
	// that long and can never stop the connection from reading: after
	// InlineStall, or, for a request InlineQuick picks (one that waits for
	// nothing but the export, never for another client), after the
	// watchdog's slow tick; at most twice that.
	Inline      func(m Msg) bool
	InlineQuick func(m Msg) bool // nil: none
	Name        string           // the peer, for errors and logs
	// Value, when not nil, is stored in Conn.Value before the connection
	// reads its first request, so that no handler can see it unset.
	Value any
	// InFlightPools are budgets shared with other connections (all of one
	// address's, all of the process's) that a request's bytes are taken
	// from as well as MaxInFlightBytes; each must hold at least
	// MaxInFlightBytes. Without MaxInFlightBytes they are not used.
	InFlightPools []*semaphore.Weighted
	// IdleTimeout, when set, bounds the silence of the other end: with no
	// frame for that long the connection pings it (an idle client answers,
	// so a long-lived idle mount stays), and with still none for as long
	// again it closes. A frame once begun must be complete within twice
	// IdleTimeout.
	IdleTimeout time.Duration
	// PeerKey is the identity key the other end proved in the handshake
	// (Handshake.PeerKey): the client a capability must name.
	PeerKey []byte
}

// inlineMode is how a request is served (ConnConfig.Inline).
type inlineMode uint8

const (
	notInline     inlineMode = iota // on a goroutine of its own
	inlineQuick                     // on the read loop: it waits for nothing but the export
	inlineMayWait                   // on the read loop, but it may wait for other clients
)

// mode is how m is served.
func (cfg *ConnConfig) mode(m Msg) inlineMode {
	switch {
	case cfg.Inline == nil || !cfg.Inline(m):
		return notInline
	case cfg.InlineQuick != nil && cfg.InlineQuick(m):
		return inlineQuick
	}
	return inlineMayWait
}

// InlineStall is how long an inline request that may wait for other
// clients may hold up the read loop before another goroutine takes over
// the reading (watchdog.go: between once and twice this).
const InlineStall = time.Millisecond

// Conn is a multiplexed, bidirectional connection: either end may send
// requests, and replies are matched by id.
type Conn struct {
	nc  net.Conn
	br  *bufio.Reader
	cfg ConnConfig
	sem chan struct{}
	mem *semaphore.Weighted // MaxInFlightBytes; nil without a bound

	// The writer (writer.go).
	wmu          sync.Mutex
	writing      bool        // a goroutine holds the writer role
	prioQ, bulkQ []*frameReq // queued frames without / with data
	kick         chan struct{}
	// Owned by the goroutine in the writer role:
	wbufs, wpending net.Buffers
	deadlineSet     time.Time

	wd *watchdog // timeouts and stalls (watchdog.go)

	nextID  atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]*call
	err     error // why the connection closed; set once
	closed  atomic.Bool
	done    chan struct{}

	crc     bool            // data sections carry a CRC32C (plaintext); not over TLS
	batcher *bufferedConn   // under TLS: gathers a frame's records into few writes
	ctx     context.Context // canceled when the connection closes
	cancel  context.CancelFunc
	Value   atomic.Value // the owner's per-connection state (e.g. the client id)
}

// RemoteIP is the address the other end is counted by (ConnLimits): its
// IPv4 address, or the /64 of its IPv6 one.
func (c *Conn) RemoteIP() string { return remoteIP(c.nc) }

// RemoteIP is the address nc's other end is counted by (Conn.RemoteIP).
func RemoteIP(nc net.Conn) string { return remoteIP(nc) }

// PeerKey is the identity key the other end proved in the handshake, nil if
// it showed none.
func (c *Conn) PeerKey() []byte { return c.cfg.PeerKey }

// NewConn starts the read loop of a connection whose handshake is done. br
// must be the reader the handshake used (it may hold buffered bytes).
func NewConn(nc net.Conn, br *bufio.Reader, cfg ConnConfig) *Conn {
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 256
	}
	if cfg.Name == "" {
		cfg.Name = nc.RemoteAddr().String()
	}
	c := &Conn{nc: nc, br: br, cfg: cfg, sem: make(chan struct{}, cfg.MaxInFlight),
		pending: make(map[uint64]*call), done: make(chan struct{}),
		kick: make(chan struct{}, 1)}
	if cfg.MaxInFlightBytes > 0 {
		c.mem = semaphore.NewWeighted(cfg.MaxInFlightBytes)
	}
	tc, isTLS := nc.(*tls.Conn)
	c.crc = !isTLS
	if isTLS {
		c.batcher, _ = tc.NetConn().(*bufferedConn)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wd = newWatchdog(c)
	if cfg.Value != nil {
		c.Value.Store(cfg.Value)
	}
	limitUnsent(nc)
	go c.readLoop()
	go c.writeLoop()
	return c
}

// Name is the peer's name given at creation.
func (c *Conn) Name() string { return c.cfg.Name }

// Done is closed when the connection has closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection closed (nil while open).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; pending calls fail with ErrClosed.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	return nil
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = &ConnError{Peer: c.cfg.Name, Err: err}
	c.closed.Store(true)
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.cancel()
	c.wd.stop()
	c.nc.Close()
	close(c.done)
	for _, cl := range pending {
		close(cl.ch)
	}
}

// call is a request waiting for its reply.
type call struct {
	// ch gets the reply, or nil when the call's timeout passed; it is
	// closed when the connection fails. Exactly one of these happens, by
	// whoever removes the call from Conn.pending.
	ch      chan Msg
	timeout time.Duration // 0: none
	seenAt  time.Time     // the watchdog's first look (under Conn.mu)
}

// expireCalls fails the calls whose timeout has passed (the watchdog's
// tick; see there for the accuracy).
func (c *Conn) expireCalls(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, cl := range c.pending {
		switch {
		case cl.timeout <= 0:
		case cl.seenAt.IsZero():
			cl.seenAt = now
		case now.Sub(cl.seenAt) >= cl.timeout:
			delete(c.pending, id)
			cl.ch <- nil
		}
	}
}

// Call sends a request and waits for its reply. A reply of type Error comes
// back as a *RemoteError.
func (c *Conn) Call(ctx context.Context, m Msg) (Msg, error) {
	return c.CallTimeout(ctx, m, 0)
}

// CallTimeout is Call with a bound on the wait for the reply (0: none);
// past it the call fails with an error that wraps
// context.DeadlineExceeded. It is cheaper than a context.WithTimeout
// around Call: a context that is not the standard library's (go-fuse's
// request context) makes WithTimeout start a goroutine per call.
func (c *Conn) CallTimeout(ctx context.Context, m Msg, timeout time.Duration) (Msg, error) {
	id := c.nextID.Add(1)
	cl := &call{ch: make(chan Msg, 1), timeout: timeout}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[id] = cl
	c.mu.Unlock()
	if timeout > 0 {
		c.wd.callTimeout(timeout)
		defer c.wd.callDone()
	}
	if err := c.write(m, 0, id); err != nil {
		c.forget(id)
		return nil, err
	}
	select {
	case r, ok := <-cl.ch:
		switch {
		case !ok:
			return nil, c.Err()
		case r == nil:
			return nil, fmt.Errorf("%v: no reply within %s: %w", m.Type(), timeout, context.DeadlineExceeded)
		}
		if e, isErr := r.(*Error); isErr {
			return nil, &RemoteError{Errno: errnoValue(e.Errno), Msg: e.Msg}
		}
		return r, nil
	case <-ctx.Done():
		c.forget(id)
		return nil, ctx.Err()
	}
}

// Send sends a one-way message.
func (c *Conn) Send(m Msg) error {
	return c.write(m, FlagOneWay, c.nextID.Add(1))
}

func (c *Conn) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Conn) readLoop() {
	hdr := make([]byte, HeaderSize)
	for {
		err := c.awaitFrame()
		var h header
		var m Msg
		if err == nil {
			h, m, err = readFrameCRC(c.br, hdr, c.cfg.Limits, c.crc)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.EOF
			}
			c.fail(err)
			return
		}
		if c.cfg.Observer != nil {
			c.cfg.Observer.Message("in", observed(m), HeaderSize+int(h.metaLen)+int(h.dataLen))
		}
		if h.flags&FlagReply != 0 {
			c.deliver(h.id, m)
			continue
		}
		select {
		case c.sem <- struct{}{}:
		case <-c.done:
			return
		}
		n := c.reserve(h)
		if n < 0 {
			return
		}
		if h.dataLen == 0 {
			if mode := c.cfg.mode(m); mode != notInline {
				if !c.serveInline(h, m, n, mode) {
					return // another goroutine reads now
				}
				continue
			}
		}
		go c.serve(h, m, n)
	}
}

// reserve takes a request's bytes from the in-flight budget, waiting while
// the connection's handlers hold too much. A frame larger than the whole
// budget waits for every other one to finish. It returns the bytes taken, or
// -1 when the connection closed.
func (c *Conn) reserve(h header) int64 {
	if c.mem == nil {
		return 0
	}
	n := min(int64(h.metaLen)+int64(h.dataLen), c.cfg.MaxInFlightBytes)
	if err := c.mem.Acquire(c.ctx, n); err != nil {
		<-c.sem
		return -1
	}
	for i, p := range c.cfg.InFlightPools {
		if err := p.Acquire(c.ctx, n); err != nil {
			for _, q := range c.cfg.InFlightPools[:i] {
				q.Release(n)
			}
			c.mem.Release(n)
			<-c.sem
			return -1
		}
	}
	return n
}

// releaseHeld gives a request's bytes back to every budget they came from.
func (c *Conn) releaseHeld(n int64) {
	for _, p := range c.cfg.InFlightPools {
		p.Release(n)
	}
	c.mem.Release(n)
}

// ErrIdle: the other end sent nothing, not even an answer to a ping.
var ErrIdle = errors.New("the other end went silent")

// awaitFrame waits for the next frame's first byte under IdleTimeout,
// pinging the other end once when it is silent that long, and then gives
// the rest of the frame its own deadline.
func (c *Conn) awaitFrame() error {
	idle := c.cfg.IdleTimeout
	if idle <= 0 {
		return nil
	}
	for pinged := false; ; pinged = true {
		c.nc.SetReadDeadline(time.Now().Add(idle))
		_, err := c.br.Peek(1)
		if err == nil {
			c.nc.SetReadDeadline(time.Now().Add(2 * idle))
			return nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return err
		}
		if pinged {
			return fmt.Errorf("%w: nothing for %s, not even an answer to a ping", ErrIdle, 2*idle)
		}
		go c.CallTimeout(c.ctx, &Ping{}, idle) // its answer is a frame
	}
}

func (c *Conn) deliver(id uint64, m Msg) {
	c.mu.Lock()
	cl := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if cl != nil {
		cl.ch <- m
	}
}

// serveInline serves a request on the read loop and reports whether this
// goroutine is still the reader: if the request holds the reading up too
// long (ConnConfig.Inline), the watchdog starts a fresh read loop and this
// one ends with it.
func (c *Conn) serveInline(h header, m Msg, held int64, mode inlineMode) bool {
	s := c.wd.begin(h, mode)
	c.serveWith(s, m, held)
	return s.state.CompareAndSwap(servingState, doneState)
}

// serve serves a request on a goroutine of its own.
func (c *Conn) serve(h header, m Msg, held int64) {
	c.serveWith(c.wd.begin(h, notInline), m, held)
}

// serveWith runs the handler and sends its reply, unless the watchdog has
// answered the request ETIMEDOUT meanwhile (HandlerTimeout).
func (c *Conn) serveWith(s *served, m Msg, held int64) {
	defer func() {
		c.wd.end(s)
		if held > 0 {
			c.releaseHeld(held)
		}
		<-c.sem
	}()
	h := s.h
	var reply Msg
	var err error
	if c.cfg.Handler == nil {
		err = fmt.Errorf("no handler for %v: %w", h.typ, errNoSys)
	} else {
		var ctx context.Context = s // c.ctx, and the request for HandOver
		if h.flags&FlagOneWay != 0 {
			ctx = context.WithValue(ctx, oneWayKey{}, true)
		}
		reply, err = c.cfg.Handler.ServeMsg(ctx, c, m)
	}
	if h.flags&FlagOneWay != 0 || !s.answered.CompareAndSwap(false, true) {
		return
	}
	if err != nil {
		reply = errorMsg(err)
	} else if reply == nil {
		reply = &OK{}
	}
	c.write(reply, FlagReply, h.id) // a failed write closes the connection
}
