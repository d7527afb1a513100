package main

// End-to-end tests: the real coopfs binary, built once by TestMain, run as
// `coopfs serve` and `coopfs mount` subprocesses on loopback, with the tests
// working through the FUSE mounts as any program would. The harness is in
// this file; the consistency cases are in consistency_e2e_test.go and the
// bad-input cases in badinput_e2e_test.go.
//
// Every process and mount a test starts is stopped by its t.Cleanup, even
// when the test fails: mounts get SIGTERM (then a lazy fusermount3 -u and
// SIGKILL), servers SIGTERM (then SIGKILL). Mount points live under one base
// directory, which TestMain sweeps for leftover mounts before it exits; the
// children get SIGTERM if the test binary dies (Pdeathsig).
//
// The FUSE tests need root, /dev/fuse and fusermount3 and skip otherwise;
// -short skips every end-to-end test (and the build). COOPFS_E2E_BIN=PATH
// tests a prebuilt binary instead of building one.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/fusefs"
)

// e2eEnv is what TestMain prepares for the end-to-end tests.
type e2eEnv struct {
	bin      string // the coopfs binary; "" when not built (-short)
	base     string // parent of every mount point the tests create
	secret   string // the cluster secret file serve and mount get unless a test gives credentials
	buildErr error
}

var e2e e2eEnv // set once by TestMain, read-only afterwards

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if testing.Short() {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "coopfs-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		// Readable by every user: the unreadable-export case runs the
		// server as nobody.
		if err := os.Chmod(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		e2e.bin = filepath.Join(dir, "coopfs")
		e2e.base = filepath.Join(dir, "mnt")
		if err := os.Mkdir(e2e.base, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		// Readable by nobody too (the unreadable-export case).
		e2e.secret = filepath.Join(dir, "secret")
		if err := os.WriteFile(e2e.secret, []byte("e2e-cluster-secret-0123456789abcdef\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		if prebuilt := os.Getenv("COOPFS_E2E_BIN"); prebuilt != "" {
			// A binary built elsewhere (e.g. from a clean checkout while
			// the working tree is mid-edit).
			if err := exec.Command("cp", prebuilt, e2e.bin).Run(); err != nil {
				e2e.buildErr = fmt.Errorf("copy COOPFS_E2E_BIN=%s: %v", prebuilt, err)
			}
		} else if out, err := exec.Command("go", "build", "-o", e2e.bin, ".").CombinedOutput(); err != nil {
			e2e.buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
		code := m.Run()
		if left := e2eSweepMounts(e2e.base); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "e2e: mounts left behind (now detached): %v\n", left)
			if code == 0 {
				code = 1
			}
		}
		return code
	}()
	os.Exit(code)
}

// e2eSweepMounts lazily unmounts every mount under base and returns them.
func e2eSweepMounts(base string) []string {
	var left []string
	for _, mp := range e2eMountsUnder(base) {
		left = append(left, mp)
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			exec.Command("fusermount3", "-u", "-z", mp).Run()
		}
	}
	return left
}

// e2eMountsUnder lists the mount points at or under dir.
func e2eMountsUnder(dir string) []string {
	ms, _ := fusefs.MountsUnder(dir)
	return ms
}

// e2eIsMounted reports whether dir is a mount point.
func e2eIsMounted(dir string) bool {
	ok, _ := fusefs.IsMountPoint(dir)
	return ok
}

// e2eStarter runs every cmd.Start on one OS thread that never ends.
// Pdeathsig fires when the *thread* that forked a child ends, and a test that
// locks its thread and drops it (posixtest's AccessDenied, for setfsuid)
// would otherwise SIGTERM whatever mount happened to be forked from it.
var e2eStarter = func() chan func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: this thread lives as long as the test binary
		for f := range ch {
			f()
		}
	}()
	return ch
}()

// needBinary skips under -short and fails when the build failed.
func needBinary(t *testing.T) {
	t.Helper()
	if testing.Short() || e2e.bin == "" {
		t.Skip("end-to-end test: skipped with -short")
	}
	if e2e.buildErr != nil {
		t.Fatal(e2e.buildErr)
	}
}

// needFUSE skips unless FUSE mounts can be made here: root, /dev/fuse and
// fusermount3 (used for unmounting from outside).
func needFUSE(t *testing.T) {
	t.Helper()
	needBinary(t)
	if os.Geteuid() != 0 {
		t.Skip("FUSE end-to-end test: needs root (run go test as root, e.g. in CI or a VM)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("FUSE end-to-end test: /dev/fuse missing (%v): modprobe fuse", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("FUSE end-to-end test: fusermount3 missing: apt-get install fuse3")
	}
}

// e2eFreeAddr returns a loopback address with a port that was free a
// moment ago and that it never returned before in this run (the kernel may
// hand out the port it just freed again: two calls in a row could return
// one port, for a proxy's --listen and --metrics say).
func e2eFreeAddr(t *testing.T) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, seen := e2eGivenAddrs.LoadOrStore(addr, struct{}{}); !seen {
			return addr
		}
	}
}

// e2eGivenAddrs holds the addresses e2eFreeAddr returned.
var e2eGivenAddrs sync.Map

// lockedBuffer collects a process's stderr; safe to read while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// e2eProc is a running coopfs subprocess.
type e2eProc struct {
	name   string
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan struct{} // closed when the process exited
	err    error         // Wait's result, set before done is closed
}

// startProc starts coopfs with args. It does not register a cleanup: the
// callers do, knowing how the process must be stopped.
func startProc(t *testing.T, name string, args ...string) *e2eProc {
	t.Helper()
	return startProcAs(t, name, nil, args...)
}

// withCredentials gives serve, mount and proxy the e2e cluster secret unless the
// test chose credentials itself (--secret-file= gives none).
func withCredentials(args []string) []string {
	if len(args) == 0 || (args[0] != "serve" && args[0] != "mount" && args[0] != "proxy") {
		return args
	}
	for _, a := range args {
		for _, f := range []string{"--secret-file", "--tls-cert", "--insecure"} {
			if a == f || strings.HasPrefix(a, f+"=") {
				return args
			}
		}
	}
	return append([]string{args[0], "--secret-file", e2e.secret}, args[1:]...)
}

// startProcAs is startProc as another user when cred is not nil.
func startProcAs(t *testing.T, name string, cred *syscall.Credential, args ...string) *e2eProc {
	t.Helper()
	return startProcVia(t, name, cred, nil, args...)
}

// startProcVia is startProcAs run through the command line via (such as
// prlimit's) when it is not empty.
func startProcVia(t *testing.T, name string, cred *syscall.Credential, via []string, args ...string) *e2eProc {
	t.Helper()
	p := &e2eProc{name: name, done: make(chan struct{})}
	argv := append(append(slices.Clone(via), e2e.bin), withCredentials(args)...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGTERM}
	started := make(chan error, 1)
	e2eStarter <- func() { started <- p.cmd.Start() }
	if err := <-started; err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// exited reports whether the process has exited.
func (p *e2eProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit and returns its exit code, or
// -1 when it was killed by a signal; ok is false on a timeout.
func (p *e2eProc) wait(d time.Duration) (code int, ok bool) {
	select {
	case <-p.done:
	case <-time.After(d):
		return 0, false
	}
	return p.cmd.ProcessState.ExitCode(), true
}

// mustExit waits up to d for the process to exit and returns its code.
func (p *e2eProc) mustExit(t *testing.T, d time.Duration) int {
	t.Helper()
	code, ok := p.wait(d)
	if !ok {
		t.Fatalf("%s did not exit within %s; stderr:\n%s", p.name, d, p.stderr.String())
	}
	return code
}

// signal sends sig unless the process has exited.
func (p *e2eProc) signal(sig syscall.Signal) {
	if !p.exited() {
		p.cmd.Process.Signal(sig)
	}
}

// stop sends SIGTERM, waits up to grace, then kills. It reports whether the
// process exited by itself.
func (p *e2eProc) stop(grace time.Duration) bool {
	p.signal(syscall.SIGTERM)
	if _, ok := p.wait(grace); ok {
		return true
	}
	p.cmd.Process.Kill()
	<-p.done
	return false
}

// waitStderr waits up to d for s to appear in the process's stderr.
func (p *e2eProc) waitStderr(t *testing.T, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q not in stderr within %s; stderr:\n%s", p.name, s, d, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// e2eServer is a running `coopfs serve`.
type e2eServer struct {
	*e2eProc
	addr   string
	export string
}

// startServer serves export on a free loopback port with the extra flags
// and waits until it accepts connections.
func startServer(t *testing.T, export string, extra ...string) *e2eServer {
	t.Helper()
	return startServerAt(t, e2eFreeAddr(t), export, extra...)
}

// startServerAt is startServer on a given address.
func startServerAt(t *testing.T, addr, export string, extra ...string) *e2eServer {
	t.Helper()
	return startServerVia(t, nil, addr, export, extra...)
}

// startServerVia is startServerAt run through the command line via.
func startServerVia(t *testing.T, via []string, addr, export string, extra ...string) *e2eServer {
	t.Helper()
	// The tests use their mounts as root: trust it (squash is tested on its own).
	args := append([]string{"serve", "--export", export, "--listen", addr, "--squash", "none"}, extra...)
	s := &e2eServer{e2eProc: startProcVia(t, "server "+addr, nil, via, args...), addr: addr, export: export}
	t.Cleanup(func() {
		if !s.stop(5 * time.Second) {
			t.Errorf("%s did not stop on SIGTERM within 5s; killed", s.name)
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", s.name, s.stderr.String())
		}
	})
	// The server logs "serving" once it listens (a probe connection
	// would show up in its log as a rejected handshake).
	s.waitStarted(t, "msg=serving", 10*time.Second)
	return s
}

// waitStarted waits up to d for marker in the process's stderr (its log
// line saying it listens), failing the test if it exits first.
func (p *e2eProc) waitStarted(t *testing.T, marker string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.stderr.String(), marker) {
		if p.exited() {
			t.Fatalf("%s exited at start (code %d); stderr:\n%s", p.name, p.cmd.ProcessState.ExitCode(), p.stderr.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not accepting within %s; stderr:\n%s", p.name, d, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// e2eMount is a running `coopfs mount`.
type e2eMount struct {
	*e2eProc
	dir string
}

// newMountpoint creates an empty directory under the base for a mount.
func newMountpoint(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(e2e.base, strings.ReplaceAll(t.Name(), "/", "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Only rmdir: never recurse into a mount that is still there.
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove mount point: %v", err)
		}
	})
	return dir
}

// startMount mounts the server at addr on a new mount point with the extra
// flags and waits until the mount appears in /proc/self/mountinfo.
func startMount(t *testing.T, addr string, extra ...string) *e2eMount {
	t.Helper()
	return startMountAt(t, addr, newMountpoint(t), extra...)
}

// startMountAt is startMount on a given empty directory.
func startMountAt(t *testing.T, addr, dir string, extra ...string) *e2eMount {
	t.Helper()
	args := append([]string{"mount", "--server", addr}, extra...)
	args = append(args, dir)
	m := &e2eMount{e2eProc: startProc(t, "mount "+filepath.Base(dir), args...), dir: dir}
	t.Cleanup(func() { m.cleanup(t) })
	deadline := time.Now().Add(15 * time.Second)
	for !e2eIsMounted(dir) {
		if m.exited() {
			t.Fatalf("%s exited before mounting (code %d); stderr:\n%s", m.name, m.cmd.ProcessState.ExitCode(), m.stderr.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not mounted within 15s; stderr:\n%s", m.name, m.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return m
}

// cleanup unmounts and stops the mount process, whatever state it is in.
func (m *e2eMount) cleanup(t *testing.T) {
	if !m.exited() {
		m.signal(syscall.SIGTERM)
		if _, ok := m.wait(10 * time.Second); !ok {
			t.Errorf("%s did not exit within 10s of SIGTERM; detaching and killing it", m.name)
			exec.Command("fusermount3", "-u", "-z", m.dir).Run()
			m.cmd.Process.Kill()
			<-m.done
		}
	}
	if e2eIsMounted(m.dir) {
		t.Errorf("%s: %s still mounted after the process exited; detaching", m.name, m.dir)
		if err := syscall.Unmount(m.dir, syscall.MNT_DETACH); err != nil {
			exec.Command("fusermount3", "-u", "-z", m.dir).Run()
		}
	}
	if t.Failed() {
		t.Logf("%s stderr:\n%s", m.name, m.stderr.String())
	}
}

// path joins names under the mount point.
func (m *e2eMount) path(names ...string) string {
	return filepath.Join(append([]string{m.dir}, names...)...)
}

// within runs f in a goroutine and fails the test if it does not return
// within d: a file operation on a FUSE mount must never hang. The goroutine
// is left behind on a timeout (the mount's cleanup ends the operation).
func within(t *testing.T, d time.Duration, what string, f func() error) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s: still blocked after %s (hang)", what, d)
		return nil
	}
}

// wantOneLineError checks a failed command: exit code non-zero, and exactly
// one stderr line starting with prefix, which holds every string of want.
func wantOneLineError(t *testing.T, p *e2eProc, code int, prefix string, want ...string) {
	t.Helper()
	stderr := p.stderr.String()
	if code == 0 {
		t.Errorf("%s: exit code 0, want non-zero; stderr:\n%s", p.name, stderr)
	}
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%s: want exactly one %q error line, got %d; stderr:\n%s", p.name, prefix, len(lines), stderr)
	}
	for _, w := range want {
		if !strings.Contains(strings.ToLower(lines[0]), strings.ToLower(w)) {
			t.Errorf("%s: error line %q does not say %q", p.name, lines[0], w)
		}
	}
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic:") {
		t.Errorf("%s: stderr holds a panic or stack trace:\n%s", p.name, stderr)
	}
	t.Logf("%s: exit %d: %s", p.name, code, lines[0])
}

// runCmd runs an external command (cp, diff, tar) with a timeout.
func runCmd(t *testing.T, d time.Duration, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
		}
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %s: still running after %s (hang)", name, strings.Join(args, " "), d)
	}
	return out.String()
}

// TestE2EHarness checks the harness itself: a server and a mount start, the
// mount works, and stopping them leaves nothing behind.
func TestE2EHarness(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	srv := startServer(t, export)
	m := startMount(t, srv.addr)
	if err := os.WriteFile(m.path("hello"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(export, "hello"))
	if err != nil || string(got) != "hello\n" {
		t.Fatalf("export holds %q, %v; want hello", got, err)
	}
}
