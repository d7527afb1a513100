package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// ErrUnreachable is wrapped by errors for a server that could not be reached
// within the reconnect timeout. It maps to EIO.
var ErrUnreachable = errors.New("server unreachable")

// session is the agent's connection to its server, redialed when it breaks.
// Each successful dial starts a new generation: handles opened in an older
// generation are unknown to the server and must be reopened.
type session struct {
	addr        string
	sec         *wire.Security
	serverName  string // the name the server's certificate must carry
	hello       wire.Hello
	identity    ed25519.PrivateKey // the key this client proves to the server and its peers
	capKeys     *wire.CapVerifier  // learns the server's capability key at each connection
	timeout     time.Duration      // how long to keep redialing before failing a call
	callTimeout time.Duration      // how long one request may wait for its reply
	log         *slog.Logger
	metrics     *obs.Metrics
	handler     wire.Handler
	// register runs on a new connection before anything else is sent on
	// it (callbacks.go); connected and lost are told of each connection's
	// start (with register's answer) and end. All three may be nil.
	register  func(ctx context.Context, c *wire.Conn) bool
	connected func(gen uint64, registered bool)
	lost      func(gen uint64)

	mu        sync.Mutex
	conn      *wire.Conn
	gen       uint64
	clientID  uint32
	blockSize int
	policy    string
	dialing   chan struct{} // closed when the dial in progress ends
	closed    bool
}

// ErrSessionClosed is returned once the agent is closed.
var ErrSessionClosed = errors.New("agent closed")

// current returns a live connection and its generation, dialing if needed.
func (s *session) current(ctx context.Context) (*wire.Conn, uint64, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, 0, ErrSessionClosed
		}
		if s.conn != nil && s.conn.Err() == nil {
			c, g := s.conn, s.gen
			s.mu.Unlock()
			return c, g, nil
		}
		if s.dialing != nil {
			ch := s.dialing
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			}
		}
		ch := make(chan struct{})
		s.dialing = ch
		wasConnected := s.conn != nil
		s.mu.Unlock()
		err := s.redial(ctx, wasConnected)
		s.mu.Lock()
		s.dialing = nil
		close(ch)
		s.mu.Unlock()
		if err != nil {
			return nil, 0, err
		}
	}
}

// live returns the connection and its generation if the session is
// connected now; it never dials (for messages that only matter to the
// connection they belong to, such as releases of its handles).
func (s *session) live() (*wire.Conn, uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.conn == nil || s.conn.Err() != nil {
		return nil, 0, false
	}
	return s.conn, s.gen, true
}

// redial dials until it succeeds, the timeout passes, or ctx ends, saying
// what it is doing: a user waiting on a mount must see why.
func (s *session) redial(ctx context.Context, reconnect bool) error {
	deadline := time.Now().Add(s.timeout)
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.dialOnce(ctx)
		if err == nil {
			if reconnect || attempt > 1 {
				s.log.Info("connected to server", "server", s.addr, "attempts", attempt)
			}
			return nil
		}
		if wire.Permanent(err) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPROTO) {
			return err // retrying cannot help
		}
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("%w: %s: %v (gave up after %s)", ErrUnreachable, s.addr, err, s.timeout)
		}
		s.log.Warn("server unreachable, retrying", "server", s.addr, "attempt", attempt, "err", err, "retry_in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (s *session) dialOnce(ctx context.Context) error {
	s.mu.Lock()
	hello := s.hello
	s.mu.Unlock()
	hs, c, err := Dial(ctx, DialConfig{Addr: s.addr, Security: s.sec, ServerName: s.serverName, Hello: hello,
		Identity: s.identity, Handler: s.handler, Metrics: s.metrics})
	if err != nil {
		return err
	}
	hr, w := hs.Reply, hs.Welcome
	if s.capKeys != nil {
		s.capKeys.SetKey(w.CapKey)
	}
	registered := s.register != nil && s.register(ctx, c)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return ErrSessionClosed
	}
	s.conn, s.clientID, s.blockSize, s.policy = c, w.ClientID, int(hr.BlockSize), hr.Policy
	// The next connection resumes this session: writes resent on it are
	// recognised (the server's reply cache is keyed by the session).
	s.hello.Session = w.Session
	s.gen++
	gen := s.gen
	s.mu.Unlock()
	if s.connected != nil {
		s.connected(gen, registered)
	}
	go func() {
		<-c.Done()
		if s.lost != nil {
			s.lost(gen)
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			s.log.Warn("lost the connection to the server: cached entries and callbacks dropped; the next request reconnects",
				"server", s.addr, "err", c.Err())
		}
	}()
	return nil
}

// DialConfig says how to reach a coopfs server (or a proxy) as a client.
type DialConfig struct {
	Addr       string             // HOST:PORT
	Security   *wire.Security     // TLS and authentication
	ServerName string             // the name the server's certificate must carry ("" : the host of Addr)
	Hello      wire.Hello         // Role, Name, BootID, Listen of the dialer
	Identity   ed25519.PrivateKey // the identity key proved to the server (capabilities name it); nil: none
	Handler    wire.Handler       // serves what the server sends on its own (forwards, pings)
	Metrics    *obs.Metrics       // counts the connection's messages (kind "server"); nil: none
	Name       string             // the connection's name in errors; default "server ADDR"
}

// Dial makes one connection to a server: TCP, the handshake (TLS and
// authentication), then the multiplexed connection. It does not retry; a
// mount's session redials through it, and coopfs proxy opens one upstream
// connection per client through it.
func Dial(ctx context.Context, cfg DialConfig) (*wire.Handshake, *wire.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 15 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	name := cfg.ServerName
	if name == "" {
		name, _, _ = net.SplitHostPort(cfg.Addr)
	}
	hs, err := wire.ClientHandshakeAs(ctx, nc, cfg.Security, name, cfg.Hello, cfg.Identity)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	ccfg := wire.ConnConfig{Handler: cfg.Handler, Name: cfg.Name}
	if ccfg.Name == "" {
		ccfg.Name = "server " + cfg.Addr
	}
	if cfg.Metrics != nil {
		ccfg.Observer = obs.WireObserver{M: cfg.Metrics, Kind: obs.KindServer}
	}
	return hs, wire.NewConn(hs.Conn, hs.Reader, ccfg), nil
}

// call sends m and waits for the reply. When the connection is broken
// before m is sent, it reconnects first; when it breaks while m is in
// flight, m is sent again only if it is idempotent (a retried mkdir could
// fail with EEXIST for a directory it made), else the caller gets EIO.
func (s *session) call(ctx context.Context, m wire.Msg, idempotent bool) (wire.Msg, uint64, error) {
	for attempt := 0; ; attempt++ {
		c, gen, err := s.current(ctx)
		if err != nil {
			return nil, 0, err
		}
		r, err := c.CallTimeout(ctx, m, s.callTimeout)
		if err == nil {
			return r, gen, nil
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, gen, fmt.Errorf("%v to %s: no reply within %s: %w", m.Type(), s.addr, s.callTimeout, syscall.EIO)
		}
		var ce *wire.ConnError
		if !errors.As(err, &ce) || ctx.Err() != nil {
			return nil, gen, err
		}
		if !idempotent || attempt >= 2 {
			return nil, gen, fmt.Errorf("%v to %s interrupted: %v: %w", m.Type(), s.addr, err, syscall.EIO)
		}
	}
}

func (s *session) params() (blockSize int, clientID uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blockSize, s.clientID
}

func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

func (s *session) serverPolicy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policy
}
