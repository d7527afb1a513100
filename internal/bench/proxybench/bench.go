package proxybench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/bench/testbed"
	"github.com/coopfs/coopfs/internal/obs"
)

// Config configures a run.
type Config struct {
	Coopfs  string // the coopfs binary
	Size    int64  // bytes of the file read each repetition; default 8 MiB
	Reps    int    // repetitions; default 3
	WANLink string // the server's link; default "10mbit"
	LANLink string // the proxy's and the clients' links; default "100mbit"
	Dir     string // run directory (logs, export, caches); default a new temporary one
}

func (c *Config) setDefaults() {
	if c.Size == 0 {
		c.Size = 8 << 20
	}
	if c.Reps == 0 {
		c.Reps = 3
	}
	if c.WANLink == "" {
		c.WANLink = "10mbit"
	}
	if c.LANLink == "" {
		c.LANLink = "100mbit"
	}
}

// Ports inside the hosts.
const (
	portServe    = 7000
	portProxy    = 7100
	portMetrics  = 9100 // serve's and proxy's
	portMountMet = 9101 // first mount per host
	portTCP      = 7200 // the ceilings' transfers
)

// bench is one running testbed: server, proxy, mounts.
type bench struct {
	cfg     Config
	tb      *testbed.Testbed
	creds   []string
	export  string
	serve   *testbed.Proc
	proxy   *testbed.Proc
	proxyH  *testbed.Host
	a, b, d *testbed.Host // a and b behind the proxy, d direct (d = b's host)
	http    *http.Client
}

// Run builds the testbed, runs the repetitions and returns the report.
func Run(ctx context.Context, cfg Config) (*report.Report, error) {
	cfg.setDefaults()
	if err := testbed.CheckPrereqs(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("bench proxy needs root (network namespaces, tc, FUSE mounts): run as root")
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "coopfs-bench-proxy-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
	}
	tb, err := testbed.New(ctx, testbed.Config{Clients: 3, ServerLink: cfg.WANLink, ClientLink: cfg.LANLink,
		Dir: filepath.Join(cfg.Dir, "testbed"), StopGrace: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	defer tb.Close()
	cl := tb.Clients()
	b := &bench{cfg: cfg, tb: tb, export: filepath.Join(cfg.Dir, "export"), proxyH: cl[0], a: cl[1], b: cl[2], d: cl[2]}
	b.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: cl[0].DialContext, DisableKeepAlives: true}}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	r := report.New("proxy", "coopfs bench proxy")
	r.Params["size"] = strconv.FormatInt(cfg.Size, 10)
	r.Params["wan_link"], r.Params["lan_link"], r.Params["reps"] = cfg.WANLink, cfg.LANLink, strconv.Itoa(cfg.Reps)
	for i := range cfg.Reps {
		if err := b.rep(ctx, r, i); err != nil {
			return nil, fmt.Errorf("repetition %d: %w", i+1, err)
		}
	}
	r.Get("first").Compare("wan-tcp", 0)
	r.Get("direct").Compare("wan-tcp", 0)
	r.Get("second").Compare("lan-tcp", 0)
	r.Get("warm").Compare("lan-tcp", 0)
	r.Get("client-warm").Compare("lan-tcp", 0)
	r.Finish()
	return r, nil
}

// start writes the secret, starts serve in the server host and the proxy
// (with a disk cache) in the proxy host.
func (b *bench) start(ctx context.Context) error {
	var sb [16]byte
	rand.Read(sb[:])
	secret := filepath.Join(b.cfg.Dir, "secret")
	if err := os.WriteFile(secret, []byte(hex.EncodeToString(sb[:])+"\n"), 0o600); err != nil {
		return err
	}
	b.creds = []string{"--secret-file", secret}
	if err := os.MkdirAll(b.export, 0o755); err != nil {
		return err
	}
	srv := b.tb.Server()
	argv := append([]string{b.cfg.Coopfs, "serve", "--export", b.export, "--listen", srv.AddrPort(portServe).String(),
		"--metrics", srv.AddrPort(portMetrics).String(), "--squash", "none"}, b.creds...)
	var err error
	if b.serve, err = srv.Start(ctx, argv, nil, "serve.log"); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := b.proxyH.WaitTCP(wctx, srv.AddrPort(portServe).String(), b.serve); err != nil {
		return err
	}
	return b.startProxy(ctx)
}

// startProxy (re)starts the proxy on its disk cache and waits for it.
func (b *bench) startProxy(ctx context.Context) error {
	h := b.proxyH
	argv := append([]string{b.cfg.Coopfs, "proxy", "--upstream", b.tb.Server().AddrPort(portServe).String(),
		"--listen", h.AddrPort(portProxy).String(), "--metrics", h.AddrPort(portMetrics).String(),
		"--disk-cache", filepath.Join(b.cfg.Dir, "proxy-cache"), "--disk-cache-size", "1GiB", "--name", "lan-proxy"}, b.creds...)
	var err error
	if b.proxy, err = h.Start(ctx, argv, nil, "proxy.log"); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return b.a.WaitTCP(wctx, h.AddrPort(portProxy).String(), b.proxy)
}

// mount starts a mount in host h (of the server at upstream) and waits for it.
func (b *bench) mount(ctx context.Context, h *testbed.Host, name, upstream string, extra ...string) (*testbed.Proc, string, error) {
	dir := filepath.Join(h.Dir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	argv := append([]string{b.cfg.Coopfs, "mount", "--server", upstream, "--name", h.Name + "-" + name}, b.creds...)
	argv = append(append(argv, extra...), dir)
	p, err := h.Start(ctx, argv, nil, name+".log")
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if ok, _ := cluster.IsMounted(dir); ok {
			return p, dir, nil
		}
		select {
		case <-p.Done():
			return nil, "", fmt.Errorf("mount in %s exited: %v\n%s", h.Name, p.Wait(), p.LogTail(10))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, "", fmt.Errorf("mount in %s: not mounted within 20s\n%s", h.Name, p.LogTail(10))
		}
	}
}

// serverBytes is the file data the server has sent (its read layers).
func (b *bench) serverBytes(ctx context.Context) (float64, error) {
	ss, err := obs.FetchWith(ctx, b.http, b.tb.Server().AddrPort(portMetrics).String())
	if err != nil {
		return 0, err
	}
	by := ss.SumBy("coopfs_read_bytes_total", "layer", nil)
	return by["server_memory"] + by["server_disk"], nil
}

// readMBps reads path to the end and returns MB/s.
func readMBps(path string, size int64) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	start := time.Now()
	n, err := io.Copy(io.Discard, f)
	if err != nil {
		return 0, err
	}
	if n != size {
		return 0, fmt.Errorf("read %s: %d bytes, want %d", path, n, size)
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

// tcpMBps sends size bytes over one TCP connection from host from to host
// to (the link ceiling) and returns MB/s.
func tcpMBps(ctx context.Context, from, to *testbed.Host, size int64) (float64, error) {
	ln, err := from.Listen("tcp", from.AddrPort(portTCP).String())
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.CopyN(c, zeros{}, size)
	}()
	c, err := to.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	n, err := io.Copy(io.Discard, c)
	if err == nil && n != size {
		err = fmt.Errorf("ceiling transfer: %d bytes, want %d", n, size)
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// dropCaches empties the kernel's page cache (the restarted client must
// not read the file from it).
func dropCaches() error {
	if err := exec.Command("sync").Run(); err != nil {
		return err
	}
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200)
}
