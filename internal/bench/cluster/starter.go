package cluster

import (
	"os/exec"
	"runtime"
)

// Starter starts child processes from one OS thread locked for its life.
// A child started with Pdeathsig gets its signal when the parent *thread*
// ends, not the process, and the Go runtime ends a thread when a goroutine
// locked to it exits — any thread may once have forked a child and later
// run such a goroutine (another Starter's, ended by its Close). Children
// started from a Starter's thread are signalled only when that Starter is
// closed or the process ends.
type Starter struct {
	reqs chan startReq
}

// startReq asks the starter thread to start a command.
type startReq struct {
	cmd  *exec.Cmd
	errc chan error
}

// NewStarter starts the thread.
func NewStarter() *Starter {
	s := &Starter{reqs: make(chan startReq)}
	go s.run()
	return s
}

func (s *Starter) run() {
	runtime.LockOSThread() // never unlocked: the thread ends with Close
	for req := range s.reqs {
		req.errc <- req.cmd.Start()
	}
}

// Start starts cmd from the starter thread.
func (s *Starter) Start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	s.reqs <- startReq{cmd, errc}
	return <-errc
}

// Close ends the thread, which delivers the Pdeathsig of every child it
// started that is still running — unless the runtime ran the starter on
// the process's main thread, which it never ends. Stop the children first:
// close it once they are gone.
func (s *Starter) Close() { close(s.reqs) }
