package cluster

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestStarterTiesChildrenToItsThread: a child started from a Starter with
// Pdeathsig outlives other Starters opened and closed meanwhile (their
// threads end), and gets its signal when its own Starter is closed (its
// thread ends): it was forked from that thread and no other.
func TestStarterTiesChildrenToItsThread(t *testing.T) {
	st := NewStarter()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := st.Start(cmd); err != nil {
		st.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for range 20 {
		other := NewStarter()
		c := exec.Command("true")
		if err := other.Start(c); err != nil {
			t.Error(err)
		} else {
			c.Wait()
		}
		other.Close()
	}
	time.Sleep(100 * time.Millisecond) // let the ended threads go
	select {
	case err := <-done:
		st.Close()
		t.Fatalf("the child ended while its starter was open: %v", err)
	default:
	}
	// Close ends the starter's thread, which delivers the child's Pdeathsig,
	// except when the runtime ran the starter on the process's main thread,
	// which it never ends (it parks it): that is not checked here. Children
	// are stopped before Close; the signal is a safety net.
	st.Close()
	_ = cmd.Process.Kill()
	<-done
}
