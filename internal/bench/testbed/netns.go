package testbed

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"time"
)

// inNetns runs fn on an OS thread that has joined the host's network
// namespace for the call. Sockets fn creates belong to that namespace for their whole
// life, wherever they are used afterwards.
func (h *Host) inNetns(fn func() error) error {
	f, err := os.Open(h.nsPath())
	if err != nil {
		return fmt.Errorf("testbed: %s: open namespace: %w", h.Name, err)
	}
	errc := make(chan error, 1)
	go func() {
		defer f.Close()
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("testbed: %s: open own namespace: %w", h.Name, err)
			return
		}
		defer orig.Close()
		if err := setns(f); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("testbed: %s: %w", h.Name, err)
			return
		}
		errc <- fn()
		// Return the thread to the pool only if it is back in its own
		// namespace; otherwise the runtime discards it when this goroutine
		// returns still locked. (Discarding threads is rare on purpose:
		// processes are forked from a dedicated thread, see starter.)
		if setns(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-errc
}

func setns(f *os.File) error {
	if _, _, e := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
		return fmt.Errorf("setns: %w", e)
	}
	return nil
}

// DialContext connects from inside the host, as if a process in it dialled:
// addr must be a literal "ip:port" (no name lookups). The connection can be
// used from any goroutine. Use it as an http.Transport's DialContext to
// scrape a process's metrics from the test driver.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return nil, fmt.Errorf("testbed: %s: dial %q: want a literal ip:port: %w", h.Name, addr, err)
	}
	var c net.Conn
	err := h.inNetns(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen opens a listener inside the host, e.g. for a server run in the
// test driver's own process. addr must be a literal "ip:port" (port 0 picks
// one).
func (h *Host) Listen(network, addr string) (net.Listener, error) {
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return nil, fmt.Errorf("testbed: %s: listen %q: want a literal ip:port: %w", h.Name, addr, err)
	}
	var l net.Listener
	err := h.inNetns(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// WaitTCP waits until a TCP connection from inside the host to addr
// ("ip:port") succeeds, polling every 20 ms. It gives up when ctx ends or
// when one of the watched processes exits first (then the error carries the
// end of that process's log). Typical use: after starting a server, wait
// for its port from a client host with the server process watched.
func (h *Host) WaitTCP(ctx context.Context, addr string, watch ...*Proc) error {
	start := time.Now()
	for {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := h.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			return c.Close()
		}
		for _, p := range watch {
			select {
			case <-p.Done():
				why := "exited"
				if werr := p.Wait(); werr != nil {
					why = werr.Error()
				}
				return fmt.Errorf("testbed: %s: waiting for %s: %s on %s %s; log ends:\n%s",
					h.Name, addr, p.Argv[0], p.Host.Name, why, p.LogTail(10))
			default:
			}
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("testbed: %s: %s not reachable after %v: %w (last: %w)",
				h.Name, addr, time.Since(start).Round(time.Millisecond), ctx.Err(), err)
		case <-t.C:
		}
	}
}
