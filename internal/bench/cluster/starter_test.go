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
	st.Close()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the child ended with %v, want its Pdeathsig (SIGKILL)", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child outlived its starter's Close")
	}
}
