package main

// End-to-end cases of issue 7 point 3: flock and fcntl locks taken through
// one mount are seen through another, and are released when the process
// that holds them is killed; SQLite used from two clients never corrupts
// its database.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a small fcntl lock tool (a helper process
// must hold the lock: locks belong to processes). init runs before
// TestMain, so the helper never starts the test machinery.
func init() {
	if mode := os.Getenv("COOPFS_E2E_LOCK_HELPER"); mode != "" {
		os.Exit(lockHelper(mode, os.Getenv("COOPFS_E2E_LOCK_FILE")))
	}
}

// lockHelper: "hold" takes a write lock on bytes 0–99 (waiting for it),
// prints "locked" and sleeps until killed; "try" tries the same lock once
// and exits 0 if it got it, 1 if it is held elsewhere (printing F_GETLK's
// answer), 2 on another error.
func lockHelper(mode, path string) int {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 100}
	switch mode {
	case "hold":
		for {
			err = syscall.FcntlFlock(f.Fd(), syscall.F_SETLKW, &lk)
			if err != syscall.EINTR { // the Go runtime's own signals interrupt the wait
				break
			}
		}
		if err != nil {
			fmt.Println(err)
			return 2
		}
		fmt.Println("locked")
		time.Sleep(time.Hour)
		return 0
	case "wait-once":
		// One F_SETLKW that the test interrupts with signals (SIGUSR1 to
		// this very thread). Go's handlers have SA_RESTART, so the kernel
		// restarts the interrupted F_SETLKW, as on a local file system;
		// it must then get the lock once the holder is gone.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGUSR1)
		runtime.LockOSThread()
		fmt.Println("waiting", syscall.Gettid())
		err = syscall.FcntlFlock(f.Fd(), syscall.F_SETLKW, &lk)
		if err != nil {
			fmt.Println("setlkw:", err)
			return 2
		}
		fmt.Println("locked")
		time.Sleep(time.Hour)
		return 0
	case "try":
		probe := lk
		if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &probe); err != nil {
			fmt.Println("getlk:", err)
			return 2
		}
		err = syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk)
		switch err {
		case nil:
			if probe.Type != syscall.F_UNLCK {
				fmt.Println("F_GETLK reported a conflict but F_SETLK succeeded")
				return 2
			}
			return 0
		case syscall.EAGAIN, syscall.EACCES:
			fmt.Printf("held: getlk type %d start %d len %d\n", probe.Type, probe.Start, probe.Len)
			if probe.Type != syscall.F_WRLCK {
				return 2
			}
			return 1
		}
		fmt.Println(err)
		return 2
	}
	return 2
}

// lockProc is a process that holds a lock, in its own process group.
type lockProc struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

func startLockProc(t *testing.T, env []string, name string, args ...string) *lockProc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &lockProc{cmd: cmd, out: bufio.NewReader(stdout)}
	t.Cleanup(func() { p.kill() })
	return p
}

// kill SIGKILLs the process group (the holder and any child).
func (p *lockProc) kill() {
	if p.cmd.ProcessState == nil {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// waitLine waits for a line of output that says the lock is held.
func (p *lockProc) waitLine(t *testing.T, want string) {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := p.out.ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case line := <-got:
		if line != want {
			t.Fatalf("lock holder printed %q, want %q", line, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("lock holder did not print %q within 20s", want)
	}
}

// runExit runs a command and returns its exit code (-1 if it did not end
// within d).
func runExit(t *testing.T, d time.Duration, env []string, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out []byte
	var err error
	ch := make(chan struct{})
	go func() {
		out, err = cmd.CombinedOutput()
		close(ch)
	}()
	select {
	case <-ch:
	case <-time.After(d):
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
		<-ch
		return -1, string(out)
	}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		t.Fatalf("%s: %v", name, err)
	}
	return 0, string(out)
}

func TestE2EFlockAcrossClients(t *testing.T) {
	needFUSE(t)
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) missing: apt-get install util-linux")
	}
	_, a, b := twoClients(t)
	mustWrite(t, a.path("f"), []byte("x"))
	// flock -o: the flock process itself holds the lock (its child does
	// not inherit it), so killing it must release the lock.
	holder := startLockProc(t, nil, "flock", "-o", a.path("f"), "sh", "-c", "echo locked; exec sleep 3600")
	holder.waitLine(t, "locked")
	if code, out := runExit(t, 20*time.Second, nil, "flock", "-n", b.path("f"), "true"); code != 1 {
		t.Fatalf("flock -n through mount B while A holds the lock: exit %d (%s), want 1", code, out)
	}
	if code, _ := runExit(t, 20*time.Second, nil, "flock", "-n", "-s", b.path("f"), "true"); code != 1 {
		t.Fatalf("shared flock through B against A's exclusive one: exit %d, want 1", code)
	}
	// A blocked waiter through B gets the lock once A's holder is killed.
	waiter := startLockProc(t, nil, "flock", b.path("f"), "echo", "got")
	time.Sleep(300 * time.Millisecond)
	holder.kill()
	waiter.waitLine(t, "got")
	if err := waiter.cmd.Wait(); err != nil {
		t.Fatalf("waiting flock: %v", err)
	}
	// The waiter's lock goes with its file's FUSE RELEASE, which the kernel
	// sends after close(2) has returned: give it a moment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, out := runExit(t, 20*time.Second, nil, "flock", "-n", a.path("f"), "true")
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flock through A after everything was released: exit %d (%s)", code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockHelperCmd returns this test binary and the environment that runs it as
// the fcntl lock helper (TestMain's COOPFS_E2E_LOCK_HELPER) in a mode on a
// file.
func lockHelperCmd(t *testing.T) (string, func(mode, path string) []string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self, func(mode, path string) []string {
		return []string{"COOPFS_E2E_LOCK_HELPER=" + mode, "COOPFS_E2E_LOCK_FILE=" + path}
	}
}

func TestE2EFcntlLocksAcrossClients(t *testing.T) {
	needFUSE(t)
	_, a, b := twoClients(t)
	self, env := lockHelperCmd(t)
	mustWrite(t, a.path("db"), make([]byte, 200))
	holder := startLockProc(t, env("hold", a.path("db")), self)
	holder.waitLine(t, "locked")
	code, out := runExit(t, 20*time.Second, env("try", b.path("db")), self)
	if code != 1 {
		t.Fatalf("F_SETLK through mount B while a process on A holds the range: exit %d (%s), want 1 (held)", code, out)
	}
	// A second process on A conflicts too (the owner is the process).
	if code, out := runExit(t, 20*time.Second, env("try", a.path("db")), self); code != 1 {
		t.Fatalf("F_SETLK by another process on A: exit %d (%s), want 1", code, out)
	}
	holder.kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, out = runExit(t, 20*time.Second, env("try", b.path("db")), self)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock of a SIGKILLed process was not released within 10s: exit %d (%s)", code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestE2ESQLiteTwoClients(t *testing.T) {
	needFUSE(t)
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Skip("sqlite3 missing: apt-get install sqlite3")
	}
	_, a, b := twoClients(t)
	label := map[*e2eMount]string{a: "A", b: "B"}
	sql := func(m *e2eMount, stmt string) string {
		t.Helper()
		code, out := runExit(t, 60*time.Second, nil, "sqlite3", "-cmd", ".timeout 30000", m.path("t.db"), stmt)
		if code != 0 {
			t.Fatalf("sqlite3 on %s: %q: exit %d: %s", m.name, stmt, code, out)
		}
		return strings.TrimSpace(out)
	}
	sql(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT, pad BLOB);")
	// In turn: every statement from the other client than the one before.
	const turns = 40
	for i := 0; i < turns; i++ {
		m := a
		if i%2 == 1 {
			m = b
		}
		sql(m, fmt.Sprintf("INSERT INTO t(who, pad) VALUES('%s', randomblob(3000));", label[m]))
	}
	// At once: both clients insert concurrently, SQLite's locks (held by
	// the server) keep them apart.
	const each = 30
	errs := make(chan string, 2)
	for _, m := range []*e2eMount{a, b} {
		go func(m *e2eMount) {
			for i := 0; i < each; i++ {
				code, out := runExit(t, 60*time.Second, nil, "sqlite3", "-cmd", ".timeout 30000", m.path("t.db"),
					fmt.Sprintf("INSERT INTO t(who, pad) VALUES('%s-%d', randomblob(5000));", label[m], i))
				if code != 0 {
					errs <- fmt.Sprintf("%s insert %d: exit %d: %s", m.name, i, code, out)
					return
				}
			}
			errs <- ""
		}(m)
	}
	for range 2 {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
	for _, m := range []*e2eMount{a, b} {
		if got := sql(m, "PRAGMA integrity_check;"); got != "ok" {
			t.Fatalf("integrity_check through %s: %s", m.name, got)
		}
		if got := sql(m, "SELECT count(*) FROM t;"); got != strconv.Itoa(turns+2*each) {
			t.Fatalf("rows through %s: %s, want %d", m.name, got, turns+2*each)
		}
	}
}

func TestE2EFcntlWaitInterrupted(t *testing.T) {
	needFUSE(t)
	_, a, b := twoClients(t)
	self, env := lockHelperCmd(t)
	mustWrite(t, a.path("db"), make([]byte, 200))
	holder := startLockProc(t, env("hold", a.path("db")), self)
	holder.waitLine(t, "locked")
	waiter := startLockProc(t, env("wait-once", b.path("db")), self)
	line, _ := waiter.out.ReadString('\n')
	tid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "waiting "))
	if err != nil {
		t.Fatalf("waiter printed %q", line)
	}
	for i := 0; i < 3; i++ {
		time.Sleep(300 * time.Millisecond)
		if err := syscall.Tgkill(waiter.cmd.Process.Pid, tid, syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	// The interrupted waits were cancelled on the server and the restarted
	// one waits: once the holder is killed, the waiter gets the lock, and
	// a third process does not.
	holder.kill()
	waiter.waitLine(t, "locked")
	if code, out := runExit(t, 20*time.Second, env("try", a.path("db")), self); code != 1 {
		t.Fatalf("F_SETLK on A while B's waiter holds the lock: exit %d (%s), want 1", code, out)
	}
	waiter.kill()
	// flock(1) -w times out with SIGALRM (no SA_RESTART) in its blocked
	// flock(2): EINTR reaches it, the wait ends, and nothing is left
	// waiting on the server.
	mustWrite(t, a.path("f"), nil)
	fholder := startLockProc(t, nil, "flock", "-o", a.path("f"), "sh", "-c", "echo locked; exec sleep 3600")
	fholder.waitLine(t, "locked")
	if code, out := runExit(t, 20*time.Second, nil, "flock", "-w", "0.5", b.path("f"), "true"); code != 1 {
		t.Fatalf("flock -w 0.5 through B against A's lock: exit %d (%s), want 1 (timed out)", code, out)
	}
	fholder.kill()
	if code, out := runExit(t, 20*time.Second, nil, "flock", "-n", b.path("f"), "true"); code != 0 {
		t.Fatalf("flock -n through B after A's holder died: exit %d (%s)", code, out)
	}
}
