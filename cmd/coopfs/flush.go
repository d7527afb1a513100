package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/block"
)

// `coopfs flush` asks a mount on its control socket (control.go): it sends
// "flush"; the mount answers with "progress FILES TOTALFILES BYTES
// TOTALBYTES" lines and ends with "done FILES BYTES" or "error MSG".

// controlSocket is the control socket of the mount at dir (an absolute,
// symlink-free path), in the user's control directory (controldir.go).
func controlSocket(dir string) string { return controlSocketIn(controlDir(), dir) }

// controlSocketIn is controlSocket with the control directory base.
func controlSocketIn(base, dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(base, hex.EncodeToString(sum[:10])+".sock")
}

// canonical returns the absolute, symlink-free form of a mountpoint path.
func canonical(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	return abs, nil
}

// flusher writes back dirty data: a write-back mount's agent or a
// write-back proxy.
type flusher interface {
	Flush(ctx context.Context, progress func(agent.Progress)) (agent.Progress, error)
}

// proxyControlKey names the flush socket of the proxy listening on addr
// (`coopfs flush --proxy ADDR`); a mountpoint is an absolute path, so the
// two never meet.
func proxyControlKey(addr string) string { return "proxy " + addr }

// serveFlushSocket serves `coopfs flush` on the unix socket path and
// flushes on SIGUSR1 (a write-back proxy's control socket).
func serveFlushSocket(ctx context.Context, a flusher, path string, log *slog.Logger) (func(), error) {
	stop, err := listenControl(path, func(c net.Conn) { serveFlushRequest(ctx, a, c) }, func() { flushOnSignal(ctx, a, log) })
	if err != nil {
		return nil, err
	}
	log.Info("write-back: `coopfs flush` and SIGUSR1 write dirty data back", "control_socket", path, "pid", os.Getpid())
	return stop, nil
}

func flushOnSignal(ctx context.Context, a flusher, log *slog.Logger) {
	log.Info("write-back: SIGUSR1: writing back dirty data")
	var last time.Time
	p, err := a.Flush(ctx, func(p agent.Progress) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			log.Info("write-back: flushing", "files", fmt.Sprintf("%d/%d", p.Files, p.TotalFiles),
				"bytes", block.Size(p.Bytes).String()+"/"+block.Size(p.TotalBytes).String())
		}
	})
	if err != nil {
		log.Warn("write-back: flush incomplete", "files", p.Files, "of", p.TotalFiles, "err", err)
		return
	}
	log.Info("write-back: flushed", "files", p.Files, "bytes", block.Size(p.Bytes).String())
}

// serveFlushRequest reads a connection's request line, which must be
// "flush", and serves it (a proxy's socket knows no other request).
func serveFlushRequest(ctx context.Context, a flusher, c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "flush" {
		fmt.Fprintf(c, "error unknown request %q: send \"flush\"\n", strings.TrimSpace(line))
		return
	}
	c.SetReadDeadline(time.Time{})
	serveFlushConn(ctx, a, c, true)
}

// serveFlushConn answers a "flush" request (its line already read).
func serveFlushConn(ctx context.Context, a flusher, c net.Conn, writeBack bool) {
	if !writeBack {
		fmt.Fprintf(c, "error this mount does not use write-back (it was mounted without --write-policy write-back): it holds no dirty data to flush\n")
		return
	}
	var mu sync.Mutex
	var last time.Time
	p, err := a.Flush(ctx, func(p agent.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) >= 100*time.Millisecond {
			last = time.Now()
			fmt.Fprintf(c, "progress %d %d %d %d\n", p.Files, p.TotalFiles, p.Bytes, p.TotalBytes)
		}
	})
	fmt.Fprintf(c, "progress %d %d %d %d\n", p.Files, p.TotalFiles, p.Bytes, p.TotalBytes)
	if err != nil {
		fmt.Fprintf(c, "error %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	fmt.Fprintf(c, "done %d %d\n", p.Files, p.Bytes)
}

// runFlush implements `coopfs flush MOUNTPOINT` and `coopfs flush --proxy ADDR`.
func runFlush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("flush", "[--quiet] MOUNTPOINT | [--quiet] --proxy HOST:PORT\n\nWrites back the dirty data of a mount made with --write-policy write-back (or of a proxy started with it, named by its --listen address), printing progress.\nSending SIGUSR1 to the mount or proxy process does the same (progress goes to its log).", stderr)
	quiet := fs.Bool("quiet", false, "print only the result")
	proxyAddr := fs.String("proxy", "", "flush the write-back proxy listening on HOST:PORT (its --listen) instead of a mount")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	want := 1
	if *proxyAddr != "" {
		want = 0
	}
	if fs.NArg() != want {
		fmt.Fprintf(stderr, "coopfs flush: want exactly one MOUNTPOINT or --proxy HOST:PORT, got %d arguments\n", fs.NArg())
		fs.Usage()
		return errUsage
	}
	var what, path, hint string
	if *proxyAddr != "" {
		what, path = "proxy "+*proxyAddr, controlSocket(proxyControlKey(*proxyAddr))
		hint = fmt.Sprintf("is `coopfs proxy --write-policy write-back --listen %s` running as this user?", *proxyAddr)
	} else {
		dir, err := canonical(fs.Arg(0))
		if err != nil {
			return err
		}
		what, path = dir, controlSocket(dir)
		hint = fmt.Sprintf("is %s mounted by `coopfs mount --write-policy write-back` as this user?", dir)
	}
	c, err := dialControlSocket(ctx, path)
	if err != nil {
		if errors.Is(err, errControlDir) {
			return err
		}
		return fmt.Errorf("no write-back mount or proxy answers at %s (%v): %s", path, err, hint)
	}
	defer c.Close()
	go func() { <-ctx.Done(); c.Close() }()
	if _, err := io.WriteString(c, "flush\n"); err != nil {
		return fmt.Errorf("flush %s: %w", what, err)
	}
	return readFlushReplies(c, what, stdout, *quiet)
}

func readFlushReplies(r io.Reader, dir string, stdout io.Writer, quiet bool) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "progress":
			var f, tf, b, tb int64
			if _, err := fmt.Sscan(rest, &f, &tf, &b, &tb); err == nil && !quiet {
				fmt.Fprintf(stdout, "flushing %s: %d/%d files, %v/%v\n", dir, f, tf, block.Size(b), block.Size(tb))
			}
		case "done":
			var f, b int64
			fmt.Sscan(rest, &f, &b)
			fmt.Fprintf(stdout, "flushed %s: %d files, %v written back\n", dir, f, block.Size(b))
			return nil
		case "error":
			return fmt.Errorf("flush %s: %s", dir, rest)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("flush %s: %w", dir, err)
	}
	return errors.New("flush " + dir + ": the mount closed the connection before finishing (did it exit?)")
}
