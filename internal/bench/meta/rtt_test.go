package meta

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/cluster/clustertest"
	"github.com/coopfs/coopfs/internal/wire"
)

// BenchmarkRoundTrip splits a metadata round trip on loopback into its
// parts (docs/benchmarks-meta.md, "Where the time goes"): a plain Go TCP
// request/response of 128 bytes and of 4 KiB, a wire Ping to a coopfs
// server (framing, goroutines, no file system work), and wire Lookups of a
// path one and six directories deep (the server's os.Root walk and
// statx). None of them goes through FUSE or the agent; the stat-rtt rows
// of `coopfs bench meta` add those. p50-µs is the median call.
//
//	go test -run '^$' -bench RoundTrip -benchtime 20000x ./internal/bench/meta
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("tcp-128B", func(b *testing.B) { benchTCP(b, 128) })
	b.Run("tcp-4KiB", func(b *testing.B) { benchTCP(b, 4096) })
	clustertest.RequireFUSE(b) // the cluster launcher's checks; no mount is made
	bin := clustertest.Binary(b)
	export := b.TempDir()
	deep := filepath.Join(export, "a", "b", "c", "d", "e")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, p := range []string{filepath.Join(export, "f"), filepath.Join(deep, "f")} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cl, err := cluster.Start(context.Background(), cluster.Config{Binary: bin, Export: export,
		ServerArgs: []string{"--log-level", "warn"}})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	c := dialWire(b, cl.Addr)
	defer c.Close()
	for _, x := range []struct {
		name string
		msg  func() wire.Msg
	}{
		{"wire-ping", func() wire.Msg { return &wire.Ping{} }},
		{"wire-lookup-depth1", func() wire.Msg { return &wire.Lookup{Path: "f"} }},
		{"wire-lookup-depth6", func() wire.Msg { return &wire.Lookup{Path: "a/b/c/d/e/f"} }},
	} {
		b.Run(x.name, func(b *testing.B) {
			ctx := context.Background()
			lat := make([]float64, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if _, err := c.Call(ctx, x.msg()); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, float64(time.Since(start).Nanoseconds())/1e3)
			}
			reportP50(b, lat)
		})
	}
}

func reportP50(b *testing.B, lat []float64) {
	slices.Sort(lat)
	b.ReportMetric(quantile(lat, 0.5), "p50-µs")
	b.ReportMetric(quantile(lat, 0.9), "p90-µs")
}

// dialWire connects to a coopfs server as a client, without an agent.
func dialWire(b *testing.B, addr string) *wire.Conn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	nc.(*net.TCPConn).SetNoDelay(true)
	hs, err := wire.ClientHandshake(context.Background(), nc, wire.MustSecurity(wire.SecurityConfig{Insecure: true}), "", wire.Hello{Role: wire.RoleClient, Name: "bench-rtt"})
	if err != nil {
		b.Fatal(err)
	}
	return wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Name: "server"})
}

// benchTCP measures a request/response of size bytes each way over
// loopback TCP: one goroutine echoes, the benchmark writes and reads.
func benchTCP(b *testing.B, size int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		r := bufio.NewReader(s)
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(r, buf); err != nil {
				return
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, size)
	lat := make([]float64, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, float64(time.Since(start).Nanoseconds())/1e3)
	}
	reportP50(b, lat)
}
