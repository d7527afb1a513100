package wire

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"syscall"
	"time"
)

// AcceptLoop accepts connections on ln until ln is closed or ctx ends,
// admitting each through a Gate built from lim (connection caps) and
// running serve on its own goroutine with the gate's "authenticated"
// callback (call it when the handshake is over). Failed accepts back off:
// resource exhaustion (EMFILE, ENFILE, ENOMEM, ENOBUFS) and other transient
// errors shed new connections for a moment and never end the loop. It
// returns nil once ln is closed or ctx ends. The file server and the
// caching proxy both listen through it.
func AcceptLoop(ctx context.Context, ln net.Listener, lim ConnLimits, log *slog.Logger, serve func(nc net.Conn, authenticated func())) error {
	var b acceptBackoff
	gate := NewGate(lim, log)
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			select {
			case <-time.After(b.failed(log, err)):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		b.ok()
		release, authenticated, ok := gate.Admit(nc)
		if !ok {
			continue
		}
		go func() {
			defer release()
			serve(nc, authenticated)
		}()
	}
}

// acceptBackoff says how long to wait after a failed Accept.
type acceptBackoff struct {
	delay  time.Duration
	logged time.Time
}

func (b *acceptBackoff) failed(log *slog.Logger, err error) time.Duration {
	if b.delay == 0 {
		b.delay = 5 * time.Millisecond
	} else {
		b.delay = min(2*b.delay, time.Second)
	}
	if now := time.Now(); now.Sub(b.logged) > 10*time.Second {
		b.logged = now
		what := "accept failed"
		if IsExhaustion(err) {
			what = "out of file descriptors or memory: not accepting new connections for a moment"
		}
		log.Warn(what, "err", err, "retry_in", b.delay.String())
	}
	return b.delay
}

func (b *acceptBackoff) ok() { b.delay = 0 }

// IsExhaustion reports whether err says the process ran out of file
// descriptors or memory (EMFILE, ENFILE, ENOMEM, ENOBUFS).
func IsExhaustion(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ENOBUFS)
}
