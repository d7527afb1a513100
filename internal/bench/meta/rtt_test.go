package meta

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
// of `coopfs bench meta` add those. p50-µs is the median call; cli-cpu-µs,
// cli-cs and cli-pre are this process's CPU time, voluntary context
// switches and preemptions per call, srv-* the other process's (the echo or
// the coopfs server). A loaded machine changes the CPU time and the
// voluntary switches far less than the latency.
//
//	go test -run '^$' -bench RoundTrip -benchtime 20000x ./internal/bench/meta
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("tcp-128B", func(b *testing.B) { benchTCP(b, 128) })
	b.Run("tcp-4KiB", func(b *testing.B) { benchTCP(b, 4096) })
	b.Run("tcp-128B-handoffs", func(b *testing.B) { benchHandoffs(b, "") })
	b.Run("tcp-128B-2proc", func(b *testing.B) { benchTCPProc(b, echoPlain) })
	b.Run("tcp-128B-2proc-tls", func(b *testing.B) { benchTLSProc(b) })
	b.Run("tcp-128B-handoffs-2proc", func(b *testing.B) { addr, _ := startEcho(b, echoHandoffs); benchHandoffs(b, addr) })
	clustertest.RequireFUSE(b) // the cluster launcher's checks
	b.Run("bindfs-lstat", benchBindfs)
	b.Run("fuse-lstat", func(b *testing.B) { benchRelay(b, "") })
	b.Run("fuse-relay-tcp-lstat", func(b *testing.B) { benchRelay(b, echoPlain) })
	b.Run("fuse-relay-tls-lstat", func(b *testing.B) { benchRelay(b, echoTLS) })
	b.Run("fuse-relay-wire-lstat", func(b *testing.B) { benchRelay(b, echoWire) })
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
	for _, insecure := range []bool{false, true} {
		cl, err := cluster.Start(context.Background(), cluster.Config{Binary: bin, Export: export,
			Insecure: insecure, ServerArgs: []string{"--log-level", "warn"}})
		if err != nil {
			b.Fatal(err)
		}
		sec := wire.MustSecurity(wire.SecurityConfig{Secret: cl.Secret, Insecure: insecure})
		c := dialWire(b, cl.Addr, sec)
		suffix := ""
		if insecure {
			suffix = "-insecure"
		}
		benchWireCalls(b, c, cl.Server.Pid, suffix)
		c.Close()
		cl.Close()
		b.Run("coopfs-lstat"+suffix, func(b *testing.B) { benchCoopfsLstat(b, bin, insecure) })
	}
}

// benchCoopfsLstat times lstats through a coopfs mount of names it has
// never seen (created in the export before the mount), each one Lookup
// message to the server: stat-rtt's round trip, FUSE op → agent → wire →
// server → back, side by side with the floors above.
func benchCoopfsLstat(b *testing.B, bin string, insecure bool) {
	export := b.TempDir()
	dir := filepath.Join(export, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cl, err := cluster.Start(context.Background(), cluster.Config{Binary: bin, Export: export, Clients: 1,
		Insecure: insecure, ServerArgs: []string{"--log-level", "warn"}, MountArgs: []string{"--log-level", "warn"}})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	timeLstats(b, filepath.Join(cl.Mountpoints()[0], "d"), map[string]int{roleServer: cl.Server.Pid, roleMount: cl.Clients[0].Pid})
}

// benchWireCalls times wire calls to a coopfs server (process pid) over c.
func benchWireCalls(b *testing.B, c *wire.Conn, pid int, suffix string) {
	for _, x := range []struct {
		name string
		msg  func() wire.Msg
	}{
		{"wire-ping", func() wire.Msg { return &wire.Ping{} }},
		{"wire-lookup-depth1", func() wire.Msg { return &wire.Lookup{Path: "f"} }},
		{"wire-lookup-depth6", func() wire.Msg { return &wire.Lookup{Path: "a/b/c/d/e/f"} }},
	} {
		b.Run(x.name+suffix, func(b *testing.B) {
			ctx := context.Background()
			lat := make([]float64, 0, b.N)
			cost := startCostProbe(map[string]int{roleServer: pid})
			for b.Loop() {
				start := time.Now()
				if _, err := c.Call(ctx, x.msg()); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, float64(time.Since(start).Nanoseconds())/1e3)
			}
			reportP50(b, lat)
			reportCost(b, cost, len(lat))
		})
	}
}

func reportP50(b *testing.B, lat []float64) {
	slices.Sort(lat)
	b.ReportMetric(quantile(lat, 0.5), "p50-µs")
	b.ReportMetric(quantile(lat, 0.9), "p90-µs")
}

// reportCost reports the CPU time and context switches per call of this
// process (cli-) and of the other one (srv-), if the probe has it.
func reportCost(b *testing.B, p *costProbe, calls int) {
	c := p.perCall(calls)
	for role, prefix := range map[string]string{callerRole: "cli-", roleServer: "srv-", roleMount: "fuse-"} {
		if x, ok := c[role]; ok {
			b.ReportMetric(x.CPUMicros, prefix+"cpu-µs")
			b.ReportMetric(x.Switches, prefix+"cs")
			b.ReportMetric(x.Preempted, prefix+"pre")
		}
	}
}

// dialWire connects to a coopfs server as a client, without an agent.
func dialWire(b *testing.B, addr string, sec *wire.Security) *wire.Conn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	nc.(*net.TCPConn).SetNoDelay(true)
	hs, err := wire.ClientHandshake(context.Background(), nc, sec, "", wire.Hello{Role: wire.RoleClient, Name: "bench-rtt"})
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
	go servePlain(ln, size)
	benchTCPAt(b, ln.Addr().String(), size)
}

// benchTCPProc is benchTCP against an echo server in another process.
func benchTCPProc(b *testing.B, kind string) {
	addr, pid := startEcho(b, kind)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	echoCalls(b, c, c, 128, pid)
}

func benchTCPAt(b *testing.B, addr string, size int) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	echoCalls(b, c, c, size, 0)
}

// echoCalls times size-byte exchanges: a write to w, a full read from r;
// with pid, the cost of that process too.
func echoCalls(b *testing.B, w io.Writer, r io.Reader, size, pid int) {
	buf := make([]byte, size)
	lat := make([]float64, 0, b.N)
	pids := map[string]int{}
	if pid != 0 {
		pids[roleServer] = pid
	}
	cost := startCostProbe(pids)
	for b.Loop() {
		start := time.Now()
		if _, err := w.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, float64(time.Since(start).Nanoseconds())/1e3)
	}
	reportP50(b, lat)
	reportCost(b, cost, len(lat))
}

// benchTLSProc is benchTCPProc over coopfs's TLS: both ends make the
// wire handshake (TLS 1.3, the cluster secret) and then exchange 128-byte
// records, without wire's framing and goroutines.
func benchTLSProc(b *testing.B) {
	addr, pid := startEcho(b, echoTLS)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetNoDelay(true)
	hs, err := wire.ClientHandshake(context.Background(), nc, echoSecurity(), "", wire.Hello{Role: wire.RoleClient, Name: "bench-echo"})
	if err != nil {
		b.Fatal(err)
	}
	echoCalls(b, hs.Conn, hs.Reader, 128, pid)
}

// echoSecret is the TLS echo's cluster secret (a benchmark's, not a secret).
const echoSecret = "bench-meta-echo-secret"

func echoSecurity() *wire.Security {
	return wire.MustSecurity(wire.SecurityConfig{Secret: []byte(echoSecret)})
}

// serveTLS echoes 128-byte messages of one connection after the wire
// handshake, from one goroutine; with wireConn it serves wire Pings on a
// wire.Conn instead, inline on its read loop as the coopfs server does.
func serveTLS(ln net.Listener, wireConn bool) {
	nc, err := ln.Accept()
	if err != nil {
		return
	}
	defer nc.Close()
	hs, err := wire.ServerHandshake(nc, echoSecurity(), wire.HelloReply{BlockSize: 4096, Policy: "none"},
		func(*wire.Handshake) (wire.Welcome, error) { return wire.Welcome{ClientID: 1}, nil })
	if err != nil {
		return
	}
	if wireConn {
		all := func(wire.Msg) bool { return true }
		c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Inline: all, InlineQuick: all,
			Handler: wire.HandlerFunc(func(context.Context, *wire.Conn, wire.Msg) (wire.Msg, error) { return &wire.OK{}, nil })})
		<-c.Done()
		return
	}
	buf := make([]byte, 128)
	for {
		if _, err := io.ReadFull(hs.Reader, buf); err != nil {
			return
		}
		if _, err := hs.Conn.Write(buf); err != nil {
			return
		}
	}
}

// benchHandoffs is benchTCP's 128-byte exchange with the goroutine
// structure of a wire.Conn round trip and nothing else: the caller hands
// the frame to a writer goroutine and waits for its "written" signal; the
// echo side reads in a reader goroutine, starts a goroutine per request,
// which hands the reply to its writer goroutine; the caller's reader
// goroutine delivers the reply over a channel. The difference to
// tcp-128B is the cost of those hand-offs.
// If addr is "", the echo side runs in this process.
func benchHandoffs(b *testing.B, addr string) {
	const size = 128
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		go serveHandoffs(ln, size)
		addr = ln.Addr().String()
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	q := make(chan frame, 64)
	defer close(q)
	go writer(c, q)
	replies := make(chan []byte, 1)
	go func() {
		r := bufio.NewReader(c)
		for {
			buf := make([]byte, size)
			if _, err := io.ReadFull(r, buf); err != nil {
				close(replies)
				return
			}
			replies <- buf
		}
	}()
	lat := make([]float64, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if err := send(q, make([]byte, size)); err != nil {
			b.Fatal(err)
		}
		if _, ok := <-replies; !ok {
			b.Fatal("connection closed")
		}
		lat = append(lat, float64(time.Since(start).Nanoseconds())/1e3)
	}
	reportP50(b, lat)
}

// frame is a write handed to a writer goroutine.
type frame struct {
	p    []byte
	done chan error
}

func writer(c net.Conn, q chan frame) {
	for f := range q {
		_, err := c.Write(f.p)
		f.done <- err
	}
}

func send(q chan frame, p []byte) error {
	f := frame{p: p, done: make(chan error, 1)}
	q <- f
	return <-f.done
}

// servePlain echoes size-byte messages of one connection from one goroutine.
func servePlain(ln net.Listener, size int) {
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
}

// serveHandoffs echoes like a wire.Conn serves: a reader goroutine, a
// goroutine per request, a writer goroutine.
func serveHandoffs(ln net.Listener, size int) {
	s, err := ln.Accept()
	if err != nil {
		return
	}
	defer s.Close()
	q := make(chan frame, 64)
	defer close(q)
	go writer(s, q)
	r := bufio.NewReader(s)
	for {
		buf := make([]byte, size)
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		go func() { _ = send(q, buf) }()
	}
}

// Echo kinds of the helper process.
const (
	echoEnv      = "COOPFS_META_ECHO"
	echoPlain    = "plain"
	echoTLS      = "tls"
	echoWire     = "wire"
	echoHandoffs = "handoffs"
)

// runEcho is the helper process (the test binary with echoEnv set): it
// prints its address, serves one connection and exits.
func runEcho(kind string) {
	if kind == echoRelay {
		runRelay() // a FUSE daemon, not an echo (relay_test.go)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(1)
	}
	os.Stdout.WriteString(ln.Addr().String() + "\n")
	switch kind {
	case echoHandoffs:
		serveHandoffs(ln, 128)
	case echoTLS, echoWire:
		serveTLS(ln, kind == echoWire)
	default:
		servePlain(ln, 128)
	}
	os.Exit(0)
}

// startEcho starts the helper process and returns its address and pid.
func startEcho(b *testing.B, kind string) (string, int) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), echoEnv+"="+kind)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(addr), cmd.Process.Pid
}
