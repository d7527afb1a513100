package meta

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/fusefs"
	"github.com/coopfs/coopfs/internal/wire"
)

// The floor of coopfs's metadata round trip on this machine, built from
// the same parts without coopfs: a go-fuse file system, mounted with the
// coopfs mount's options (fusefs.MountNode), in a process of its own,
// whose every LOOKUP first makes one 128-byte round trip to an echo in a
// third process — plain TCP, or TLS after the wire handshake — and then
// answers with made-up attributes. An lstat of one of its names is then
// FUSE op → daemon → TCP → echo → back, as coopfs's stat-rtt is FUSE op →
// agent → wire → server → back, minus everything coopfs does besides.
// Without an echo it is go-fuse's own round trip (bindfs's, in Go); with
// a wire echo (a wire.Conn serving Ping inline, as the coopfs server does)
// the relay's round trip is a wire Call, as the agent's is.

// Environment of the relay helper process (runEcho with echoRelay).
const (
	relayMntEnv  = "COOPFS_META_RELAY_MNT"
	relayEchoEnv = "COOPFS_META_RELAY_ECHO" // HOST:PORT of the echo; "" none
	relayKindEnv = "COOPFS_META_RELAY_KIND" // the echo's kind (echoPlain, echoTLS, echoWire)
	echoRelay    = "relay"
)

// benchRelay times lstats through a relay mount whose LOOKUPs go to an
// echo of kind ("" none, echoPlain or echoTLS).
func benchRelay(b *testing.B, kind string) {
	env := []string{relayMntEnv + "=" + b.TempDir()}
	pids := map[string]int{}
	if kind != "" {
		addr, pid := startEcho(b, kind)
		env = append(env, relayEchoEnv+"="+addr, relayKindEnv+"="+kind)
		pids[roleServer] = pid
	}
	mnt, pid := startRelay(b, env)
	pids[roleMount] = pid
	timeLstats(b, mnt, pids)
}

// timeLstats times b.N lstats of f0, f1, ... in dir, one name each (the
// caller made them never seen, or seen and expired) and reports the median
// and the cost per call of pids' processes.
func timeLstats(b *testing.B, dir string, pids map[string]int) {
	lat := make([]float64, 0, b.N)
	cost := startCostProbe(pids)
	var st syscall.Stat_t
	b.ResetTimer() // b.N names, each once: not b.Loop, which runs as often as it likes
	for i := range b.N {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		start := time.Now()
		if err := syscall.Lstat(p, &st); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, float64(time.Since(start).Nanoseconds())/1e3)
	}
	b.StopTimer()
	reportP50(b, lat)
	reportCost(b, cost, len(lat))
}

// startRelay starts the relay helper and returns its mount point and pid.
func startRelay(b *testing.B, env []string) (string, int) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(append(os.Environ(), echoEnv+"="+echoRelay), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	mnt := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, relayMntEnv+"="); ok {
			mnt = v
		}
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			_ = cluster.LazyUnmount(mnt)
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		b.Fatalf("relay helper: %q %v", line, err)
	}
	return mnt, cmd.Process.Pid
}

// runRelay is the relay helper process: it mounts, says "ready", and
// serves until SIGTERM.
func runRelay() {
	mnt := os.Getenv(relayMntEnv)
	root := &relayNode{}
	if addr := os.Getenv(relayEchoEnv); addr != "" {
		rt, err := dialRelayEcho(addr, os.Getenv(relayKindEnv))
		if err != nil {
			fmt.Fprintln(os.Stderr, "relay:", err)
			os.Exit(1)
		}
		root.roundTrip = rt
	}
	ctx, stop := context.WithCancel(context.Background())
	// Entries expire at once (every lstat is a LOOKUP, as stat-rtt's
	// expired entries are), attributes last the mount's second.
	m, err := fusefs.MountNode(ctx, mnt, root, fusefs.Config{EntryTimeout: -1}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
	os.Stdout.WriteString("ready\n")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	stop()
	m.Wait()
	os.Exit(0)
}

// dialRelayEcho connects to the echo and returns one round trip over it:
// 128 bytes each way (plain TCP or TLS), or a wire Ping over a wire.Conn.
func dialRelayEcho(addr, kind string) (func() error, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	nc.(*net.TCPConn).SetNoDelay(true)
	var w io.Writer = nc
	var r io.Reader = nc
	if kind != echoPlain {
		hs, err := wire.ClientHandshake(context.Background(), nc, echoSecurity(), "", wire.Hello{Role: wire.RoleClient, Name: "bench-relay"})
		if err != nil {
			return nil, err
		}
		if kind == echoWire {
			c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Name: "echo"})
			return func() error { _, err := c.Call(context.Background(), &wire.Ping{}); return err }, nil
		}
		w, r = hs.Conn, hs.Reader
	}
	buf := make([]byte, 128)
	return func() error {
		if _, err := w.Write(buf); err != nil {
			return err
		}
		_, err := io.ReadFull(r, buf)
		return err
	}, nil
}

// relayNode is the relay's root directory: every name is a file, looked
// up with one round trip to the echo.
type relayNode struct {
	fs.Inode
	mu        sync.Mutex // one round trip at a time on the one connection
	roundTrip func() error
}

var _ = (fs.NodeLookuper)((*relayNode)(nil))

func (n *relayNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.roundTrip != nil {
		n.mu.Lock()
		err := n.roundTrip()
		n.mu.Unlock()
		if err != nil {
			return nil, syscall.EIO
		}
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	ino := h.Sum64() | 1
	out.Attr.Mode = syscall.S_IFREG | 0o644
	out.Attr.Ino = ino
	out.Attr.Nlink = 1
	return n.NewInode(ctx, &fs.Inode{}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: ino}), 0
}

// benchBindfs times lstats through bindfs (Debian's FUSE passthrough, in C)
// with its entries expiring at once, so that each is one LOOKUP.
func benchBindfs(b *testing.B) {
	if _, err := exec.LookPath("bindfs"); err != nil {
		b.Skip("bindfs is not installed (apt-get install bindfs)")
	}
	export, mnt := b.TempDir(), b.TempDir()
	for i := range b.N {
		if err := os.WriteFile(filepath.Join(export, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.Command("bindfs", "-f", "-o", "entry_timeout=0", export, mnt)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			_ = cluster.LazyUnmount(mnt)
		}
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if m, _ := cluster.IsMounted(mnt); m {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("bindfs did not mount within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	timeLstats(b, mnt, map[string]int{roleMount: cmd.Process.Pid})
}
