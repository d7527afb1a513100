package nscluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/testbed"
	"github.com/coopfs/coopfs/internal/obs"
)

// Ports used inside every host.
const (
	portServe   = 7000
	portPeer    = 7001
	portMetrics = 9100
)

// Config is one cluster on the testbed.
type Config struct {
	// Binary is the coopfs executable ("" = this program).
	Binary string
	// Clients is the number of client hosts, each with one mount.
	Clients int
	// ServerLink and ClientLink are tc rates ("100mbit"); "" = unshaped.
	ServerLink, ClientLink string
	// Export is the directory the server exports (required).
	Export string
	// Dir holds the testbed's host directories (logs, mountpoints); ""
	// = a new temporary directory, removed by Close unless Keep.
	Dir  string
	Keep bool
	// ServerArgs and MountArgs are extra flags of serve and every mount.
	ServerArgs, MountArgs []string
	// StartTimeout bounds the wait for each process (default 30s).
	StartTimeout time.Duration
	Logger       *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("nscluster: cannot find the coopfs binary: %w", err)
		}
		c.Binary = exe
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func (c *Config) validate() error {
	switch {
	case c.Export == "":
		return errors.New("nscluster: no export directory")
	case c.Clients < 1 || c.Clients > testbed.MaxClients:
		return fmt.Errorf("nscluster: %d clients, want 1 to %d", c.Clients, testbed.MaxClients)
	}
	return nil
}

// Unavailable says why the testbed cannot run here (root, iproute2,
// nsenter, FUSE), or returns nil.
func Unavailable() error {
	if err := testbed.CheckPrereqs(); err != nil {
		return err
	}
	if err := cluster.FUSEUnavailable(); err != nil {
		return fmt.Errorf("FUSE: %w", err)
	}
	return nil
}

// Cluster is a running server and its mounts on the testbed.
type Cluster struct {
	cfg    Config
	tb     *testbed.Testbed
	dir    string
	ownDir bool
	http   *http.Client
	// Server is the serve process; ServerAddr its listen address.
	Server     *testbed.Proc
	ServerAddr string
	// Mounts are the clients, client1 first.
	Mounts []*Mount
}

// Mount is one client host and its mount.
type Mount struct {
	Name string
	Host *testbed.Host
	Proc *testbed.Proc
	Dir  string // the mountpoint, visible to the driver
}

func (m *Mount) metricsAddr() string { return m.Host.AddrPort(portMetrics).String() }

// ErrServerStart wraps the error of a serve process that exited while
// starting (for example on a policy it does not know); the message carries
// the last lines of its log.
var ErrServerStart = errors.New("the server did not start")

// Start builds the testbed, starts serve and the mounts and waits until
// every mount is live. On error everything is torn down. Ending ctx tears
// the cluster down too.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := Unavailable(); err != nil {
		return nil, err
	}
	c = &Cluster{cfg: cfg, dir: cfg.Dir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "coopfs-nscluster-"); err != nil {
			return nil, fmt.Errorf("nscluster: run directory: %w", err)
		}
		c.ownDir = true
	}
	built := c
	defer func() {
		if err != nil {
			built.Close()
		}
	}()
	c.tb, err = testbed.New(ctx, testbed.Config{Clients: cfg.Clients, ServerLink: cfg.ServerLink,
		ClientLink: cfg.ClientLink, Dir: filepath.Join(c.dir, "hosts"), StopGrace: 5 * time.Second, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	c.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: c.tb.Server().DialContext, DisableKeepAlives: true}}
	var sb [16]byte
	_, _ = rand.Read(sb[:])
	secret := filepath.Join(c.dir, "secret")
	if err := os.WriteFile(secret, []byte(hex.EncodeToString(sb[:])+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("nscluster: secret file: %w", err)
	}
	if err := c.startServer(ctx, secret); err != nil {
		return nil, err
	}
	if err := c.startMounts(ctx, secret); err != nil {
		return nil, err
	}
	return c, nil
}

// startServer starts serve in the server host and waits for its port.
func (c *Cluster) startServer(ctx context.Context, secret string) error {
	srv := c.tb.Server()
	c.ServerAddr = srv.AddrPort(portServe).String()
	argv := append([]string{c.cfg.Binary, "serve", "--export", c.cfg.Export, "--listen", c.ServerAddr,
		"--metrics", srv.AddrPort(portMetrics).String(), "--squash", "none", "--secret-file", secret, "--log-level", "warn"},
		c.cfg.ServerArgs...)
	var err error
	if c.Server, err = srv.Start(ctx, argv, nil, "serve.log"); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	if err := srv.WaitTCP(wctx, c.ServerAddr, c.Server); err != nil {
		select {
		case <-c.Server.Done():
			return fmt.Errorf("%w: %s", ErrServerStart, lastLines(c.Server.LogTail(4)))
		default:
		}
		return err
	}
	return nil
}

// startMounts starts one mount per client host and waits until all are
// mounted.
func (c *Cluster) startMounts(ctx context.Context, secret string) error {
	for _, h := range c.tb.Clients() {
		mnt := filepath.Join(h.Dir(), "mnt")
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			return fmt.Errorf("nscluster: mountpoint: %w", err)
		}
		argv := []string{c.cfg.Binary, "mount", "--server", c.ServerAddr, "--listen", h.AddrPort(portPeer).String(),
			"--name", h.Name, "--secret-file", secret, "--metrics", h.AddrPort(portMetrics).String(), "--log-level", "warn"}
		argv = append(append(argv, c.cfg.MountArgs...), mnt)
		p, err := h.Start(ctx, argv, nil, "mount.log")
		if err != nil {
			return err
		}
		c.Mounts = append(c.Mounts, &Mount{Name: h.Name, Host: h, Proc: p, Dir: mnt})
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	for _, m := range c.Mounts {
		if err := waitMounted(wctx, m); err != nil {
			return err
		}
	}
	return nil
}

// lastLines drops the testbed's header line and joins the rest.
func lastLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "## testbed") {
			out = append(out, l)
		}
	}
	return strings.Join(out, " | ")
}

func waitMounted(ctx context.Context, m *Mount) error {
	for {
		if ok, _ := cluster.IsMounted(m.Dir); ok {
			return nil
		}
		select {
		case <-m.Proc.Done():
			return fmt.Errorf("nscluster: mount in %s exited before mounting: %v: %s", m.Name, m.Proc.Wait(), lastLines(m.Proc.LogTail(6)))
		case <-ctx.Done():
			return fmt.Errorf("nscluster: mount in %s: not mounted: %w: %s", m.Name, ctx.Err(), lastLines(m.Proc.LogTail(6)))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Dir is the run directory (host logs under Dir()/hosts).
func (c *Cluster) Dir() string { return c.dir }

// Counters are one scrape of every process.
type Counters struct {
	Server  obs.Samples
	Clients []obs.Samples
}

// Scrape collects the server's and every mount's counters.
func (c *Cluster) Scrape(ctx context.Context) (Counters, error) {
	var out Counters
	addrs := []string{c.tb.Server().AddrPort(portMetrics).String()}
	for _, m := range c.Mounts {
		addrs = append(addrs, m.metricsAddr())
	}
	res := make([]obs.Samples, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { res[i], errs[i] = c.fetch(ctx, a) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return out, err
	}
	out.Server, out.Clients = res[0], res[1:]
	return out, nil
}

func (c *Cluster) fetch(ctx context.Context, addr string) (obs.Samples, error) {
	ss, err := obs.FetchWith(ctx, c.http, addr)
	if err != nil {
		return nil, fmt.Errorf("nscluster: scrape: %w", err)
	}
	return ss, nil
}

// Close stops every process, detaches the mounts, deletes the namespaces
// and, unless Keep or Dir was given, removes the run directory (never one
// with a live mount in it). It is idempotent.
func (c *Cluster) Close() error {
	var err error
	if c.tb != nil {
		err = c.tb.Close()
	}
	if c.ownDir && !c.cfg.Keep && c.dir != "" {
		if live, _ := cluster.MountsUnder(c.dir); len(live) > 0 {
			return errors.Join(err, fmt.Errorf("nscluster: mounts left under %s: %v; not removing it", c.dir, live))
		}
		os.RemoveAll(c.dir)
		c.dir = ""
	}
	return err
}
