package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestE2EInterruptedOps: signals reaching a process while it waits on the
// mount (SIGURG, which the Go runtime sends itself for preemption, SIGCHLD,
// timers) make the kernel send FUSE_INTERRUPT. A local file system never
// fails these operations with EINTR, and an append that was carried out must
// not be reported as interrupted (the caller retries it: the data is
// appended twice). The writer's thread is sent SIGURG in a tight loop while
// it appends, makes directories and symlinks over an existing name.
func TestE2EInterruptedOps(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	m := startMount(t, srv.addr)
	f, err := os.OpenFile(m.path("log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.WriteFile(m.path("exists"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	const n = 300
	var eintr, appended, other atomic.Int64
	tid := make(chan int)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid <- syscall.Gettid()
		fd := int(f.Fd())
		for i := range n {
			switch nw, err := syscall.Write(fd, []byte("x")); {
			case errors.Is(err, syscall.EINTR):
				eintr.Add(1)
			case err == nil && nw == 1:
				appended.Add(1)
			default:
				other.Add(1)
			}
			if err := syscall.Mkdir(m.path(fmt.Sprintf("d%d", i)), 0o755); errors.Is(err, syscall.EINTR) {
				eintr.Add(1)
			}
			if err := syscall.Symlink("target", m.path("exists")); errors.Is(err, syscall.EINTR) {
				eintr.Add(1)
			}
		}
	}()
	id := <-tid
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			syscall.Tgkill(os.Getpid(), id, syscall.SIGURG)
			time.Sleep(50 * time.Microsecond)
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		close(stop)
		t.Fatal("operations under signals still running after 60s")
	}
	close(stop)
	st, err := os.Stat(m.path("log"))
	if err != nil {
		t.Fatal(err)
	}
	if eintr.Load() != 0 {
		t.Errorf("%d of %d operations failed with EINTR, want none", eintr.Load(), 3*n)
	}
	if st.Size() != appended.Load() {
		t.Errorf("file has %d bytes after %d successful 1-byte appends (%d reported EINTR, %d other errors)",
			st.Size(), appended.Load(), eintr.Load(), other.Load())
	}
}
