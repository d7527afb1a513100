package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Proc is a process running inside a host.
type Proc struct {
	Pid  int      // the process itself (nsenter execs it), also its process group
	Host *Host    // where it runs
	Argv []string // as given to Start
	Log  string   // file holding its stdout and stderr

	cmd   *exec.Cmd
	grace time.Duration
	done  chan struct{}
	err   error // valid once done is closed
}

// Start runs argv inside the host's network namespace (mount namespace
// shared with the caller, so mounts are visible machine-wide) in its own
// process group, with env appended to the caller's environment and its
// stdout and stderr written to logfile ("" = Host.Dir()/<argv[0] base>-<n>.log,
// a relative name is taken under Host.Dir(); an existing file is never
// overwritten: "serve.log" becomes "serve.2.log", see Proc.Log). The working directory is the
// caller's. When ctx ends the process is stopped like Proc.Stop; the testbed
// stops it on teardown in any case, and the kernel kills it if the calling
// process dies.
//
// To run a shell script in a host, use argv {"sh", "-c", script}; Stop and
// teardown signal the whole process group, so background jobs go too.
func (h *Host) Start(ctx context.Context, argv []string, env []string, logfile string) (*Proc, error) {
	if len(argv) == 0 {
		return nil, errors.New("testbed: Start: empty argv")
	}
	tb := h.tb
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		return nil, ErrClosed
	}
	tb.seq++
	if logfile == "" {
		logfile = fmt.Sprintf("%s-%d.log", filepath.Base(argv[0]), tb.seq)
	}
	if !filepath.IsAbs(logfile) {
		logfile = filepath.Join(h.dir, logfile)
	}
	f, err := createLog(logfile)
	if err != nil {
		return nil, fmt.Errorf("testbed: %s: log file: %w", h.Name, err)
	}
	defer f.Close() // the child holds its own descriptor
	fmt.Fprintf(f, "## testbed %s %s %s: %s\n", h.Name, h.Addr, time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))

	cmd := h.command(argv, env)
	cmd.Stdout, cmd.Stderr = f, f
	if err := tb.startLocked(cmd); err != nil {
		return nil, fmt.Errorf("testbed: %s: start %s: %w", h.Name, argv[0], err)
	}
	p := &Proc{Pid: cmd.Process.Pid, Host: h, Argv: argv, Log: f.Name(), cmd: cmd,
		grace: tb.cfg.StopGrace, done: make(chan struct{})}
	tb.procs = append(tb.procs, p)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				_ = p.Stop()
			case <-p.done:
			}
		}()
	}
	return p, nil
}

// createLog creates name, or name with ".2", ".3", ... before its extension
// if it exists (a restarted server keeps its first log).
func createLog(name string) (*os.File, error) {
	ext := filepath.Ext(name)
	base := strings.TrimSuffix(name, ext)
	for i := 1; ; i++ {
		if i > 1 {
			name = fmt.Sprintf("%s.%d%s", base, i, ext)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, os.ErrExist) || i >= 1000 {
			return f, err
		}
	}
}

// command builds `nsenter --net=<ns> -- argv...` with the testbed marker in
// its environment, its own process group, and SIGKILL on the caller's death.
func (h *Host) command(argv []string, env []string) *exec.Cmd {
	args := append([]string{"--net=" + h.nsPath(), "--"}, argv...)
	cmd := exec.Command(h.tb.tools.nsenter, args...)
	cmd.Env = append(os.Environ(),
		envMarker+"="+h.tb.cfg.Prefix,
		envMarker+"_HOST="+h.Name,
		envMarker+"_ADDR="+h.Addr.String())
	cmd.Env = append(cmd.Env, env...)
	// Pdeathsig fires when the thread that forked the child ends: see
	// starter for why that is the process's end, not a random moment.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Output runs argv inside the host to completion and returns its stdout; on
// failure the error includes its stderr. For short commands (ss, cat, a
// counters dump); use Start for anything long-running.
func (h *Host) Output(ctx context.Context, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("testbed: Output: empty argv")
	}
	cmd := h.command(argv, nil)
	var stderr, stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	h.tb.mu.Lock()
	err := h.tb.startLocked(cmd)
	h.tb.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("testbed: %s: %s: %w", h.Name, argv[0], err)
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err = cmd.Wait()
	stop()
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	out := stdout.Bytes()
	if err != nil {
		return out, fmt.Errorf("testbed: %s: %s: %w: %s", h.Name, strings.Join(argv, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// startReq asks the starter thread to start a command.
type startReq struct {
	cmd  *exec.Cmd
	errc chan error
}

// starter starts every process of the testbed from one OS thread that lives
// until teardown. Pdeathsig (SIGKILL when the parent dies) really fires when
// the parent *thread* ends, and the Go runtime ends a thread whenever a
// goroutine exits while locked to it (as inNetns may, and as callers'
// code may): forking from an arbitrary thread could kill a child at a random
// moment. This thread stays locked, so it ends only with the process or
// after teardown.
func (tb *Testbed) starter() {
	runtime.LockOSThread() // never unlocked, see above
	for req := range tb.startc {
		req.errc <- req.cmd.Start()
	}
}

// startLocked starts cmd on the starter thread; tb.mu must be held.
func (tb *Testbed) startLocked(cmd *exec.Cmd) error {
	if tb.closed {
		return ErrClosed
	}
	errc := make(chan error, 1)
	tb.startc <- startReq{cmd, errc}
	return <-errc
}

// Signal sends sig to the process (not its group).
func (p *Proc) Signal(sig os.Signal) error {
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// Stop sends SIGTERM to the process group, SIGKILL to it after the
// testbed's StopGrace if the process has not exited, then waits and returns
// what Wait returns. Leftover members of the group are killed too.
func (p *Proc) Stop() error {
	select {
	case <-p.done:
		return p.Wait()
	default:
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
	t := time.NewTimer(p.grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		<-p.done
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL) // background jobs of a script
	return p.Wait()
}

// Wait waits for the process to exit. A non-zero exit or a death by signal
// is an error naming the host, the command and the log file.
func (p *Proc) Wait() error {
	<-p.done
	if p.err != nil {
		return fmt.Errorf("testbed: %s: %s: %w (log: %s)", p.Host.Name, p.Argv[0], p.err, p.Log)
	}
	return nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitCode returns the exit code, -1 while running or if killed by a signal.
func (p *Proc) ExitCode() int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// LogTail returns the last n lines of the process's log, for error messages.
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
