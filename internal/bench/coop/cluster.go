package coop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bcluster "github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/testbed"
	"github.com/coopfs/coopfs/internal/obs"
)

// Ports used inside every host.
const (
	portServe         = 7000
	portPeer          = 7001
	portServerMetrics = 9100
	portMountMetrics  = 9101
	portWarmPeer      = 7002
)

// Exec says how to start the programs: Coopfs is the coopfs binary (serve,
// mount) and Worker the argv prefix of the worker subcommand (RunWorker).
type Exec struct {
	Coopfs string
	Worker []string
	Env    []string // extra environment of the workers ("K=V")
}

// clusterConfig is one testbed with a server and N mounts.
type clusterConfig struct {
	Clients      int
	Policy       string // none | directory | directory-serverlast (serve --server-rotation=false)
	ServerLink   string
	ClientLink   string
	BlockSize    string // serve --block-size, "" = default
	ServerCache  string // serve --cache-size
	ClientCache  string // mount --cache-size
	ReadAhead    int    // mount --read-ahead, 0 = default
	NoDiscard    bool
	DiscardQueue int           // mount --discard-queue (0: the default)
	ForwardTO    time.Duration // mount --forward-timeout, 0 = default
	Export       string        // exported directory (shared file system)
	Dir          string        // run directory (logs, mountpoints, secret)
}

// cluster is a running testbed with serve and the mounts.
type cluster struct {
	cfg    clusterConfig
	ex     Exec
	tb     *testbed.Testbed
	serve  *testbed.Proc
	mounts []*mount
	secret string   // the cluster secret file
	creds  []string // the credential flags every process gets
	http   *http.Client
}

type mount struct {
	host *testbed.Host
	proc *testbed.Proc
	dir  string
}

func (m *mount) metricsAddr() string { return m.host.AddrPort(portMountMetrics).String() }

// startCluster builds the testbed, starts serve and one mount per client
// and waits until every mount is live. On error everything is torn down.
func startCluster(ctx context.Context, ex Exec, cfg clusterConfig) (c *cluster, err error) {
	if err := testbed.CheckPrereqs(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the coop benchmarks need root (network namespaces, tc, FUSE mounts): run as root")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	tb, err := testbed.New(ctx, testbed.Config{
		Clients: cfg.Clients, ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink,
		Dir: cfg.Dir, StopGrace: 5 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	c = &cluster{cfg: cfg, ex: ex, tb: tb}
	built := c // c is nil after a failing return
	defer func() {
		if err != nil {
			built.close()
		}
	}()
	c.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: tb.Server().DialContext, DisableKeepAlives: true,
	}}
	var sb [16]byte
	_, _ = rand.Read(sb[:])
	c.secret = filepath.Join(tb.Dir(), "secret")
	if err := os.WriteFile(c.secret, []byte(hex.EncodeToString(sb[:])+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("secret file: %w", err)
	}
	srv := tb.Server()
	// A policy ending in -insecure runs every process with --insecure
	// (plaintext), for the side-by-side cost of TLS and digests.
	policy, insecure := strings.CutSuffix(cfg.Policy, "-insecure")
	c.creds = []string{"--secret-file", c.secret}
	if insecure {
		// Plaintext; the secret still authenticates the handshakes (an
		// --insecure server without one accepts loopback clients only).
		c.creds = append(c.creds, "--insecure")
	}
	policy, serverLast := strings.CutSuffix(policy, "-serverlast")
	policy, balanced := strings.CutSuffix(policy, "-balanced")
	argv := []string{ex.Coopfs, "serve", "--export", cfg.Export,
		"--listen", srv.AddrPort(portServe).String(), "--policy", policy,
		"--metrics", srv.AddrPort(portServerMetrics).String(),
		// The benchmark's clients run as root on machines it controls.
		"--squash", "none"}
	argv = append(argv, c.creds...)
	if serverLast {
		// directory-serverlast: the server serves only blocks no client holds.
		argv = append(argv, "--server-rotation=false")
	}
	if balanced {
		// directory-balanced: forward to the least-loaded holder.
		argv = append(argv, "--forward-choice", "balanced")
	}
	if cfg.BlockSize != "" {
		argv = append(argv, "--block-size", cfg.BlockSize)
	}
	if cfg.ServerCache != "" {
		argv = append(argv, "--cache-size", cfg.ServerCache)
	}
	c.serve, err = srv.Start(ctx, argv, nil, "serve.log")
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := srv.WaitTCP(wctx, srv.AddrPort(portServe).String(), c.serve); err != nil {
		return nil, err
	}
	for _, h := range tb.Clients() {
		m, err := c.startMount(ctx, h, "mnt", portPeer, portMountMetrics, true)
		if err != nil {
			return nil, err
		}
		c.mounts = append(c.mounts, m)
	}
	for _, m := range c.mounts {
		if err := waitMounted(wctx, m); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *cluster) startMount(ctx context.Context, h *testbed.Host, name string, peerPort, metricsPort uint16, metrics bool) (*mount, error) {
	dir := filepath.Join(h.Dir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	argv := []string{c.ex.Coopfs, "mount", "--server", c.tb.Server().AddrPort(portServe).String(),
		"--listen", h.AddrPort(peerPort).String(), "--name", h.Name + "-" + name}
	argv = append(argv, c.creds...)
	if metrics {
		argv = append(argv, "--metrics", h.AddrPort(metricsPort).String())
	}
	if c.cfg.ClientCache != "" {
		argv = append(argv, "--cache-size", c.cfg.ClientCache)
	}
	if c.cfg.ReadAhead > 0 {
		argv = append(argv, "--read-ahead", strconv.Itoa(c.cfg.ReadAhead))
	}
	if c.cfg.DiscardQueue > 0 {
		argv = append(argv, "--discard-queue", strconv.Itoa(c.cfg.DiscardQueue))
	}
	if c.cfg.NoDiscard {
		argv = append(argv, "--no-discard")
	}
	if c.cfg.ForwardTO > 0 {
		argv = append(argv, "--forward-timeout", c.cfg.ForwardTO.String())
	}
	argv = append(argv, dir)
	p, err := h.Start(ctx, argv, nil, name+".log")
	if err != nil {
		return nil, err
	}
	return &mount{host: h, proc: p, dir: dir}, nil
}

// waitMounted polls the mount table (shared by every host) for m.dir.
func waitMounted(ctx context.Context, m *mount) error {
	for {
		if ok, _ := bcluster.IsMounted(m.dir); ok {
			return nil
		}
		select {
		case <-m.proc.Done():
			return fmt.Errorf("mount in %s exited before mounting: %v\n%s", m.host.Name, m.proc.Wait(), m.proc.LogTail(10))
		case <-ctx.Done():
			return fmt.Errorf("mount in %s: not mounted: %w\n%s", m.host.Name, ctx.Err(), m.proc.LogTail(10))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// warm reads the given files once through a throw-away mount in the server
// host (unshaped loopback), so that the server's memory holds them, and
// unmounts it again; the server purges the throw-away client's directory
// entries when it disconnects.
func (c *cluster) warm(ctx context.Context, files []string) error {
	srv := c.tb.Server()
	m, err := c.startMount(ctx, srv, "warm", portWarmPeer, 0, false)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := waitMounted(wctx, m); err != nil {
		_ = m.proc.Stop()
		return err
	}
	for _, f := range files {
		fh, err := os.Open(filepath.Join(m.dir, f))
		if err != nil {
			_ = m.proc.Stop()
			return fmt.Errorf("warm-up: %w", err)
		}
		buf := make([]byte, 1<<20)
		for {
			n, err := fh.Read(buf)
			if n == 0 || err != nil {
				break
			}
		}
		fh.Close()
	}
	if err := m.proc.Stop(); err != nil {
		return fmt.Errorf("warm-up mount: %w", err)
	}
	// The server notices the disconnect asynchronously; give it a moment.
	time.Sleep(200 * time.Millisecond)
	return nil
}

// Counters is one scrape of every process: the server's and each mount's.
type Counters struct {
	Server  obs.Samples
	Clients []obs.Samples
}

func (c *cluster) fetch(ctx context.Context, addr string) (obs.Samples, error) {
	return obs.FetchWith(ctx, c.http, addr)
}

// scrape collects the server's and every live mount's counters; a mount
// that is gone (killed in the fault run) gets nil.
func (c *cluster) scrape(ctx context.Context) (Counters, error) {
	var out Counters
	var err error
	out.Server, err = c.fetch(ctx, c.tb.Server().AddrPort(portServerMetrics).String())
	if err != nil {
		return out, err
	}
	for _, m := range c.mounts {
		select {
		case <-m.proc.Done():
			out.Clients = append(out.Clients, nil)
			continue
		default:
		}
		s, err := c.fetch(ctx, m.metricsAddr())
		if err != nil {
			return out, err
		}
		out.Clients = append(out.Clients, s)
	}
	return out, nil
}

// runWorkers starts one worker per mount (args built by argsFor, given the
// client index and its mount directory and result file), waits for all and
// returns their results (nil for clients not in only; only nil = all). A worker listed in mayFail may exit with an error.
func (c *cluster) runWorkers(ctx context.Context, tag string, only []int, argsFor func(i int, m *mount) []string, mayFail map[int]bool) ([]*Result, error) {
	procs := make([]*testbed.Proc, len(c.mounts))
	files := make([]string, len(c.mounts))
	if only == nil {
		for i := range c.mounts {
			only = append(only, i)
		}
	}
	for _, i := range only {
		m := c.mounts[i]
		files[i] = filepath.Join(m.host.Dir(), fmt.Sprintf("result-%s.json", tag))
		_ = os.Remove(files[i])
		argv := append(append([]string(nil), c.ex.Worker...), "--result", files[i])
		argv = append(argv, argsFor(i, m)...)
		p, err := m.host.Start(ctx, argv, c.ex.Env, "worker-"+tag+".log")
		if err != nil {
			return nil, err
		}
		procs[i] = p
	}
	res := make([]*Result, len(c.mounts))
	var errs []error
	for i, p := range procs {
		if p == nil {
			continue
		}
		werr := p.Wait()
		if werr != nil {
			if mayFail[i] {
				continue
			}
			errs = append(errs, fmt.Errorf("%w\n%s", werr, p.LogTail(8)))
			continue
		}
		r, err := readResult(files[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res[i] = r
	}
	return res, errors.Join(errs...)
}

func (c *cluster) close() error {
	if c.tb == nil {
		return nil
	}
	return c.tb.Close()
}

// measure runs one worker per mount between two scrapes and returns the
// workers' results and the counters' growth. during, if set, runs in its
// own goroutine while the workers run (the fault run's kill).
func (c *cluster) measure(ctx context.Context, tag string, only []int, argsFor func(i int, m *mount) []string, mayFail map[int]bool, during func()) ([]*Result, Stats, error) {
	before, err := c.scrape(ctx)
	if err != nil {
		return nil, Stats{}, err
	}
	cpu0 := readCPU()
	if during != nil {
		go during()
	}
	res, werr := c.runWorkers(ctx, tag, only, argsFor, mayFail)
	cpu1 := readCPU()
	after, err := c.scrape(ctx)
	if err != nil {
		return res, Stats{}, errors.Join(werr, err)
	}
	st := statsBetween(before, after)
	st.MachineCPUBusy = busyBetween(cpu0, cpu1)
	return res, st, werr
}
