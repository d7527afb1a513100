package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/proxy"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/server/servertest"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

const bs = 4096

var secret = []byte("proxy-test-secret-0123456789abcdef")

// serve runs an in-process server over loopback TCP on export.
func serve(t *testing.T, export string) (addr string, m *obs.Metrics) {
	t.Helper()
	return servePolicy(t, export, "none")
}

// servePolicy is serve with a coordination policy.
func servePolicy(t *testing.T, export, policy string) (addr string, m *obs.Metrics) {
	t.Helper()
	m = obs.NewMetrics()
	return servertest.Serve(t, server.Config{Export: export, BlockSize: bs, Secret: secret, Squash: server.SquashNone, Metrics: m, Policy: policy}), m
}

// run runs f until the test ends.
func run(t *testing.T, f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func security(t *testing.T) *wire.Security {
	t.Helper()
	sec, err := wire.NewSecurity(wire.SecurityConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// startProxy runs a proxy in front of upstream.
func startProxy(t *testing.T, upstream string, cfg proxy.Config) (addr string, m *obs.Metrics) {
	t.Helper()
	_, addr, m = runProxy(t, upstream, cfg, "127.0.0.1:0")
	return addr, m
}

// runProxy is startProxy listening on listen that also returns the proxy.
func runProxy(t *testing.T, upstream string, cfg proxy.Config, listen string) (p *proxy.Proxy, addr string, m *obs.Metrics) {
	t.Helper()
	cfg.Upstream, cfg.Security, cfg.Metrics = upstream, security(t), obs.NewMetrics()
	p, err := proxy.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	run(t, func(ctx context.Context) { p.Serve(ctx, ln) })
	return p, ln.Addr().String(), cfg.Metrics
}

func newAgent(t *testing.T, addr string) *agent.Agent {
	t.Helper()
	a, err := agent.New(context.Background(), agent.Config{Server: addr, Secret: secret, CacheSize: 16 << 20, ReconnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

var me = vfs.Caller{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}

func ctx() context.Context { return vfs.WithCaller(context.Background(), me) }

func write(t *testing.T, a *agent.Agent, path string, data []byte) error {
	t.Helper()
	f, _, err := a.Create(ctx(), path, syscall.O_RDWR|syscall.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Release(ctx())
	_, err = f.WriteAt(ctx(), data, 0)
	return err
}

func read(t *testing.T, a *agent.Agent, path string) []byte {
	t.Helper()
	f, attr, err := a.Open(ctx(), path, syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx())
	buf := make([]byte, attr.Size+10)
	n, err := f.ReadAt(ctx(), buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*13) + seed
	}
	return p
}

// readBytes is a process's coopfs_read_bytes_total for one layer.
func readBytes(m *obs.Metrics, layer string) float64 {
	return counter(m, obs.MetricReadBytes, map[string]string{"layer": layer})
}

// counter sums the samples of counter name whose labels include want.
func counter(m *obs.Metrics, name string, want map[string]string) float64 {
	fams, _ := m.Registry().Gather()
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			n := 0
			for _, l := range s.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
					n++
				}
			}
			if n == len(want) {
				sum += s.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestCascade: agents behind two proxies and one direct to the server;
// close-to-open both ways; a second client's read is served by the near
// proxy (counted as proxy by it and by the client) without the server.
func TestCascade(t *testing.T) {
	export := t.TempDir()
	srvAddr, srvM := serve(t, export)
	far, _ := startProxy(t, srvAddr, proxy.Config{Name: "far", Disk: proxy.DiskConfig{Dir: t.TempDir(), Size: 8 << 20, Banks: 2, Assoc: 4}})
	near, nearM := startProxy(t, far, proxy.Config{Name: "near"})
	a, b, direct := newAgent(t, near), newAgent(t, near), newAgent(t, srvAddr)

	v1 := pattern(10*bs+123, 1)
	if err := write(t, a, "f", v1); err != nil {
		t.Fatal(err)
	}
	if got := read(t, direct, "f"); !bytes.Equal(got, v1) {
		t.Fatalf("direct client read %d bytes of a write through the proxies", len(got))
	}
	if got := read(t, a, "f"); !bytes.Equal(got, v1) {
		t.Fatal("a re-read its own write wrong")
	}
	before := readBytes(srvM, obs.LayerServerDisk) + readBytes(srvM, obs.LayerServerMemory)
	if got := read(t, b, "f"); !bytes.Equal(got, v1) {
		t.Fatal("b read wrong data through the proxies")
	}
	if n := readBytes(b.Metrics(), obs.LayerProxy); n != float64(len(v1)) {
		t.Errorf("b counted %v bytes as proxy; want %d", n, len(v1))
	}
	if n := readBytes(srvM, obs.LayerServerDisk) + readBytes(srvM, obs.LayerServerMemory); n != before {
		t.Errorf("the server sent %v bytes for blocks the proxies held", n-before)
	}
	if n := readBytes(nearM, obs.LayerProxy); n < float64(len(v1)) {
		t.Errorf("the near proxy counted %v bytes of hits; want at least %d", n, len(v1))
	}
	// b holds callbacks on f (granted on its own upstream connection): the
	// direct client's change breaks them, and the break reaches b through
	// both proxies.
	v2 := pattern(3*bs, 2)
	if err := write(t, direct, "f", v2); err != nil {
		t.Fatal(err)
	}
	if n := counter(b.Metrics(), obs.MetricMessages, map[string]string{"type": wire.TCallbackBreak.String(), "dir": obs.DirIn}); n == 0 {
		t.Error("no callback break reached the client behind the proxies")
	}
	if got := read(t, b, "f"); !bytes.Equal(got, v2) {
		t.Fatalf("b behind the proxies read %d bytes after a direct client's change; want the new %d", len(got), len(v2))
	}
}

// TestReadOnly: a read-only proxy refuses changes with EROFS and serves reads.
func TestReadOnly(t *testing.T) {
	export := t.TempDir()
	if err := os.WriteFile(filepath.Join(export, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	srvAddr, _ := serve(t, export)
	p, _ := startProxy(t, srvAddr, proxy.Config{WritePolicy: cache.ReadOnly})
	a := newAgent(t, p)
	if err := write(t, a, "g", []byte("x")); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("create through a read-only proxy: %v; want EROFS", err)
	}
	if got := read(t, a, "f"); string(got) != "hello" {
		t.Fatalf("read through a read-only proxy: %q", got)
	}
}

// TestForeignHandle: a client that names a handle it did not open gets
// nothing from the proxy's cache (the upstream refuses the handle).
func TestForeignHandle(t *testing.T) {
	export := t.TempDir()
	if err := os.WriteFile(filepath.Join(export, "secret"), pattern(bs, 9), 0o600); err != nil {
		t.Fatal(err)
	}
	srvAddr, _ := serve(t, export)
	p, _ := startProxy(t, srvAddr, proxy.Config{})
	a := newAgent(t, p)
	read(t, a, "secret") // the proxy now holds its block
	_, c, err := agent.Dial(context.Background(), agent.DialConfig{Addr: p, Security: security(t), Hello: wire.Hello{Role: wire.RoleClient, Name: "mallory"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Call(context.Background(), &wire.Lookup{Path: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	at := r.(*wire.AttrReply).Attr
	for _, h := range []uint64{0, 1, 2, 3} {
		r, err := c.Call(context.Background(), &wire.ReadBlock{Handle: h, File: at.Ino, Index: 0, Version: at.Version})
		if err == nil {
			t.Fatalf("ReadBlock with handle %d never opened by this client: got %v", h, r.Type())
		}
	}
	// A handle on its own file, naming the secret file: the reply is the
	// handle's file, and the proxy's cache of the secret is untouched.
	if err := os.WriteFile(filepath.Join(export, "mine"), []byte("mallory's own"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = c.Call(context.Background(), &wire.Open{Path: "mine", Flags: syscall.O_RDONLY})
	if err != nil {
		t.Fatal(err)
	}
	h := r.(*wire.OpenReply).Handle
	r, err = c.Call(context.Background(), &wire.ReadBlock{Handle: h, File: at.Ino, Index: 0, Version: at.Version})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.(*wire.BlockReply).Data; bytes.Equal(got, pattern(bs, 9)) {
		t.Fatal("a handle on another file read the secret file's cached block")
	}
	if got := read(t, a, "secret"); !bytes.Equal(got, pattern(bs, 9)) {
		t.Fatal("the owner reads wrong data after the mismatched request")
	}
}

// TestUpstreamUnreachable: New fails with ErrUpstreamUnreachable, quickly.
func TestUpstreamUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = proxy.New(context.Background(), proxy.Config{Upstream: addr, Security: security(t), ConnectTimeout: 300 * time.Millisecond})
	if !errors.Is(err, proxy.ErrUpstreamUnreachable) {
		t.Fatalf("New with nothing upstream: %v; want ErrUpstreamUnreachable", err)
	}
}

// TestCoopUpstream: behind a server running a cooperative policy, the
// proxy (no peer listener) reads through the server even when direct
// clients hold the blocks, and is never asked to serve a peer.
func TestCoopUpstream(t *testing.T) {
	for _, policy := range []string{"directory", "hints"} {
		t.Run(policy, func(t *testing.T) {
			export := t.TempDir()
			data := pattern(6*bs+7, 5)
			if err := os.WriteFile(filepath.Join(export, "f"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			srvAddr, _ := servePolicy(t, export, policy)
			p, _ := startProxy(t, srvAddr, proxy.Config{})
			direct := newAgent(t, srvAddr)
			if got := read(t, direct, "f"); !bytes.Equal(got, data) {
				t.Fatal("direct client read wrong data")
			}
			a := newAgent(t, p)
			if got := read(t, a, "f"); !bytes.Equal(got, data) {
				t.Fatal("client behind the proxy read wrong data")
			}
			other := newAgent(t, srvAddr)
			if got := read(t, other, "f"); !bytes.Equal(got, data) {
				t.Fatal("a second direct client read wrong data")
			}
		})
	}
}

// TestWriteThroughKeepsBlocks: the whole blocks a client writes through a
// write-through proxy (and the file's last, partial one) are read back
// by another client from the proxy, without the server sending them.
func TestWriteThroughKeepsBlocks(t *testing.T) {
	srvAddr, srvM := serve(t, t.TempDir())
	p, _ := startProxy(t, srvAddr, proxy.Config{WritePolicy: cache.WriteThrough})
	a, b := newAgent(t, p), newAgent(t, p)
	data := pattern(5*bs+99, 7)
	if err := write(t, a, "g", data); err != nil {
		t.Fatal(err)
	}
	if got := read(t, b, "g"); !bytes.Equal(got, data) {
		t.Fatal("b read wrong data")
	}
	if n := readBytes(b.Metrics(), obs.LayerProxy); n != float64(len(data)) {
		t.Errorf("b read %v bytes from the proxy; want all %d written through it", n, len(data))
	}
	if n := readBytes(srvM, obs.LayerServerDisk) + readBytes(srvM, obs.LayerServerMemory); n != 0 {
		t.Errorf("the server sent %v bytes of a file written through the proxy", n)
	}
}

// locker is the agent's lock interface of an open file.
type locker interface {
	SetLock(ctx context.Context, owner uint64, flock bool, lk wire.Lock, wait bool) error
}

// TestLocksPerClient: two clients behind one proxy are two lock holders at
// the server (each has its own upstream connection); a client that goes
// away mid-session takes its locks with it.
func TestLocksPerClient(t *testing.T) {
	export := t.TempDir()
	if err := os.WriteFile(filepath.Join(export, "f"), []byte("locked"), 0o644); err != nil {
		t.Fatal(err)
	}
	srvAddr, _ := serve(t, export)
	p, _ := startProxy(t, srvAddr, proxy.Config{})
	a, b := newAgent(t, p), newAgent(t, p)
	lk := wire.Lock{Type: wire.LockWrite, End: wire.LockEOF}
	fa, _, err := a.Open(ctx(), "f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if err := fa.(locker).SetLock(ctx(), 1, true, lk, false); err != nil {
		t.Fatalf("a's lock: %v", err)
	}
	fb, _, err := b.Open(ctx(), "f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Release(ctx())
	if err := fb.(locker).SetLock(ctx(), 1, true, lk, false); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("b's conflicting lock through the same proxy: %v; want EAGAIN", err)
	}
	a.Close() // a goes away holding its lock
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := fb.(locker).SetLock(ctx(), 1, true, lk, false)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's lock after a went away: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestManyClients: eight clients behind one proxy read one file at once;
// each gets it whole, and concurrent misses of a block share one fetch
// (the server sends the file about once, never once per client).
func TestManyClients(t *testing.T) {
	export := t.TempDir()
	data := pattern(64*bs+5, 3)
	if err := os.WriteFile(filepath.Join(export, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	srvAddr, srvM := serve(t, export)
	p, _ := startProxy(t, srvAddr, proxy.Config{})
	const n = 8
	agents := make([]*agent.Agent, n)
	for i := range agents {
		agents[i] = newAgent(t, p)
	}
	errs := make(chan error, n)
	for _, a := range agents {
		go func() {
			f, attr, err := a.Open(ctx(), "f", syscall.O_RDONLY)
			if err != nil {
				errs <- err
				return
			}
			defer f.Release(ctx())
			buf := make([]byte, attr.Size)
			got, err := f.ReadAt(ctx(), buf, 0)
			if err == nil && !bytes.Equal(buf[:got], data) {
				err = errors.New("wrong data")
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if sent := readBytes(srvM, obs.LayerServerDisk) + readBytes(srvM, obs.LayerServerMemory); sent >= float64(n*len(data)/2) {
		t.Errorf("the server sent %v bytes for %d clients of a %d-byte file: the proxy did not share its fetches", sent, n, len(data))
	}
}
