package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// ErrUpstreamUnreachable is wrapped by the errors for an upstream that
// could not be reached.
var ErrUpstreamUnreachable = errors.New("upstream unreachable")

// Proxy is a running caching proxy.
type Proxy struct {
	cfg       Config
	log       *slog.Logger
	metrics   *obs.Metrics
	blockSize int
	upBoot    uint64 // the upstream's boot id, passed on to clients
	cache     *blockCache
	wb        *writeBack // nil unless the write policy is write-back

	mu      sync.Mutex
	clients map[*client]struct{}
	closed  bool
	ln      net.Listener
}

// New checks that the upstream answers (retrying for ConnectTimeout),
// learns its block size, and opens the caches.
func New(ctx context.Context, cfg Config) (*Proxy, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics, clients: make(map[*client]struct{})}
	hr, err := p.probe(ctx)
	if err != nil {
		return nil, err
	}
	p.blockSize, p.upBoot = int(hr.BlockSize), hr.BootID
	if p.cache, err = newBlockCache(cfg, p.blockSize); err != nil {
		return nil, err
	}
	if cfg.WritePolicy == cache.WriteBack {
		if err := p.openWriteBack(ctx); err != nil {
			p.cache.close()
			return nil, err
		}
	}
	if err := p.register(); err != nil {
		p.closeCaches()
		return nil, err
	}
	return p, nil
}

// probe dials the upstream once it answers, or fails with a clear error
// once ConnectTimeout passed (at once for a refused secret or certificate).
func (p *Proxy) probe(ctx context.Context) (*wire.HelloReply, error) {
	deadline := time.Now().Add(p.cfg.ConnectTimeout)
	backoff := 100 * time.Millisecond
	for {
		hs, c, err := p.dial(ctx, wire.Hello{Role: wire.RoleClient, Name: p.cfg.Name + " (probe)"}, nil)
		if err == nil {
			c.Close()
			p.log.Info("upstream answers", "upstream", p.cfg.Upstream, "block_size", hs.Reply.BlockSize, "upstream_policy", hs.Reply.Policy)
			return hs.Reply, nil
		}
		if wire.Permanent(err) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPROTO) {
			return nil, fmt.Errorf("upstream %s refused the proxy: %w", p.cfg.Upstream, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().Add(backoff).After(deadline) {
			return nil, fmt.Errorf("%w: %s: %v (gave up after %s); check --upstream and that coopfs serve or another coopfs proxy runs there",
				ErrUpstreamUnreachable, p.cfg.Upstream, err, p.cfg.ConnectTimeout)
		}
		p.log.Warn("upstream unreachable, retrying", "upstream", p.cfg.Upstream, "err", err, "retry_in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// dial opens one upstream connection.
func (p *Proxy) dial(ctx context.Context, hello wire.Hello, h wire.Handler) (*wire.Handshake, *wire.Conn, error) {
	return agent.Dial(ctx, agent.DialConfig{Addr: p.cfg.Upstream, Security: p.cfg.Security, ServerName: p.cfg.TLSServerName,
		Hello: hello, Handler: h, Metrics: p.metrics, Name: "upstream " + p.cfg.Upstream})
}

// BlockSize is the upstream's block size.
func (p *Proxy) BlockSize() int { return p.blockSize }

// Serve accepts clients on ln until ctx ends or Close, then closes every
// client connection and returns nil.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return nil
	}
	p.ln = ln
	p.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	return wire.AcceptLoop(ctx, ln, p.cfg.Conns, p.log, func(nc net.Conn, authenticated func()) {
		p.serveClient(ctx, nc, authenticated)
	})
}

// Close stops the listener, drops every client (and its upstream
// connection) and closes the caches.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	clients := p.clients
	p.clients = nil
	ln := p.ln
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for cl := range clients {
		p.drop(cl)
	}
	return p.closeCaches()
}

// closeCaches writes back what it can (write-back) and closes the caches.
func (p *Proxy) closeCaches() error {
	var err error
	if p.wb != nil {
		err = p.wb.close()
	}
	return errors.Join(err, p.cache.close())
}

// add registers a client; false once the proxy is closed.
func (p *Proxy) add(cl *client) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.clients[cl] = struct{}{}
	return true
}

func (p *Proxy) remove(cl *client) {
	p.mu.Lock()
	delete(p.clients, cl)
	p.mu.Unlock()
}

// clientList returns the connected clients, to go through without p.mu.
func (p *Proxy) clientList() []*client {
	p.mu.Lock()
	defer p.mu.Unlock()
	clients := make([]*client, 0, len(p.clients))
	for cl := range p.clients {
		clients = append(clients, cl)
	}
	return clients
}

// drop closes cl's connections. Under write-back it first hands the write
// delegations cl holds to its own upstream connection (delegs.handOff): the
// upstream keeps them as orphans of cl's name.
func (p *Proxy) drop(cl *client) {
	if p.wb != nil {
		p.wb.d.handOff(cl)
	}
	cl.close()
}

// clientCount is the number of connected clients.
func (p *Proxy) clientCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clients)
}
