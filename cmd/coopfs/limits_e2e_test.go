package main

// End-to-end cases of issue 7 point 6: one client that opens files until
// the server's limit does not stop the server serving others, and a FIFO
// in the export never blocks the server.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openUntilFailure opens files of the mount until an open fails (or n are
// open) and returns them with the error.
func openUntilFailure(t *testing.T, m *e2eMount, n int) ([]*os.File, error) {
	t.Helper()
	var fs []*os.File
	for i := 0; i < n; i++ {
		// For writing: a small file opened for reading keeps no handle
		// on the server (its open brings its data, agent/openread.go).
		f, err := os.OpenFile(m.path(fmt.Sprintf("f%03d", i)), os.O_RDWR, 0)
		if err != nil {
			return fs, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func manyFiles(t *testing.T, export string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		mustWrite(t, filepath.Join(export, fmt.Sprintf("f%03d", i)), []byte("data"))
	}
}

// stillServed checks that a client gets answers: a stat and a read.
func stillServed(t *testing.T, m *e2eMount, what string) {
	t.Helper()
	err := within(t, 20*time.Second, what, func() error {
		if _, err := os.Stat(m.path("f000")); err != nil {
			return err
		}
		b, err := os.ReadFile(m.path("f001"))
		if err == nil && string(b) != "data" {
			err = fmt.Errorf("read %q", b)
		}
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestE2EHandleCapPerClient(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	manyFiles(t, export, 100)
	srv := startServer(t, export, "--max-handles", "40")
	a := startMount(t, srv.addr, "--name", "A")
	b := startMount(t, srv.addr, "--name", "B")
	fs, err := openUntilFailure(t, a, 100)
	defer closeAll(fs)
	if !errors.Is(err, syscall.EMFILE) || len(fs) != 40 {
		t.Fatalf("A opened %d files, then %v; want 40, then EMFILE", len(fs), err)
	}
	stillServed(t, b, "B while A holds its cap")
	closeAll(fs)
	fs, err = openUntilFailure(t, a, 10)
	closeAll(fs)
	if err != nil {
		t.Fatalf("A after closing its files: %v", err)
	}
}

// startServerLimited starts `coopfs serve` under prlimit with at most
// nofile descriptors.
func startServerLimited(t *testing.T, nofile int, export string) *e2eServer {
	t.Helper()
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit missing: apt-get install util-linux")
	}
	via := []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", nofile, nofile), "--"}
	return startServerVia(t, via, e2eFreeAddr(t), export)
}

func TestE2EServerOutOfDescriptors(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	manyFiles(t, export, 200)
	srv := startServerLimited(t, 64, export)
	a := startMount(t, srv.addr, "--name", "A")
	b := startMount(t, srv.addr, "--name", "B")
	fs, err := openUntilFailure(t, a, 200)
	defer closeAll(fs)
	if err == nil {
		t.Fatalf("A opened %d files on a server limited to 64 descriptors", len(fs))
	}
	t.Logf("A opened %d files, then: %v", len(fs), err)
	if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
		t.Errorf("open past the server's descriptors: %v, want EMFILE", err)
	}
	// A new connection while the server has no descriptor left: accept(2)
	// fails with EMFILE, which must not end the server.
	if nc, err := net.DialTimeout("tcp", srv.addr, 5*time.Second); err == nil {
		defer nc.Close()
	}
	time.Sleep(200 * time.Millisecond)
	if srv.exited() {
		t.Fatalf("the server exited when a connection came in without a descriptor left; stderr:\n%s", srv.stderr.String())
	}
	// B is still answered: a stat needs no descriptor; an open fails at once
	// rather than hanging.
	if err := within(t, 20*time.Second, "stat through B", func() error {
		_, err := os.Stat(b.path("f199"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	within(t, 20*time.Second, "open through B", func() error {
		f, err := os.Open(b.path("f199"))
		if err == nil {
			f.Close()
		}
		return nil
	})
	closeAll(fs)
	fs = nil
	// close(2) does not wait for the release of A's handles to reach the
	// server (the kernel sends it after, and the mount batches them): give
	// the server a moment to close A's descriptors before B needs one.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if f, err := os.Open(b.path("f001")); !errors.Is(err, syscall.EMFILE) {
			if err == nil {
				f.Close()
			}
			break
		}
	}
	stillServed(t, b, "B after A closed its files")
	// The accept loop survived: a new client connects and is served.
	c := startMount(t, srv.addr, "--name", "C")
	stillServed(t, c, "a new client C")
	if srv.exited() {
		t.Fatal("the server exited")
	}
}

func TestE2EFIFOInExport(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	manyFiles(t, export, 2)
	if err := syscall.Mkfifo(filepath.Join(export, "fifo"), 0o666); err != nil {
		t.Skip("mkfifo:", err)
	}
	srv := startServer(t, export)
	m := startMount(t, srv.addr)
	err := within(t, 20*time.Second, "stat and open the FIFO through the mount", func() error {
		fi, err := os.Stat(m.path("fifo"))
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeNamedPipe == 0 {
			return fmt.Errorf("mode %v, want a named pipe", fi.Mode())
		}
		// O_NONBLOCK: a reader does not wait for a writer (this is the
		// client kernel's pipe; the server never opens the FIFO).
		fd, err := syscall.Open(m.path("fifo"), syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		return syscall.Close(fd)
	})
	if err != nil {
		t.Fatal(err)
	}
	stillServed(t, m, "after opening the FIFO")
	out := runCmd(t, 20*time.Second, "ls", "-l", m.dir)
	if !strings.Contains(out, "fifo") {
		t.Fatalf("ls -l of the mount: %s", out)
	}
}
