package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// hintsMemberConn is a raw client of a hints server that records the
// client lists it is sent.
type hintsMemberConn struct {
	conn  *wire.Conn
	lists chan *wire.HintsPeers
}

func joinHints(t *testing.T, addr, listen string, boot uint64) *hintsMemberConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := wire.ClientHandshake(context.Background(), nc, wire.MustSecurity(wire.SecurityConfig{Insecure: true}), "",
		wire.Hello{Role: wire.RoleClient, Name: listen, BootID: boot, Listen: listen})
	if err != nil {
		t.Fatal(err)
	}
	m := &hintsMemberConn{lists: make(chan *wire.HintsPeers, 16)}
	m.conn = wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Handler: wire.HandlerFunc(
		func(_ context.Context, _ *wire.Conn, msg wire.Msg) (wire.Msg, error) {
			if l, ok := msg.(*wire.HintsPeers); ok {
				m.lists <- l
			}
			return nil, nil
		})})
	t.Cleanup(func() { m.conn.Close() })
	return m
}

func (m *hintsMemberConn) next(t *testing.T) *wire.HintsPeers {
	t.Helper()
	select {
	case l := <-m.lists:
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("no client list arrived")
		return nil
	}
}

// Membership under hints: ids stable per peer listener address, the
// joiner gets the whole list, the others a delta, in order; a restart on
// the same address keeps the id with a new boot id.
func TestHintsMembership(t *testing.T) {
	s, err := New(Config{Export: t.TempDir(), Policy: "hints", Squash: SquashNone})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	defer func() { cancel(); <-done }()
	addr := ln.Addr().String()

	// Every change has the number after the last one's, from the server's
	// boot id on; a whole list has the number of the last change it holds.
	a := joinHints(t, addr, "10.0.0.1:1", 5)
	l := a.next(t)
	if l.Delta || l.You != 1 || len(l.Members) != 1 || l.Seq != s.bootID+1 {
		t.Fatalf("first joiner got %+v (boot id %d)", l, s.bootID)
	}
	b := joinHints(t, addr, "10.0.0.2:1", 7)
	if l := b.next(t); l.Delta || l.You != 2 || len(l.Members) != 2 || l.Seq != s.bootID+2 {
		t.Fatalf("second joiner got %+v", l)
	}
	if l := a.next(t); !l.Delta || l.You != 1 || len(l.Members) != 1 || l.Members[0].ID != 2 || l.Members[0].Boot != 7 || l.Seq != s.bootID+2 {
		t.Fatalf("first member got %+v for the join", l)
	}
	b.conn.Close()
	if l := a.next(t); !l.Delta || len(l.Gone) != 1 || l.Gone[0] != 2 || l.Seq != s.bootID+3 {
		t.Fatalf("first member got %+v for the leave", l)
	}
	b2 := joinHints(t, addr, "10.0.0.2:1", 9) // restarted on the same address
	if l := b2.next(t); l.You != 2 {
		t.Fatalf("restarted client got id %d, want 2 (its address's)", l.You)
	}
	if l := a.next(t); !l.Delta || len(l.Members) != 1 || l.Members[0].ID != 2 || l.Members[0].Boot != 9 || l.Seq != s.bootID+4 {
		t.Fatalf("first member got %+v for the restart", l)
	}
	r, err := a.conn.Call(context.Background(), &wire.HintsPeers{})
	if err != nil {
		t.Fatal(err)
	}
	if l := r.(*wire.HintsPeers); l.Delta || l.You != 1 || len(l.Members) != 2 || l.Seq != s.bootID+4 {
		t.Fatalf("asked list: %+v", l)
	}
}
