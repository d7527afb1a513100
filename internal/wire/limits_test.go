package wire

import (
	"net"
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
