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
	"syscall"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sys/unix"
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
	Name           string // the peer, for errors and logs
}

// Conn is a multiplexed, bidirectional connection: either end may send
// requests, and replies are matched by id.
type Conn struct {
	nc   net.Conn
	br   *bufio.Reader
	cfg  ConnConfig
	sem  chan struct{}
	mem  *semaphore.Weighted // MaxInFlightBytes; nil without a bound
	prio chan *frameReq      // frames without data, written first
	bulk chan *frameReq      // frames with a data section

	nextID  atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]chan Msg
	err     error // why the connection closed; set once
	done    chan struct{}

	crc     bool            // data sections carry a CRC32C (plaintext); not over TLS
	batcher *bufferedConn   // under TLS: gathers a frame's records into few writes
	ctx     context.Context // canceled when the connection closes
	cancel  context.CancelFunc
	Value   atomic.Value // the owner's per-connection state (e.g. the client id)
}

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
		pending: make(map[uint64]chan Msg), done: make(chan struct{}),
		prio: make(chan *frameReq, 64), bulk: make(chan *frameReq, 16)}
	if cfg.MaxInFlightBytes > 0 {
		c.mem = semaphore.NewWeighted(cfg.MaxInFlightBytes)
	}
	tc, isTLS := nc.(*tls.Conn)
	c.crc = !isTLS
	if isTLS {
		c.batcher, _ = tc.NetConn().(*bufferedConn)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
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
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.cancel()
	c.nc.Close()
	close(c.done)
	for _, ch := range pending {
		close(ch)
	}
}

// Call sends a request and waits for its reply. A reply of type Error comes
// back as a *RemoteError.
func (c *Conn) Call(ctx context.Context, m Msg) (Msg, error) {
	id := c.nextID.Add(1)
	ch := make(chan Msg, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.write(m, 0, id); err != nil {
		c.forget(id)
		return nil, err
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, c.Err()
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

// write sends one frame and waits until it is written. Frames without a
// data section (requests, small replies, forwards, negative replies) go
// ahead of queued data frames: a control message never waits behind
// megabytes of blocks for the same peer.
func (c *Conn) write(m Msg, flags uint8, id uint64) error {
	if err := c.Err(); err != nil {
		return err
	}
	head, data := appendFrameCRC(nil, m, flags, id, c.crc)
	if uint32(len(head)-HeaderSize) > c.cfg.Limits.MaxMeta || uint32(len(data)) > c.cfg.Limits.MaxData {
		return fmt.Errorf("send %v: %w", m.Type(), ErrFrameTooLarge)
	}
	req := &frameReq{head: head, data: data, done: make(chan error, 1)}
	q := c.bulk
	if len(data) == 0 {
		q = c.prio
	}
	select {
	case q <- req:
	case <-c.done:
		return c.Err()
	}
	select {
	case err := <-req.done:
		if err != nil {
			return err
		}
	case <-c.done:
		return c.Err()
	}
	if c.cfg.Observer != nil {
		c.cfg.Observer.Message("out", observed(m), len(head)+len(data))
	}
	return nil
}

// observed is the type metrics count a message as: a request wrapped in
// As (the caller's identity) counts as the request it wraps.
func observed(m Msg) Type {
	if as, ok := m.(*As); ok && as.Msg != nil {
		return as.Msg.Type()
	}
	return m.Type()
}

// frameReq is one frame waiting for the writer.
type frameReq struct {
	head, data []byte
	done       chan error
}

// writeLoop writes queued frames, control frames first.
func (c *Conn) writeLoop() {
	for {
		var r *frameReq
		select {
		case r = <-c.prio:
		default:
			select {
			case r = <-c.prio:
			case r = <-c.bulk:
			case <-c.done:
				return
			}
		}
		bufs := net.Buffers{r.head}
		if len(r.data) > 0 {
			bufs = append(bufs, r.data)
		}
		c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if c.batcher != nil {
			c.batcher.startBatch()
		}
		_, err := bufs.WriteTo(c.nc)
		if c.batcher != nil {
			if ferr := c.batcher.flush(); err == nil {
				err = ferr
			}
		}
		if err != nil {
			c.fail(err)
			err = c.Err()
		}
		r.done <- err
	}
}

// notSentLowat bounds the bytes a socket holds unsent, so that queued data
// waits in writeLoop, where control frames can overtake it, rather than in
// the kernel's send buffer (seconds of it on a slow link).
const notSentLowat = 128 << 10

func limitUnsent(nc net.Conn) {
	tc, ok := tcpConn(nc)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, notSentLowat)
	})
}

// writeTimeout bounds one frame's write: a peer that stops reading for this
// long is treated as dead rather than blocking its senders forever.
const writeTimeout = 60 * time.Second

func (c *Conn) readLoop() {
	hdr := make([]byte, HeaderSize)
	for {
		h, m, err := readFrameCRC(c.br, hdr, c.cfg.Limits, c.crc)
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
	return n
}

func (c *Conn) deliver(id uint64, m Msg) {
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

func (c *Conn) serve(h header, m Msg, held int64) {
	defer func() {
		if held > 0 {
			c.mem.Release(held)
		}
		<-c.sem
	}()
	// The deadline is one timer (no context per request: the handlers'
	// system calls would not watch it anyway; a handler that waits, as a
	// blocked lock does, has its own bound).
	var answered atomic.Bool // the reply (or the timeout's) was sent
	if c.cfg.HandlerTimeout > 0 {
		t := time.AfterFunc(c.cfg.HandlerTimeout, func() {
			if c.ctx.Err() != nil || !answered.CompareAndSwap(false, true) {
				return
			}
			if c.cfg.OnTimeout != nil {
				c.cfg.OnTimeout(h.typ)
			}
			if h.flags&FlagOneWay == 0 {
				c.write(errorMsg(fmt.Errorf("%v: not finished within %s: %w", h.typ, c.cfg.HandlerTimeout, syscall.ETIMEDOUT)), FlagReply, h.id)
			}
		})
		defer t.Stop()
	}
	var reply Msg
	var err error
	if c.cfg.Handler == nil {
		err = fmt.Errorf("no handler for %v: %w", h.typ, errNoSys)
	} else {
		ctx := c.ctx
		if h.flags&FlagOneWay != 0 {
			ctx = context.WithValue(ctx, oneWayKey{}, true)
		}
		reply, err = c.cfg.Handler.ServeMsg(ctx, c, m)
	}
	if h.flags&FlagOneWay != 0 || !answered.CompareAndSwap(false, true) {
		return
	}
	if err != nil {
		reply = errorMsg(err)
	} else if reply == nil {
		reply = &OK{}
	}
	c.write(reply, FlagReply, h.id) // a failed write closes the connection
}
