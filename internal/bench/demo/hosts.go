package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/nscluster"
	"github.com/coopfs/coopfs/internal/bench/testbed"
	"github.com/coopfs/coopfs/internal/bench/workload"
	"github.com/coopfs/coopfs/internal/obs"
)

// Defaults of the testbed mode: enough clients and data that the shaped
// server link is the bottleneck under none (the clients' links are ten
// times faster, as in a rack with one file server), small enough that the
// three policies run in about a minute.
const (
	DefaultHostClients  = 6
	DefaultHostFiles    = 2
	DefaultHostFileSize = 12 << 20
	DefaultServerLink   = "100mbit"
	DefaultClientLink   = "1gbit"
)

// DefaultPolicies are the policies the testbed mode runs side by side.
var DefaultPolicies = []string{"none", "directory", "hints"}

// HostsReport is a testbed run: the same workload under each policy.
type HostsReport struct {
	Clients    int          `json:"clients"`
	Files      int          `json:"files"`
	FileSize   int64        `json:"file_size"`
	ServerLink string       `json:"server_link"`
	ClientLink string       `json:"client_link"`
	Runs       []*PolicyRun `json:"runs"`
	Dir        string       `json:"dir,omitempty"`
}

// PolicyRun is one policy's run on the testbed.
type PolicyRun struct {
	Policy string `json:"policy"`
	// Unavailable says why the policy did not run (the server rejected it).
	Unavailable string `json:"unavailable,omitempty"`
	// Elapsed is the whole run: First (client1 reads the data set alone,
	// as the job that starts first) then Rest (the other clients read it
	// all at once).
	Elapsed        time.Duration  `json:"elapsed_ns"`
	First          time.Duration  `json:"first_ns"`
	Rest           time.Duration  `json:"rest_ns"`
	PerClient      []ClientResult `json:"clients_results"`
	ClientReads    []LayerReads   `json:"client_reads"`
	ServerBytesOut float64        `json:"server_bytes_out"`
}

// Verified reports whether every client read every byte right.
func (p *PolicyRun) Verified() bool {
	for _, c := range p.PerClient {
		if !c.Verified {
			return false
		}
	}
	return len(p.PerClient) > 0
}

// BytesRead is what all clients read.
func (p *PolicyRun) BytesRead() int64 {
	var n int64
	for _, c := range p.PerClient {
		n += c.Bytes
	}
	return n
}

// Verified reports whether every policy that ran read every byte right.
func (r *HostsReport) Verified() bool {
	ran := false
	for _, p := range r.Runs {
		if p.Unavailable == "" {
			ran = true
			if !p.Verified() {
				return false
			}
		}
	}
	return ran
}

// run returns the run of policy, or nil.
func (r *HostsReport) run(policy string) *PolicyRun {
	for _, p := range r.Runs {
		if p.Policy == policy && p.Unavailable == "" {
			return p
		}
	}
	return nil
}

func (c *Config) hostDefaults() {
	if c.Clients == 0 {
		c.Clients = DefaultHostClients
	}
	if c.Files == 0 {
		c.Files = DefaultHostFiles
	}
	if c.FileSize == 0 {
		c.FileSize = DefaultHostFileSize
	}
	if len(c.Policies) == 0 {
		c.Policies = DefaultPolicies
	}
	if c.ServerLink == "" {
		c.ServerLink = DefaultServerLink
	}
	if c.ClientLink == "" {
		c.ClientLink = DefaultClientLink
	}
}

func (c *Config) validateHosts() error {
	for _, p := range c.Policies {
		switch p {
		case "none", "directory", "hints":
		default:
			return fmt.Errorf("--policies: %q: want none, directory or hints", p)
		}
	}
	for _, l := range []struct{ flag, rate string }{{"--server-link", c.ServerLink}, {"--client-link", c.ClientLink}} {
		if _, err := testbed.ParseRate(l.rate); err != nil {
			return fmt.Errorf("%s: %w", l.flag, err)
		}
	}
	if c.Clients > 32 {
		return fmt.Errorf("--clients %d: the testbed demo runs at most 32 client hosts", c.Clients)
	}
	return nil
}

// hostServerArgs are serve's policy flags on the testbed.
func hostServerArgs(policy string) []string { return serverArgs(policy) }

// runHosts runs the workload on the testbed once per policy.
func runHosts(ctx context.Context, cfg Config) (*HostsReport, error) {
	r := &HostsReport{Clients: cfg.Clients, Files: cfg.Files, FileSize: cfg.FileSize,
		ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink}
	dir, err := os.MkdirTemp("", "coopfs-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo: run directory: %w", err)
	}
	if cfg.Keep {
		r.Dir = dir
	} else {
		defer removeRunDir(cfg, dir)
	}
	export := filepath.Join(dir, "export")
	if err := os.Mkdir(export, 0o755); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	files, err := generate(ctx, export, cfg)
	if err != nil {
		return nil, err
	}
	total := cfg.FileSize * int64(cfg.Files)
	for _, policy := range cfg.Policies {
		fmt.Fprintf(cfg.Progress, "%s: starting a server and %d client hosts (server link %s, client links %s)...\n",
			policy, cfg.Clients, cfg.ServerLink, cfg.ClientLink)
		pr, err := runPolicy(ctx, cfg, policy, export, filepath.Join(dir, "run-"+policy), files, total)
		if err != nil {
			return r, err
		}
		r.Runs = append(r.Runs, pr)
		if pr.Unavailable != "" {
			fmt.Fprintf(cfg.Progress, "%s: %s\n", policy, pr.Unavailable)
		} else {
			fmt.Fprintf(cfg.Progress, "%s: %.1fs, the server sent %s\n", policy, pr.Elapsed.Seconds(), mib(pr.ServerBytesOut))
		}
	}
	return r, nil
}

func removeRunDir(cfg Config, dir string) {
	if live, _ := cluster.MountsUnder(dir); len(live) > 0 {
		fmt.Fprintf(cfg.Progress, "demo: mounts left under %s, not removing it: %v\n", dir, live)
		return
	}
	os.RemoveAll(dir)
}

func runPolicy(ctx context.Context, cfg Config, policy, export, dir string, files []dataFile, total int64) (*PolicyRun, error) {
	pr := &PolicyRun{Policy: policy}
	cl, err := nscluster.Start(ctx, nscluster.Config{Binary: cfg.Binary, Clients: cfg.Clients,
		ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink, Export: export, Dir: dir, Keep: cfg.Keep,
		ServerArgs: hostServerArgs(policy),
		MountArgs:  []string{"--cache-size", strconv.FormatInt(total+total/8+64<<20, 10)},
		Logger:     cfg.Logger})
	if errors.Is(err, nscluster.ErrServerStart) {
		pr.Unavailable = "not available: " + err.Error()
		return pr, nil
	}
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	before, err := cl.Scrape(ctx)
	if err != nil {
		return nil, err
	}
	if err := readOnHosts(ctx, cfg, pr, cl, files); err != nil {
		return nil, err
	}
	after, err := cl.Scrape(ctx)
	if err != nil {
		return nil, err
	}
	pr.ServerBytesOut = after.Server.Sum(obs.MetricBytesOut, nil) - before.Server.Sum(obs.MetricBytesOut, nil)
	var clients []obs.Samples
	for i := range after.Clients {
		clients = append(clients, subtract(after.Clients[i], before.Clients[i]))
	}
	pr.ClientReads = byLayer(clients)
	return pr, cl.Close()
}

// subtract returns a's samples less b's of the same series (counters that
// grew between two scrapes).
func subtract(a, b obs.Samples) obs.Samples {
	base := map[string]float64{}
	for _, s := range b {
		base[s.Name+"{"+s.LabelString()+"}"] = s.Value
	}
	out := make(obs.Samples, len(a))
	for i, s := range a {
		s.Value -= base[s.Name+"{"+s.LabelString()+"}"]
		out[i] = s
	}
	return out
}

// readOnHosts has every client host read every file through its mount:
// client1 first, alone (a job that starts first), then all the others at
// once. The driver reads the mountpoints (one mount namespace); the bytes
// cross the hosts' shaped links.
func readOnHosts(ctx context.Context, cfg Config, pr *PolicyRun, cl *nscluster.Cluster, files []dataFile) error {
	pr.PerClient = make([]ClientResult, len(cl.Mounts))
	size := cfg.FileSize * int64(cfg.Files)
	if cfg.onReading != nil {
		cfg.onReading()
	}
	start := time.Now()
	p := newProgress(cfg.Progress, fmt.Sprintf("%s: client1 reading the data set alone", pr.Policy), size)
	err := readMounts(ctx, cfg, pr, cl.Mounts[:1], 0, files, p)
	p.done()
	pr.First = time.Since(start)
	if err == nil && len(cl.Mounts) > 1 {
		rest := time.Now()
		p = newProgress(cfg.Progress, fmt.Sprintf("%s: the other %d clients reading it at once", pr.Policy, len(cl.Mounts)-1),
			size*int64(len(cl.Mounts)-1))
		err = readMounts(ctx, cfg, pr, cl.Mounts[1:], 1, files, p)
		p.done()
		pr.Rest = time.Since(rest)
	}
	pr.Elapsed = time.Since(start)
	return err
}

// readMounts has the given mounts (the first is client number first+1)
// read every file, all at once.
func readMounts(ctx context.Context, cfg Config, pr *PolicyRun, mounts []*nscluster.Mount, first int, files []dataFile, p *progress) error {
	var read atomic.Int64
	errs := make([]error, len(mounts))
	var wg sync.WaitGroup
	for i, m := range mounts {
		wg.Go(func() {
			res := ClientResult{Name: m.Name, Verified: true}
			t0 := time.Now()
			for _, f := range files {
				var last int64
				sr, err := workload.ReadFile(ctx, filepath.Join(m.Dir, f.name), false, workload.SeqOptions{Hash: true,
					Progress: func(n int64) { p.set(read.Add(n - last)); last = n }})
				if err != nil {
					errs[i] = fmt.Errorf("%s: %s: %w", m.Name, f.name, err)
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
			pr.PerClient[first+i] = res
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // the testbed went down with the context
		}
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}
