package server

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// testServer runs a server on loopback with cfg (Export filled in when empty).
func testServer(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	if cfg.Export == "" {
		cfg.Export = t.TempDir()
	}
	if cfg.Squash == "" {
		cfg.Squash = SquashNone // call sends requests as root
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

// dial connects a raw protocol client.
func dial(t *testing.T, addr string, boot uint64) *wire.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := wire.ClientHandshake(context.Background(), nc, wire.MustSecurity(wire.SecurityConfig{Insecure: true}), "", wire.Hello{Role: wire.RoleClient, Name: "test", BootID: boot})
	if err != nil {
		t.Fatal(err)
	}
	c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{})
	t.Cleanup(func() { c.Close() })
	return c
}

// dialResume connects a raw protocol client that resumes session (nil: a
// new one) and returns the session the server gave it.
func dialResume(t *testing.T, addr string, session []byte) (*wire.Conn, []byte) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := wire.ClientHandshake(context.Background(), nc, wire.MustSecurity(wire.SecurityConfig{Insecure: true}), "", wire.Hello{Role: wire.RoleClient, Name: "test", BootID: 1, Session: session})
	if err != nil {
		t.Fatal(err)
	}
	c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{})
	t.Cleanup(func() { c.Close() })
	return c, hs.Welcome.Session
}

func call(t *testing.T, c *wire.Conn, m wire.Msg) (wire.Msg, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if needsIdentity(m) {
		m = &wire.As{Msg: m} // as root, as a mount's root user sends them
	}
	return c.Call(ctx, m)
}

func TestHandleCapPerConnection(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("x"), 0o644)
	_, addr := testServer(t, Config{Export: export, Limits: Limits{MaxHandles: 50}})
	greedy, other := dial(t, addr, 1), dial(t, addr, 2)
	var opened int
	for i := 0; i < 60; i++ {
		_, err := call(t, greedy, &wire.Open{Path: "f"})
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("open %d: %v, want EMFILE", i, err)
			}
			break
		}
		opened++
	}
	if opened != 50 {
		t.Fatalf("opened %d handles, want the cap of 50", opened)
	}
	// The other client is still served, and so is the greedy one once it
	// releases a handle.
	if _, err := call(t, other, &wire.Open{Path: "f"}); err != nil {
		t.Fatalf("second client: %v", err)
	}
	if _, err := call(t, greedy, &wire.Release{Handle: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, greedy, &wire.Open{Path: "f"}); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

func TestFIFOIsNeverOpened(t *testing.T) {
	export := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(export, "fifo"), 0o666); err != nil {
		t.Skip("mkfifo:", err)
	}
	_, addr := testServer(t, Config{Export: export})
	c := dial(t, addr, 1)
	for _, flags := range []uint32{syscall.O_RDONLY, syscall.O_WRONLY, syscall.O_RDWR} {
		_, err := call(t, c, &wire.Open{Path: "fifo", Flags: flags})
		if !errors.Is(err, syscall.ENXIO) {
			t.Errorf("open fifo flags %#o: %v, want ENXIO", flags, err)
		}
	}
	if _, err := call(t, c, &wire.SetAttr{Path: "fifo", Valid: wire.SetSize}); err == nil {
		t.Error("truncate of a fifo succeeded")
	}
	if _, err := call(t, c, &wire.Lookup{Path: "fifo"}); err != nil {
		t.Errorf("lookup of the fifo: %v", err)
	}
}

func TestErrorsDoNotRevealTheExportPath(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("x"), 0o444)
	s, addr := testServer(t, Config{Export: export})
	c := dial(t, addr, 1)
	for _, m := range []wire.Msg{
		&wire.Open{Path: "missing/deeper"}, &wire.Lookup{Path: "nope"},
		&wire.Rename{Old: "nope", New: "x"}, &wire.Mkdir{Path: "f/sub", Mode: 0o755},
		&wire.ReadDir{Path: "f"}, &wire.Unlink{Path: "nope"},
	} {
		_, err := call(t, c, m)
		if err == nil {
			t.Errorf("%v succeeded", m.Type())
			continue
		}
		if strings.Contains(err.Error(), s.exportAbs) {
			t.Errorf("%v: error %q names the export's path", m.Type(), err)
		}
	}
	if got := s.scrub(&os.PathError{Op: "open", Path: filepath.Join(s.exportAbs, "a/b"), Err: syscall.ENOENT}); strings.Contains(got.Error(), s.exportAbs) || !errors.Is(got, syscall.ENOENT) {
		t.Errorf("scrub: %v", got)
	}
}

// flakyListener fails Accept with EMFILE a few times, then accepts.
type flakyListener struct {
	net.Listener
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func TestAcceptKeepsServingAfterEMFILE(t *testing.T) {
	s, err := New(Config{Export: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, &flakyListener{Listener: ln, fails: 5}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	c := dial(t, ln.Addr().String(), 1)
	if _, err := call(t, c, &wire.Ping{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve returned %v after EMFILE", err)
	default:
	}
}

func TestVersionsAreBounded(t *testing.T) {
	var changed int
	v := newVersions(1, func(uint64) { changed++ })
	v.max = 10
	seen := map[uint64]bool{}
	for ino := uint64(1); ino <= 100; ino++ {
		ver := v.observe(&syscall.Stat_t{Ino: ino, Size: 1})
		if seen[ver] {
			t.Fatalf("version %d given to two files", ver)
		}
		seen[ver] = true
		if len(v.files) > 10 {
			t.Fatalf("%d files remembered, bound 10", len(v.files))
		}
	}
	if changed != 90 {
		t.Fatalf("%d forgotten files reported as changed, want 90", changed)
	}
}

func TestOpenNeverFollowsASymlink(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("x"), 0o644)
	os.Symlink("f", filepath.Join(export, "link"))
	_, addr := testServer(t, Config{Export: export})
	c := dial(t, addr, 1)
	if _, err := call(t, c, &wire.Open{Path: "link"}); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("open of a symlink: %v, want ELOOP", err)
	}
	if _, err := call(t, c, &wire.Open{Path: "f"}); err != nil {
		t.Fatal(err)
	}
}
