package wire

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestInFlightBytesBound sends many writes to a handler that holds them
// until released, and checks that the bytes it holds at once never pass
// MaxInFlightBytes (plus one frame, which may wait for the whole budget).
func TestInFlightBytesBound(t *testing.T) {
	const budget, size, n = 256 << 10, 64 << 10, 40
	var held, peak atomic.Int64
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, c *Conn, m Msg) (Msg, error) {
		w := m.(*Write)
		now := held.Add(int64(len(w.Data)))
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		<-release
		held.Add(-int64(len(w.Data)))
		return &OK{}, nil
	})
	a, b := net.Pipe()
	srv := NewConn(a, bufio.NewReader(a), ConnConfig{Handler: h, MaxInFlightBytes: budget})
	cli := NewConn(b, bufio.NewReader(b), ConnConfig{})
	defer srv.Close()
	defer cli.Close()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cli.Call(context.Background(), &Write{Data: make([]byte, size)}); err != nil {
				t.Error(err)
			}
		}()
	}
	// Wait until the handlers hold as much as fits (each request counts
	// its metadata too, so three of 64 KiB fit in 256 KiB, not four), then
	// let them go.
	for held.Load() < budget-size {
		select {
		case <-srv.Done():
			t.Fatal(srv.Err())
		case <-time.After(time.Millisecond):
		}
	}
	time.Sleep(50 * time.Millisecond) // a fourth would have started by now
	close(release)
	wg.Wait()
	if p := peak.Load(); p > budget {
		t.Fatalf("handlers held %d bytes at once, budget %d", p, budget)
	}
}

// TestHandlerTimeout: a handler that does not return in time gets its
// request answered ETIMEDOUT; its late reply is dropped.
func TestHandlerTimeout(t *testing.T) {
	release := make(chan struct{})
	var timedOut atomic.Int64
	h := HandlerFunc(func(ctx context.Context, c *Conn, m Msg) (Msg, error) {
		if _, ok := m.(*Lookup); ok {
			<-release // a hung export: it does not return in time
		}
		return &OK{}, nil
	})
	a, b := net.Pipe()
	srv := NewConn(a, bufio.NewReader(a), ConnConfig{Handler: h, HandlerTimeout: 50 * time.Millisecond,
		OnTimeout: func(Type) { timedOut.Add(1) }})
	cli := NewConn(b, bufio.NewReader(b), ConnConfig{})
	defer srv.Close()
	defer cli.Close()
	_, err := cli.Call(context.Background(), &Lookup{Path: "hung"})
	if !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("hung request: %v, want ETIMEDOUT", err)
	}
	close(release)
	if _, err := cli.Call(context.Background(), &Ping{}); err != nil {
		t.Fatalf("next request: %v", err)
	}
	if timedOut.Load() != 1 {
		t.Fatalf("OnTimeout called %d times, want 1", timedOut.Load())
	}
}
