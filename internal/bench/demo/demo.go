package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/nscluster"
	"github.com/coopfs/coopfs/internal/bench/workload"
	"github.com/coopfs/coopfs/internal/obs"
)

// Defaults of Config.
const (
	DefaultClients  = 3
	DefaultFiles    = 2
	DefaultFileSize = 256 << 20
	DefaultPolicy   = "directory"
)

// Config is one demo run.
type Config struct {
	Clients  int   // FUSE clients (or in-process clients without FUSE)
	Files    int   // files in the data set; every client reads all of them
	FileSize int64 // bytes per file
	// Policy is the server's coordination policy: "directory" (clients
	// serve each other's misses, the default) or "none".
	Policy string
	// Policies, ServerLink and ClientLink are the testbed mode's: the
	// policies run side by side (default none, directory, hints) and the
	// tc rates of the links (default 100mbit each).
	Policies               []string
	ServerLink, ClientLink string
	// Loopback runs the loopback demo even where the testbed could run.
	Loopback bool
	// Keep leaves the run directory (data set, logs) in place.
	Keep bool
	// ForceLibrary runs the client-library variant even where FUSE works.
	ForceLibrary bool
	// Binary and Env are passed to the cluster (Binary "" = this program).
	Binary string
	Env    []string
	// Progress receives progress lines for the longer phases (nil: none).
	Progress io.Writer
	Logger   *slog.Logger

	onReading func() // test hook: called when the readers start
}

func (c *Config) setDefaults() {
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Files == 0 {
		c.Files = DefaultFiles
	}
	if c.FileSize == 0 {
		c.FileSize = DefaultFileSize
	}
	if c.Policy == "" {
		c.Policy = DefaultPolicy
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	switch {
	case c.Clients < 1 || c.Clients > 64:
		return fmt.Errorf("--clients %d: want 1 to 64", c.Clients)
	case c.Files < 1 || c.Files > 1000:
		return fmt.Errorf("--files %d: want 1 to 1000", c.Files)
	case c.FileSize < 1:
		return fmt.Errorf("--file-size %d: want at least one byte", c.FileSize)
	case c.Policy != "none" && c.Policy != "directory":
		return fmt.Errorf("--policy %q: want none or directory", c.Policy)
	}
	return nil
}

// Result is a demo's outcome: a testbed run (Hosts) or a loopback run
// (Loopback, with Fallback saying why the testbed was not used).
type Result struct {
	Hosts    *HostsReport `json:"hosts,omitempty"`
	Loopback *Report      `json:"loopback,omitempty"`
	Fallback string       `json:"fallback,omitempty"`
}

// Verified reports whether every client read every byte right.
func (r *Result) Verified() bool {
	if r.Hosts != nil {
		return r.Hosts.Verified()
	}
	return r.Loopback != nil && r.Loopback.Verified()
}

// RunAuto runs the testbed demo where root and network namespaces are
// available (clients as hosts, a shaped server link, the policies side by
// side) and the loopback demo (Run) elsewhere, saying why in one line.
func RunAuto(ctx context.Context, cfg Config) (*Result, error) {
	res := &Result{}
	if err := cfg.validateHosts(); err != nil {
		return nil, err
	}
	why := ""
	if cfg.Loopback {
		why = "asked for (--loopback)"
	} else if err := nscluster.Unavailable(); err != nil {
		why = err.Error()
	}
	if why == "" {
		cfg.hostDefaults()
		cfg.setDefaults()
		if err := cfg.validate(); err != nil {
			return nil, err
		}
		h, err := runHosts(ctx, cfg)
		res.Hosts = h
		return res, err
	}
	res.Fallback = why
	if !cfg.Loopback {
		fmt.Fprintf(cfg.progress(), "the testbed (clients as hosts on shaped links) cannot run here: %s; running the loopback demo instead\n", why)
	}
	r, err := Run(ctx, cfg)
	res.Loopback = r
	return res, err
}

func (c *Config) progress() io.Writer {
	if c.Progress == nil {
		return io.Discard
	}
	return c.Progress
}

// Run generates the data set, starts the cluster, runs the readers and
// returns the report. Everything it started is torn down before it returns,
// also when ctx ends.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Report{Clients: cfg.Clients, Files: cfg.Files, FileSize: cfg.FileSize, Mode: ModeFUSE, Policy: cfg.Policy}
	if !cfg.ForceLibrary {
		if err := cluster.FUSEUnavailable(); err != nil {
			r.Mode, r.FallbackReason = ModeLibrary, err.Error()
			fmt.Fprintf(cfg.Progress, "FUSE cannot be used here (%v): running the same workload through the client library instead\n", err)
		}
	} else {
		r.Mode, r.FallbackReason = ModeLibrary, "asked for"
	}

	dir, err := os.MkdirTemp("", "coopfs-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo: run directory: %w", err)
	}
	r.Dir = dir
	defer func() {
		if cfg.Keep {
			return
		}
		// Never remove a tree with a live mount in it (it would delete
		// through the mount): the cluster has unmounted by now.
		if live, _ := cluster.MountsUnder(dir); len(live) > 0 {
			fmt.Fprintf(cfg.Progress, "demo: mounts left under %s, not removing it: %v\n", dir, live)
			return
		}
		os.RemoveAll(dir)
	}()
	export := filepath.Join(dir, "export")
	if err := os.Mkdir(export, 0o755); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	files, err := generate(ctx, export, cfg)
	if err != nil {
		return nil, err
	}

	total := cfg.FileSize * int64(cfg.Files)
	ccfg := cluster.Config{Binary: cfg.Binary, Env: cfg.Env, Export: export, Dir: filepath.Join(dir, "run"),
		Keep: cfg.Keep, Logger: cfg.Logger, ServerArgs: serverArgs(cfg.Policy),
		// Every client caches the whole data set.
		MountArgs: []string{"--cache-size", fmt.Sprint(total + total/8 + 64<<20)}}
	if r.Mode == ModeFUSE {
		ccfg.Clients = cfg.Clients
	}
	fmt.Fprintf(cfg.Progress, "starting a server and %d %s clients...\n", cfg.Clients, r.Mode)
	cl, err := cluster.Start(ctx, ccfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	r.Server = cl.Addr
	if cfg.Keep {
		r.LogDir = cl.Dir()
	}

	readers, closeReaders, err := openReaders(ctx, cl, r.Mode, cfg)
	if err != nil {
		return nil, err
	}
	defer closeReaders()

	if err := runReaders(ctx, r, readers, files, cfg); err != nil {
		return nil, err
	}
	if err := collect(ctx, r, cl, readers); err != nil {
		return nil, err
	}
	if err := cl.Close(); err != nil {
		return r, fmt.Errorf("demo: teardown: %w", err)
	}
	return r, nil
}

// serverArgs are the demo server's policy flags: under directory, balanced
// forwarding, the setting for many clients reading the same data at once.
func serverArgs(policy string) []string {
	if policy == "directory" {
		return []string{"--policy", "directory", "--forward-choice", "balanced"}
	}
	return []string{"--policy", policy}
}

// dataFile is one file of the data set.
type dataFile struct {
	name   string
	digest workload.Digest
}

func generate(ctx context.Context, export string, cfg Config) ([]dataFile, error) {
	total := cfg.FileSize * int64(cfg.Files)
	p := newProgress(cfg.Progress, "generating the data set", total)
	defer p.done()
	var files []dataFile
	for i := range cfg.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("file-%d.bin", i+1)
		base := int64(i) * cfg.FileSize
		d, err := workload.WriteFile(filepath.Join(export, name), cfg.FileSize, uint64(i+1),
			func(n int64) { p.set(base + n) })
		if err != nil {
			return nil, err
		}
		files = append(files, dataFile{name, d})
	}
	return files, nil
}

// reader is one client as the workload sees it.
type reader struct {
	name    string
	open    func(ctx context.Context, name string) (io.ReaderAt, func(), error)
	metrics *obs.Metrics // in-process clients only; FUSE clients are scraped
}

func openReaders(ctx context.Context, cl *cluster.Cluster, mode string, cfg Config) ([]reader, func(), error) {
	var readers []reader
	if mode == ModeFUSE {
		for _, p := range cl.Clients {
			mnt := p.Mountpoint
			readers = append(readers, reader{name: p.Name, open: func(ctx context.Context, name string) (io.ReaderAt, func(), error) {
				f, err := workload.Open(filepath.Join(mnt, name), false)
				if err != nil {
					return nil, nil, err
				}
				return f, func() { f.Close() }, nil
			}})
		}
		return readers, func() {}, nil
	}
	var agents []*agent.Agent
	closeAll := func() {
		for _, a := range agents {
			a.Close()
		}
	}
	for i := range cfg.Clients {
		m := obs.NewMetrics()
		name := fmt.Sprintf("client%d", i+1)
		a, err := agent.New(ctx, agent.Config{Server: cl.Addr, Secret: cl.Secret, Name: name, Metrics: m, Logger: cfg.Logger,
			CacheSize: cfg.FileSize*int64(cfg.Files) + 64<<20, ReconnectTimeout: 10 * time.Second})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("demo: client library: %w", err)
		}
		agents = append(agents, a)
		readers = append(readers, reader{name: name, metrics: m, open: func(ctx context.Context, name string) (io.ReaderAt, func(), error) {
			f, _, err := a.Open(ctx, name, syscall.O_RDONLY)
			if err != nil {
				return nil, nil, err
			}
			return ctxReaderAt{ctx, f}, func() { f.Release(context.Background()) }, nil
		}})
	}
	return readers, closeAll, nil
}

// ctxReaderAt adapts an agent file to io.ReaderAt.
type ctxReaderAt struct {
	ctx context.Context
	f   interface {
		ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	}
}

func (r ctxReaderAt) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(r.ctx, p, off) }

// runReaders has every client read every file, all clients at once.
func runReaders(ctx context.Context, r *Report, readers []reader, files []dataFile, cfg Config) error {
	total := cfg.FileSize * int64(cfg.Files) * int64(len(readers))
	p := newProgress(cfg.Progress, fmt.Sprintf("%d clients reading the same files", len(readers)), total)
	var read atomic.Int64
	r.PerClient = make([]ClientResult, len(readers))
	errs := make([]error, len(readers))
	var wg sync.WaitGroup
	if cfg.onReading != nil {
		cfg.onReading()
	}
	start := time.Now()
	for i, rd := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := ClientResult{Name: rd.name, Verified: true}
			t0 := time.Now()
			for _, f := range files {
				ra, closeFile, err := rd.open(ctx, f.name)
				if err != nil {
					errs[i] = fmt.Errorf("%s: open %s: %w", rd.name, f.name, err)
					return
				}
				var last int64
				sr, err := workload.ReadSeq(ctx, ra, workload.SeqOptions{Hash: true, Progress: func(n int64) {
					p.set(read.Add(n - last))
					last = n
				}})
				closeFile()
				if err != nil {
					errs[i] = fmt.Errorf("%s: %s: %w", rd.name, f.name, err)
					return
				}
				res.Bytes += sr.Bytes
				if sr.Digest != f.digest || sr.Bytes != cfg.FileSize {
					res.Verified = false
					res.Mismatches = append(res.Mismatches, fmt.Sprintf("%s: read %d bytes, sha256 %s, want %s",
						f.name, sr.Bytes, sr.Digest.Short(), f.digest.Short()))
				}
			}
			res.Elapsed = time.Since(t0)
			r.PerClient[i] = res
		}()
	}
	wg.Wait()
	p.done()
	r.Elapsed = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

// collect fills the counters of the report.
func collect(ctx context.Context, r *Report, cl *cluster.Cluster, readers []reader) error {
	cs, err := cl.Counters(ctx)
	if err != nil {
		return err
	}
	for _, rd := range readers {
		if rd.metrics == nil {
			continue
		}
		rec := httptest.NewRecorder()
		rd.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		ss, err := obs.Parse(rec.Body)
		if err != nil {
			return fmt.Errorf("demo: counters of %s: %w", rd.name, err)
		}
		cs = append(cs, cluster.Counters{Name: rd.name, Role: cluster.RoleClient, Samples: ss})
	}
	r.addCounters(cs)
	return nil
}

// progress prints "label: x of y MiB (z MB/s)" lines at most once a second.
type progress struct {
	w     io.Writer
	label string
	total int64
	start time.Time
	mu    sync.Mutex
	last  time.Time
	n     int64
}

func newProgress(w io.Writer, label string, total int64) *progress {
	now := time.Now()
	return &progress{w: w, label: label, total: total, start: now, last: now}
}

func (p *progress) set(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n = n
	if time.Since(p.last) >= time.Second {
		p.last = time.Now()
		p.print()
	}
}

func (p *progress) print() {
	el := time.Since(p.start).Seconds()
	fmt.Fprintf(p.w, "  %s: %d of %d MiB (%.0f MB/s)\n", p.label, p.n>>20, p.total>>20, float64(p.n)/max(el, 1e-9)/1e6)
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.print()
}
