package wire

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestInlineHandsOverReading: a request served inline on the read loop
// that waits for something only a later frame of the same connection can
// bring (here: the reply to a call it makes to the peer, and another
// inline request) does not stop the connection: after InlineStall another
// goroutine takes over the reading.
func TestInlineHandsOverReading(t *testing.T) {
	pinged := make(chan struct{})
	srvH := HandlerFunc(func(ctx context.Context, c *Conn, m Msg) (Msg, error) {
		switch m := m.(type) {
		case *Lookup:
			if m.Path == "wait-for-ping" {
				select {
				case <-pinged:
				case <-time.After(10 * time.Second):
					return nil, fmt.Errorf("no ping arrived while an inline request waited")
				}
				return &OK{}, nil
			}
			// Calls the peer back: its reply arrives on this connection.
			if _, err := c.Call(ctx, &Ping{}); err != nil {
				return nil, err
			}
			return &OK{}, nil
		case *Ping:
			close(pinged)
		}
		return &OK{}, nil
	})
	// Inline requests are handed over after InlineStall, quick ones
	// (InlineQuick) after the watchdog's slow tick (HandlerTimeout/8 here).
	for i, sec := range []*Security{plain("s3cret-s3cret-s3cret"), withTLS("s3cret-s3cret-s3cret"), plain("s3cret-s3cret-s3cret")} {
		pinged = make(chan struct{})
		shs, chs, serr, cerr := handshakePair(t, sec, sec, "localhost", nil)
		if serr != nil || cerr != nil {
			t.Fatal(serr, cerr)
		}
		inline := func(Msg) bool { return true }
		quick := func(Msg) bool { return i == 2 }
		srv := NewConn(shs.Conn, shs.Reader, ConnConfig{Handler: srvH, Inline: inline, InlineQuick: quick, HandlerTimeout: 800 * time.Millisecond})
		cli := NewConn(chs.Conn, chs.Reader, ConnConfig{Handler: HandlerFunc(func(context.Context, *Conn, Msg) (Msg, error) { return &OK{}, nil })})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if _, err := cli.Call(ctx, &Lookup{Path: "call-back"}); err != nil {
			t.Fatalf("inline request that calls the peer: %v", err)
		}
		done := make(chan error, 1)
		go func() { _, err := cli.Call(ctx, &Lookup{Path: "wait-for-ping"}); done <- err }()
		time.Sleep(5 * time.Millisecond) // let the waiting request reach the server first
		if _, err := cli.Call(ctx, &Ping{}); err != nil {
			t.Fatalf("ping behind a waiting inline request: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("waiting inline request: %v", err)
		}
		cancel()
		cli.Close()
		srv.Close()
	}
}

// TestConcurrentWritersMixed: many goroutines send control and data frames
// at once over TLS and plaintext (direct writes, queued writes, the write
// loop's batches); every reply comes back to its caller intact.
func TestConcurrentWritersMixed(t *testing.T) {
	echo := HandlerFunc(func(ctx context.Context, c *Conn, m Msg) (Msg, error) {
		switch m := m.(type) {
		case *Write:
			return &BlockReply{Version: m.Offset, Data: m.Data}, nil
		case *Lookup:
			return &ReadlinkReply{Target: m.Path}, nil
		}
		return &OK{}, nil
	})
	for _, sec := range []*Security{plain("s3cret-s3cret-s3cret"), withTLS("s3cret-s3cret-s3cret")} {
		shs, chs, serr, cerr := handshakePair(t, sec, sec, "localhost", nil)
		if serr != nil || cerr != nil {
			t.Fatal(serr, cerr)
		}
		inline := func(m Msg) bool { _, ok := m.(*Lookup); return ok }
		srv := NewConn(shs.Conn, shs.Reader, ConnConfig{Handler: echo, Inline: inline})
		cli := NewConn(chs.Conn, chs.Reader, ConnConfig{})
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := range 16 {
			wg.Go(func() {
				for i := range 40 {
					if g%2 == 0 {
						data := bytes.Repeat([]byte{byte(g), byte(i)}, 1000*(1+i%50))
						r, err := cli.Call(context.Background(), &Write{Offset: uint64(i), Data: data})
						if err != nil {
							errs <- err
							return
						}
						if br := r.(*BlockReply); br.Version != uint64(i) || !bytes.Equal(br.Data, data) {
							errs <- fmt.Errorf("goroutine %d call %d: wrong data back", g, i)
							return
						}
						continue
					}
					p := fmt.Sprintf("g%d-%d", g, i)
					r, err := cli.Call(context.Background(), &Lookup{Path: p})
					if err != nil {
						errs <- err
						return
					}
					if r.(*ReadlinkReply).Target != p {
						errs <- fmt.Errorf("goroutine %d call %d: reply of another call", g, i)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		cli.Close()
		srv.Close()
	}
}

// TestWatchdogStopsWhenIdle: the watchdog's timer ticks while requests are
// served or calls wait, and stops once the connection is idle (INVARIANT of
// watchdog.go: no timer left running on an idle connection).
func TestWatchdogStopsWhenIdle(t *testing.T) {
	h := HandlerFunc(func(ctx context.Context, c *Conn, m Msg) (Msg, error) { return &OK{}, nil })
	shs, chs, serr, cerr := handshakePair(t, plain("s3cret-s3cret-s3cret"), plain("s3cret-s3cret-s3cret"), "localhost", nil)
	if serr != nil || cerr != nil {
		t.Fatal(serr, cerr)
	}
	inline := func(m Msg) bool { return true }
	quick := func(m Msg) bool { _, ok := m.(*Ping); return ok }
	srv := NewConn(shs.Conn, shs.Reader, ConnConfig{Handler: h, Inline: inline, InlineQuick: quick, HandlerTimeout: 400 * time.Millisecond})
	cli := NewConn(chs.Conn, chs.Reader, ConnConfig{})
	defer srv.Close()
	defer cli.Close()
	for i := range 50 {
		var m Msg = &Ping{}
		if i%2 == 0 {
			m = &Lookup{Path: "x"}
		}
		if _, err := cli.CallTimeout(context.Background(), m, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*Conn{srv, cli} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			c.wd.mu.Lock()
			stopped := c.wd.cur == 0
			c.wd.mu.Unlock()
			if stopped {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the watchdog still ticks on an idle connection")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
