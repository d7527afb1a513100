package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/syslog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// The mount daemon is `coopfs mount` started by the helper in a session of
// its own. Until it is mounted, whatever it writes to stderr also goes to
// the helper through a pipe (fd 3), so that a failure reaches the person or
// unit that ran mount(8); its log goes to syslog (journald reads /dev/log)
// or to log_file= for its whole life.

// Environment of the daemon: where to log.
const daemonLogEnv = "COOPFS_MOUNTD_LOG"

// startMountDaemon starts the daemon with `coopfs mount` arguments args and
// waits until it is mounted (READY=1 on a notify socket of the helper's)
// or has ended, whose last line of output is then the error.
func startMountDaemon(args []string, h helperOptions) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to start the mount daemon: %w", err)
	}
	dir, err := os.MkdirTemp("", "coopfs-mount-")
	if err != nil {
		return fmt.Errorf("notify socket: %w", err)
	}
	defer os.RemoveAll(dir)
	sockPath := filepath.Join(dir, "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify socket: %w", err)
	}
	defer notify.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe to the mount daemon: %w", err)
	}
	defer pr.Close()
	cmd := &exec.Cmd{Path: self, Args: append([]string{daemonName, "mount"}, args...),
		Env:         append(os.Environ(), "NOTIFY_SOCKET="+sockPath, daemonLogEnv+"="+h.logFile),
		ExtraFiles:  []*os.File{pw},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}} // no terminal, no signal from the helper's session
	if err := cmd.Start(); err != nil {
		pw.Close()
		return fmt.Errorf("start the mount daemon: %w", err)
	}
	pw.Close()
	lines := make(chan string, 1)
	go func() { lines <- lastLine(pr) }()
	ready := make(chan struct{})
	go func() {
		if waitReady(notify) {
			close(ready)
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ready:
		cmd.Process.Release()
		return nil
	case werr := <-exited:
		line := <-lines
		line = strings.TrimPrefix(line, "coopfs mount: ")
		if line == "" {
			line = fmt.Sprintf("the mount daemon ended before mounting (%v)", werr)
		}
		return fmt.Errorf("%s", line)
	}
}

// waitReady reads datagrams until one says READY=1; false when the socket
// is closed first.
func waitReady(c *net.UnixConn) bool {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return false
		}
		for l := range strings.SplitSeq(string(buf[:n]), "\n") {
			if l == "READY=1" {
				return true
			}
		}
	}
}

// lastLine returns the last non-empty line read from r until its end.
func lastLine(r io.Reader) string {
	var last string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}

// runMountDaemon runs `coopfs mount` (args) with stderr going to the log
// and, until the helper goes away, to the helper's pipe.
func runMountDaemon(args []string) int {
	logw, err := openDaemonLog(os.Getenv(daemonLogEnv), args)
	helper := os.NewFile(3, "helper")
	tee := &helperTee{log: logw, helper: helper}
	if err != nil {
		fmt.Fprintf(tee, "coopfs mount: %v\n", err)
		return 1
	}
	defer logw.Close()
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, io.Discard, tee)
}

// openDaemonLog opens the daemon's log: the file path if given, else
// syslog when /dev/log is there, else /var/log/coopfs/mount-DIR.log.
func openDaemonLog(path string, args []string) (io.WriteCloser, error) {
	if path == "" {
		if w, err := syslog.New(syslog.LOG_DAEMON|syslog.LOG_INFO, "coopfs-mount"); err == nil {
			return w, nil
		}
		dir := strings.Trim(filepath.Clean(args[len(args)-1]), "/")
		path = filepath.Join("/var/log/coopfs", "mount-"+strings.ReplaceAll(dir, "/", "-")+".log")
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("log directory: %w (give log_file=PATH)", err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("log_file: %w", err)
	}
	return f, nil
}

// helperTee writes to the log and to the helper's pipe until a write to
// the pipe fails (the helper has exited once the mount was up).
type helperTee struct {
	mu     sync.Mutex
	log    io.Writer
	helper *os.File
}

func (t *helperTee) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.helper != nil {
		if _, err := t.helper.Write(p); err != nil {
			t.helper.Close()
			t.helper = nil
		}
	}
	if t.log == nil {
		return len(p), nil
	}
	return t.log.Write(p)
}
