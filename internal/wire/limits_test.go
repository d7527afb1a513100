package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

func TestGateCaps(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	g := NewGate(ConnLimits{MaxConns: 4, MaxPerAddr: 3, MaxUnauth: 2}, nil)
	type adm struct{ release, auth func() }
	var held []adm
	var dialed []net.Conn
	defer func() {
		for _, c := range dialed {
			c.Close()
		}
	}()
	admit := func() bool {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		dialed = append(dialed, c)
		nc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		rel, auth, ok := g.Admit(nc)
		if ok {
			held = append(held, adm{rel, auth})
			return true
		}
		// A refused connection is closed at once.
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a refused connection stayed open")
		}
		return false
	}
	if !admit() || !admit() {
		t.Fatal("first two refused")
	}
	if admit() {
		t.Fatal("a third connection in its handshake was admitted (cap 2)")
	}
	held[0].auth()
	held[1].auth()
	if !admit() {
		t.Fatal("refused after the handshakes finished")
	}
	held[2].auth()
	if admit() {
		t.Fatal("a fourth connection from one address was admitted (cap 3)")
	}
	held[0].release()
	held[0].release() // twice is harmless
	if !admit() {
		t.Fatal("refused after a release")
	}
	if g.Refused() != 2 {
		t.Errorf("refused = %d, want 2", g.Refused())
	}
}

// An outsider opens silent connections from one address: it takes the
// handshake slots of that address only, and a dialer from another address
// still completes its handshake through the same listener; a silent
// connection is dropped after FirstByteTimeout.
func TestSilentConnectionsFromOneAddressBlockNoOne(t *testing.T) {
	sec := withTLS("a cluster secret of more than 128 bits")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go AcceptLoop(ctx, ln, ConnLimits{}, nil, func(nc net.Conn, authenticated func()) {
		hs, err := ServerHandshake(nc, sec, HelloReply{BlockSize: 4096, Policy: "none"},
			func(*Handshake) (Welcome, error) { return Welcome{ClientID: 1}, nil })
		authenticated()
		if err != nil {
			nc.Close()
			return
		}
		defer hs.Conn.Close()
		io.Copy(io.Discard, hs.Conn)
	})
	// The outsider: DefaultMaxUnauth silent connections from 127.0.0.2.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range DefaultMaxUnauth {
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	nc, err := net.Dial("tcp", ln.Addr().String()) // from 127.0.0.1
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := ClientHandshake(t.Context(), nc, sec, "", Hello{Role: RoleClient, Name: "legit"}); err != nil {
		t.Fatalf("a legitimate handshake failed beside one host's silent connections: %v", err)
	}
	// Every silent connection is closed by the listener: refused at once,
	// or dropped after its first-byte deadline.
	for i, c := range silent {
		c.SetReadDeadline(time.Now().Add(HandshakeTimeout))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("silent connection %d: %v, want closed by the listener", i, err)
		}
	}
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
