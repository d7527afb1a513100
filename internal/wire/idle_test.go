package wire

import (
	"bufio"
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// A connection with an idle timeout pings a silent other end: one that
// answers (an idle mount) stays connected through many timeouts; one that
// says nothing at all (an outsider's or a dead peer's socket) is closed.
func TestIdleTimeoutPingsAndCloses(t *testing.T) {
	const idle = 100 * time.Millisecond
	a, b := tcpPair(t)
	server := NewConn(a, bufio.NewReader(a), ConnConfig{IdleTimeout: idle})
	defer server.Close()
	client := NewConn(b, bufio.NewReader(b), ConnConfig{Handler: HandlerFunc(
		func(context.Context, *Conn, Msg) (Msg, error) { return &OK{}, nil })})
	defer client.Close()
	time.Sleep(10 * idle)
	if err := server.Err(); err != nil {
		t.Fatalf("a connection whose other end answers pings was closed: %v", err)
	}
	if _, err := server.Call(t.Context(), &Ping{}); err != nil {
		t.Fatal(err)
	}

	c, d := tcpPair(t) // d: a socket nobody reads or writes
	silent := NewConn(c, bufio.NewReader(c), ConnConfig{IdleTimeout: idle})
	select {
	case <-silent.Done():
	case <-time.After(HandshakeTimeout):
		t.Fatal("a silent connection stayed open")
	}
	if !errors.Is(silent.Err(), ErrIdle) {
		t.Fatalf("closed with %v, want ErrIdle", silent.Err())
	}
	_ = d
}
