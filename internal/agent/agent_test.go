package agent_test

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

	"github.com/prometheus/common/expfmt"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/vfs"
)

// cluster is an in-process server over real loopback TCP.
type cluster struct {
	export string
	addr   string
	srv    *server.Server
	cancel context.CancelFunc
	done   chan error
}

func startServer(t *testing.T, export, addr string, secret []byte, bs int) *cluster {
	t.Helper()
	srv, err := server.New(server.Config{Export: export, BlockSize: bs, Secret: secret, Squash: server.SquashNone})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := server.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &cluster{export: export, addr: ln.Addr().String(), srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(c.stop)
	return c
}

func (c *cluster) stop() {
	c.cancel()
	<-c.done
	c.done <- nil // make stop idempotent
}

func newAgent(t *testing.T, addr string, secret []byte) *agent.Agent {
	t.Helper()
	a, err := agent.New(context.Background(), agent.Config{Server: addr, Secret: secret,
		CacheSize: 64 << 20, ReconnectTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

var root = vfs.Caller{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}

// asRoot is a context whose calls are made as the test's own user.
func asRoot() context.Context { return vfs.WithCaller(context.Background(), root) }

func writeFile(t *testing.T, a *agent.Agent, path string, data []byte) {
	t.Helper()
	ctx := asRoot()
	f, _, err := a.Create(ctx, path, syscall.O_RDWR|syscall.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, a *agent.Agent, path string) ([]byte, bool) {
	t.Helper()
	ctx := asRoot()
	f, attr, err := a.Open(ctx, path, syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	buf := make([]byte, attr.Size+100)
	n, err := f.ReadAt(ctx, buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n], f.KeepCache()
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) + seed
	}
	return p
}

func TestCloseToOpenAcrossClients(t *testing.T) {
	c := startServer(t, t.TempDir(), "127.0.0.1:0", nil, 4096)
	a, b := newAgent(t, c.addr, nil), newAgent(t, c.addr, nil)
	v1 := pattern(10000, 1)
	writeFile(t, a, "f", v1)
	if got, _ := readFile(t, b, "f"); !bytes.Equal(got, v1) {
		t.Fatalf("B read %d bytes, want v1", len(got))
	}
	if _, keep := readFile(t, b, "f"); !keep {
		t.Error("re-open of an unchanged file should keep the page cache")
	}
	v2 := pattern(7000, 2)
	writeFile(t, a, "f", v2)
	got, keep := readFile(t, b, "f")
	if !bytes.Equal(got, v2) {
		t.Fatalf("B read stale data after A's close: %d bytes", len(got))
	}
	if keep {
		t.Error("open after a change must drop the page cache")
	}
	// A change made directly in the export directory is a new version too.
	v3 := pattern(5000, 3)
	if err := os.WriteFile(filepath.Join(c.export, "f"), v3, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := readFile(t, b, "f"); !bytes.Equal(got, v3) {
		t.Fatalf("B did not see the change made in the export: %d bytes", len(got))
	}
}

func TestErrnos(t *testing.T) {
	c := startServer(t, t.TempDir(), "127.0.0.1:0", nil, 4096)
	a := newAgent(t, c.addr, nil)
	ctx := asRoot()
	if _, err := a.Lookup(ctx, "missing"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("lookup missing: %v", err)
	}
	if _, err := a.Mkdir(ctx, "d", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Mkdir(ctx, "d", 0o755); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("mkdir twice: %v", err)
	}
	writeFile(t, a, "d/x", []byte("x"))
	if err := a.Rmdir(ctx, "d"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Errorf("rmdir non-empty: %v", err)
	}
	if err := a.Unlink(ctx, "d"); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("unlink dir: %v", err)
	}
	if err := a.Rmdir(ctx, "d/x"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("rmdir file: %v", err)
	}
	if _, err := a.Lookup(ctx, "../etc"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("path leaving the export: %v", err)
	}
	if _, _, err := a.Create(ctx, "d/x", syscall.O_RDWR|syscall.O_EXCL, 0o644); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("O_EXCL create of existing: %v", err)
	}
	if err := a.Rename(ctx, "d/x", "d/y", 0); err != nil {
		t.Fatal(err)
	}
	writeFile(t, a, "d/z", []byte("z"))
	if err := a.Rename(ctx, "d/y", "d/z", 1 /* RENAME_NOREPLACE */); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("rename noreplace: %v", err)
	}
	ents, err := a.ReadDir(ctx, "d")
	if err != nil || len(ents) != 2 {
		t.Errorf("readdir: %v %v", ents, err)
	}
}

func TestServerRestartUnderClient(t *testing.T) {
	export := t.TempDir()
	c := startServer(t, export, "127.0.0.1:0", nil, 4096)
	a := newAgent(t, c.addr, nil)
	data := pattern(20000, 9)
	writeFile(t, a, "f", data)
	ctx := asRoot()
	f, _, err := a.Open(ctx, "f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	c.stop()
	c2 := startServer(t, export, c.addr, nil, 4096)
	_ = c2
	buf := make([]byte, len(data))
	n, err := f.ReadAt(ctx, buf, 0)
	if err != nil || !bytes.Equal(buf[:n], data) {
		t.Fatalf("read through an open file after a server restart: n=%d err=%v", n, err)
	}
}

func TestUnreachableAndWrongSecret(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err := agent.New(context.Background(), agent.Config{Server: addr, ReconnectTimeout: 300 * time.Millisecond})
	if !errors.Is(err, agent.ErrUnreachable) {
		t.Errorf("unreachable server: %v", err)
	}
	c := startServer(t, t.TempDir(), "127.0.0.1:0", []byte("right"), 4096)
	_, err = agent.New(context.Background(), agent.Config{Server: c.addr, Secret: []byte("wrong"), ReconnectTimeout: time.Second})
	if err == nil {
		t.Fatal("wrong secret accepted")
	}
}

func TestConcurrentReadersOneFile(t *testing.T) {
	c := startServer(t, t.TempDir(), "127.0.0.1:0", nil, 4096)
	data := pattern(1<<20+123, 5)
	if err := os.WriteFile(filepath.Join(c.export, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, c.addr, nil)
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			ctx := asRoot()
			f, _, err := a.Open(ctx, "big", syscall.O_RDONLY)
			if err != nil {
				errs <- err
				return
			}
			defer f.Release(ctx)
			buf := make([]byte, 64<<10)
			var got []byte
			for off := int64(0); ; {
				n, err := f.ReadAt(ctx, buf, off)
				if err != nil {
					errs <- err
					return
				}
				if n == 0 {
					break
				}
				got = append(got, buf[:n]...)
				off += int64(n)
			}
			if !bytes.Equal(got, data) {
				errs <- errors.New("a reader got different bytes")
				return
			}
			errs <- nil
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func scrape(t *testing.T, m *obs.Metrics) obs.Samples {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		expfmt.MetricFamilyToText(&buf, mf)
	}
	ss, err := obs.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}
