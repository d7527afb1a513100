package wire

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// ConnLimits caps the connections a listener holds, so that a flood of
// dialers (or one dialer opening many connections) cannot exhaust the
// process's descriptors or memory. A connection over a cap is closed at
// once; a handshake that does not finish within HandshakeTimeout is
// dropped by the handshake itself.
type ConnLimits struct {
	MaxConns   int // connections at once, authenticated or not; default 1024
	MaxPerAddr int // connections at once from one IP address; default 128
	MaxUnauth  int // connections still in their handshake; default 64
	// MaxUnauthPerAddr caps the handshakes in progress from one address
	// (an IPv6 address counts by its /64): one host that opens silent
	// connections takes this many of the MaxUnauth slots, not all of them.
	// Default 16.
	MaxUnauthPerAddr int
}

// Defaults of ConnLimits.
const (
	DefaultMaxConns   = 1024
	DefaultMaxPerAddr = 128
	DefaultMaxUnauth  = 64

	DefaultMaxUnauthPerAddr = 16
)

// SetDefaults fills in zero fields.
func (l *ConnLimits) SetDefaults() {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxPerAddr <= 0 {
		l.MaxPerAddr = DefaultMaxPerAddr
	}
	if l.MaxUnauth <= 0 {
		l.MaxUnauth = DefaultMaxUnauth
	}
	if l.MaxUnauthPerAddr <= 0 {
		l.MaxUnauthPerAddr = min(DefaultMaxUnauthPerAddr, l.MaxUnauth)
	}
}

// Gate admits accepted connections under ConnLimits. It is safe for
// concurrent use.
type Gate struct {
	lim ConnLimits
	log *slog.Logger

	mu       sync.Mutex
	total    int
	unauth   int
	perAddr  map[string]int
	unauthAt map[string]int // handshakes in progress per address
	rejected uint64
	warned   time.Time
}

// NewGate returns a gate with lim (zero fields take their defaults).
func NewGate(lim ConnLimits, log *slog.Logger) *Gate {
	lim.SetDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gate{lim: lim, log: log, perAddr: make(map[string]int), unauthAt: make(map[string]int)}
}

// Admit counts nc in, or closes it and returns ok false when a cap is
// reached. authenticated must be called once the handshake is over
// (successful or not), release when the connection is closed; both may be
// called more than once.
func (g *Gate) Admit(nc net.Conn) (release, authenticated func(), ok bool) {
	ip := remoteIP(nc)
	g.mu.Lock()
	why := ""
	switch {
	case g.total >= g.lim.MaxConns:
		why = fmt.Sprintf("%d connections open (the cap)", g.total)
	case g.perAddr[ip] >= g.lim.MaxPerAddr:
		why = fmt.Sprintf("%d connections open from %s (the cap per address)", g.perAddr[ip], ip)
	case g.unauthAt[ip] >= g.lim.MaxUnauthPerAddr:
		why = fmt.Sprintf("%d handshakes in progress from %s (the cap per address)", g.unauthAt[ip], ip)
	case g.unauth >= g.lim.MaxUnauth:
		why = fmt.Sprintf("%d handshakes in progress (the cap)", g.unauth)
	}
	if why != "" {
		g.rejected++
		warn := time.Since(g.warned) > time.Second
		if warn {
			g.warned = time.Now()
		}
		n := g.rejected
		g.mu.Unlock()
		nc.Close()
		if warn {
			g.log.Warn("refusing connections", "remote", nc.RemoteAddr().String(), "why", why, "refused_total", n)
		}
		return nil, nil, false
	}
	g.total++
	g.unauth++
	g.perAddr[ip]++
	g.unauthAt[ip]++
	g.mu.Unlock()
	var authOnce, relOnce sync.Once
	authenticated = func() {
		authOnce.Do(func() {
			g.mu.Lock()
			g.unauth--
			if g.unauthAt[ip]--; g.unauthAt[ip] <= 0 {
				delete(g.unauthAt, ip)
			}
			g.mu.Unlock()
		})
	}
	release = func() {
		authenticated()
		relOnce.Do(func() {
			g.mu.Lock()
			g.total--
			if g.perAddr[ip]--; g.perAddr[ip] <= 0 {
				delete(g.perAddr, ip)
			}
			g.mu.Unlock()
		})
	}
	return release, authenticated, true
}

// Refused is the number of connections the gate closed at a cap.
func (g *Gate) Refused() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rejected
}

// remoteIP is the address a dialer is counted by: its IPv4 address, or
// the /64 of its IPv6 address (one host is usually given a whole /64).
func remoteIP(nc net.Conn) string {
	a, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return nc.RemoteAddr().String()
	}
	if a.IP.To4() == nil && len(a.IP) == net.IPv6len {
		return a.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return a.IP.String()
}
