package posixtest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// errnoOf returns the errno an error wraps, or 0.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// wantErrno fails unless err wraps want.
func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if got := errnoOf(err); got != want {
		t.Errorf("%s: got error %v, want %v (%d)", what, err, want, int(want))
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	must(t, "write "+filepath.Base(path), os.WriteFile(path, data, 0o644))
}

func wantContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("read %s: %v", filepath.Base(path), err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: content %q (%d bytes), want %q (%d bytes)", filepath.Base(path), abbrev(got), len(got), abbrev(want), len(want))
	}
}

func abbrev(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

func lstat(t *testing.T, path string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	must(t, "lstat "+filepath.Base(path), syscall.Lstat(path, &st))
	return &st
}

// pattern returns n deterministic bytes that differ at every offset modulo
// 251 (a prime, so block-aligned offsets do not repeat the same bytes).
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251) ^ seed
	}
	return b
}

// asUser runs fn on a locked OS thread whose file-system uid and gid are
// uid and gid. The thread is thrown away afterwards (the goroutine exits
// while locked), so no other goroutine ever runs with those ids.
func asUser(t *testing.T, uid, gid int, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch the file-system uid")
	}
	done := make(chan any)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		defer func() { done <- recover() }()
		syscall.Setfsgid(gid)
		syscall.Setfsuid(uid)
		// setfsuid returns the previous value, so check by calling again.
		if prev, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0); int(prev) != uid {
			panic("setfsuid did not take effect")
		}
		fn()
	}()
	if p := <-done; p != nil {
		t.Fatalf("as uid %d: %v", uid, p)
	}
}

// umask returns the process umask.
func umask() uint32 {
	old := syscall.Umask(0o022)
	syscall.Umask(old)
	return uint32(old)
}
