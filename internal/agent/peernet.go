package agent

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// peerNet is the client-to-client network every cooperative policy uses:
// the peer listener (its connections served by handler, under the caps of
// Config.PeerConns) and the connections this client dials to peers, one
// per address, kept for reuse.
type peerNet struct {
	a       *Agent
	ln      net.Listener
	policy  string // named in the listener's handshake reply
	handler wire.Handler
	timeout time.Duration // dial and handshake bound

	peerMu sync.Mutex
	peers  map[string]*peerConn // connections to peers, by address
	closed bool                 // no more dials (close ran)
}

// peerConn is the connection to one peer; mu serialises its dialing.
type peerConn struct {
	mu   sync.Mutex
	conn *wire.Conn
}

func newPeerNet(a *Agent, ln net.Listener, policy string, handler wire.Handler, timeout time.Duration) *peerNet {
	n := &peerNet{a: a, ln: ln, policy: policy, handler: handler, timeout: timeout, peers: make(map[string]*peerConn)}
	go n.accept()
	return n
}

// close stops the listener and closes the dialed connections.
func (n *peerNet) close() {
	n.ln.Close()
	n.peerMu.Lock()
	n.closed = true
	peers := n.peers
	n.peers = map[string]*peerConn{}
	n.peerMu.Unlock()
	for _, p := range peers {
		p.mu.Lock()
		if p.conn != nil {
			p.conn.Close()
		}
		p.mu.Unlock()
	}
}

// accept serves peers that connect, under the connection caps of
// Config.PeerConns.
func (n *peerNet) accept() {
	gate := wire.NewGate(n.a.cfg.PeerConns, n.a.log)
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return
		}
		release, admitted, ok := gate.Admit(nc)
		if !ok {
			continue
		}
		go func() {
			conn := n.handshake(nc, admitted)
			if conn != nil {
				<-conn.Done()
			}
			release()
		}()
	}
}

func (n *peerNet) handshake(nc net.Conn, admitted func()) *wire.Conn {
	bs, _ := n.a.sess.params()
	hs, err := wire.ServerHandshakeAs(nc, n.a.cfg.Security, wire.HelloReply{BlockSize: uint32(bs), Policy: n.policy}, n.a.identity,
		func(hs *wire.Handshake) (wire.Welcome, error) {
			if hs.Hello.Role != wire.RolePeer {
				return wire.Welcome{}, fmt.Errorf("this is a client's peer listener, not a server: %w", syscall.EPROTO)
			}
			return wire.Welcome{}, nil
		})
	admitted()
	if err != nil {
		n.a.log.Warn("rejected a peer connection", "remote", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return nil
	}
	return wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{
		Handler:  n.handler,
		Observer: obs.WireObserver{M: n.a.metrics, Kind: obs.KindPeer},
		Name:     "peer " + nc.RemoteAddr().String(),
		PeerKey:  hs.PeerKey,
	})
}

// peer returns the connection to a peer, dialing it if needed. Dials to
// different peers proceed in parallel: a dead peer costs only the messages
// meant for it a timeout.
func (n *peerNet) peer(addr string) (*wire.Conn, error) {
	n.peerMu.Lock()
	if n.closed {
		n.peerMu.Unlock()
		return nil, fmt.Errorf("peer %s: %w", addr, ErrSessionClosed)
	}
	p := n.peers[addr]
	if p == nil {
		p = &peerConn{}
		n.peers[addr] = p
		n.prunePeers(addr)
	}
	n.peerMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil && p.conn.Err() == nil {
		return p.conn, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
	defer cancel()
	d := net.Dialer{}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_, me := n.a.sess.params()
	host, _, _ := net.SplitHostPort(addr)
	hs, err := wire.ClientHandshakeAs(ctx, nc, n.a.cfg.Security, host,
		wire.Hello{Role: wire.RolePeer, Name: fmt.Sprintf("%s (client %d)", n.a.cfg.Name, me)}, n.a.identity)
	if err != nil {
		nc.Close()
		return nil, err
	}
	p.conn = wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{
		Handler:  n.handler,
		Observer: obs.WireObserver{M: n.a.metrics, Kind: obs.KindPeer},
		Name:     "peer " + addr,
		PeerKey:  hs.PeerKey,
	})
	return p.conn, nil
}
