package testbed

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

// BenchmarkGoodput measures the goodput of shaped links: a helper server in
// the server host sends, the benchmark reads through sockets opened inside
// the client hosts (Host.DialContext), so process start-up is not timed.
// Each iteration moves half a second's worth of data per client at the
// client link's rate. Run as root:
//
//	go test -run '^$' -bench Goodput -benchtime 5x ./internal/bench/testbed/
func BenchmarkGoodput(b *testing.B) {
	for _, c := range []struct {
		name           string
		clients        int
		server, client string
	}{
		{"1client/100mbit", 1, "100mbit", "100mbit"},
		{"1client/1gbit", 1, "1gbit", "1gbit"},
		{"1client/unshaped", 1, "", ""},
		{"4clients/server100mbit/client100mbit", 4, "100mbit", "100mbit"},
		{"4clients/server1gbit/client100mbit", 4, "1gbit", "100mbit"},
	} {
		b.Run(c.name, func(b *testing.B) {
			tb := newTestbed(b, Config{Clients: c.clients, ServerLink: c.server, ClientLink: c.client})
			startServe(b, tb, tb.Server(), 7000)
			rate, _ := ParseRate(c.client)
			if rate == 0 {
				rate = 8e9
			}
			n := int64(rate / 8 / 2)
			addr := tb.Server().AddrPort(7000).String()
			var moved int64
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				var wg sync.WaitGroup
				errs := make(chan error, c.clients)
				for _, h := range tb.Clients() {
					wg.Go(func() { errs <- fetch(h, addr, n) })
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				moved += n * int64(c.clients)
			}
			secs := time.Since(start).Seconds()
			b.ReportMetric(float64(moved)*8/secs/1e6, "Mbit/s")
			b.ReportMetric(float64(moved)*8/secs/1e6/float64(c.clients), "Mbit/s/client")
		})
	}
}

// fetch asks the helper server at addr, from inside h, for n bytes.
func fetch(h *Host, addr string, n int64) error {
	c, err := h.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "get %d\n", n); err != nil {
		return err
	}
	got, err := io.Copy(io.Discard, c)
	if err == nil && got != n {
		err = fmt.Errorf("%s: got %d bytes, want %d", h.Name, got, n)
	}
	return err
}
