package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/vfs"
)

// Every mount listens on a unix socket named after its mountpoint
// (controlSocket), in a directory of the user's own, for the operator
// commands: `coopfs flush` (flush.go) and `coopfs warmup` (warmup.go). A
// connection carries one request, a line of text: "flush", or "warmup "
// followed by a JSON warmRequest. The mount answers with lines of text
// ending in "done ..." or "error MSG".

// serveControl serves the mount's control socket (and, under write-back,
// flushes on SIGUSR1, logging progress). It returns the function that
// stops both.
func serveControl(ctx context.Context, a *agent.Agent, mountDir string, writeBack bool, log *slog.Logger) (func(), error) {
	dir, err := canonical(mountDir)
	if err != nil {
		return nil, err
	}
	path := controlSocket(dir)
	var onSignal func()
	if writeBack {
		onSignal = func() { flushOnSignal(ctx, a, log) }
	}
	stop, err := listenControl(path, func(c net.Conn) { serveControlConn(ctx, a, c, dir, writeBack, log) }, onSignal)
	if err != nil {
		return nil, err
	}
	if writeBack {
		log.Info("write-back: `coopfs flush` and SIGUSR1 write dirty data back", "control_socket", path, "pid", os.Getpid())
	} else {
		log.Debug("control socket for `coopfs warmup`", "control_socket", path)
	}
	return stop, nil
}

// listenControl serves handle on the unix socket path, one goroutine per
// connection, and calls onSignal on every SIGUSR1 unless it is nil (the
// mounts' and the proxies' control sockets). The function it returns stops
// both, waits for the connections served, and removes the socket.
func listenControl(path string, handle func(net.Conn), onSignal func()) (func(), error) {
	if err := ensureControlDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	os.Remove(path) // a previous run's, left by a crash
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); handle(c) }()
		}
	}()
	sig := make(chan os.Signal, 1)
	if onSignal != nil {
		signal.Notify(sig, syscall.SIGUSR1)
	}
	done := make(chan struct{})
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-sig:
				onSignal()
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
		ln.Close()
		wg.Wait()
		os.Remove(path)
	}, nil
}

// serveControlConn reads a connection's request line and serves it.
func serveControlConn(ctx context.Context, a *agent.Agent, c net.Conn, dir string, writeBack bool, log *slog.Logger) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	line = strings.TrimSpace(line)
	kind, rest, _ := strings.Cut(line, " ")
	c.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		fmt.Fprintf(c, "error no request: %v\n", err)
	case kind == "status":
		serveStatusConn(ctx, a, c, dir, log) // status.go
	case kind == "flush":
		serveFlushConn(ctx, a, c, writeBack)
	case kind == "warmup":
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		go watchHangup(c, stop) // the command went away: stop warming
		serveWarmConn(callerCtx(ctx, c), a, c, dir, rest, log)
	default:
		fmt.Fprintf(c, "error unknown request %q: send \"flush\" or \"warmup {...}\"\n", kind)
	}
}

// watchHangup calls stop when the other end closes the connection (it
// sends nothing after its request line).
func watchHangup(c net.Conn, stop func()) {
	var b [1]byte
	c.Read(b[:])
	stop()
}

// callerCtx carries the identity of the process at the other end of a
// unix connection (SO_PEERCRED): the mount reads on its behalf as that user,
// so a warm-up fetches only what its user may read.
func callerCtx(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil || cred == nil {
		return ctx
	}
	return vfs.WithCaller(ctx, vfs.Caller{UID: cred.Uid, GID: cred.Gid, PID: uint32(cred.Pid)})
}
