package study

// The nfscc study: seed 000 (NFS-cc) section IV-D in the simulator — the
// four synthetic patterns, 12 clients, first (cold) and second (warm) runs;
// average block read time for none vs directory (figure 6), hits and forward
// misses per client (figure 7, tables 2-3), forward miss rate with and
// without discard notifications (tables 4-5), and a discard-queue-length
// sweep.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/coopfs/coopfs/internal/sim"
	"github.com/coopfs/coopfs/internal/sim/dirsim"
)

// NFSCCConfig configures the nfscc study. Zero fields take the seed's
// values (DefaultNFSCCConfig).
type NFSCCConfig struct {
	Clients int `json:"clients"` // 12
	// Blocks is the data set (one file) in 4 KiB blocks: 25600 = 100 MB.
	// Each client reads as many blocks per run.
	Blocks int `json:"blocks"`
	// CacheFraction is each client's cache as a fraction of the data set
	// (0.4: 40 MB of page cache on the seed's 64 MB clients, an
	// assumption: the seed gives only the memory size).
	CacheFraction float64 `json:"cache_fraction"`
	// QueueLen is the discard queue length of the main runs (400).
	QueueLen int `json:"queue_len"`
	// Sweep is the queue lengths of the sweep (random pattern, second run).
	Sweep []int `json:"sweep"`
	// Link bandwidths in Mbit/s (fast Ethernet: 100).
	ServerLinkMbps float64 `json:"server_link_mbps"`
	ClientLinkMbps float64 `json:"client_link_mbps"`
	Seed           int64   `json:"seed"`
	// Quick runs at a quarter of the size (queue lengths scaled alike).
	Quick bool `json:"quick"`
	// Progress, if set, is told about each run as it starts.
	Progress func(msg string) `json:"-"`
}

// DefaultNFSCCConfig returns seed 000's setup.
func DefaultNFSCCConfig() NFSCCConfig {
	return NFSCCConfig{Clients: 12, Blocks: 25600, CacheFraction: 0.4, QueueLen: 400,
		Sweep: []int{1, 25, 50, 100, 200, 400, 800, 1600, 3200}, ServerLinkMbps: 100, ClientLinkMbps: 100, Seed: 1}
}

func (c NFSCCConfig) withDefaults() NFSCCConfig {
	d := DefaultNFSCCConfig()
	if c.Clients == 0 {
		c.Clients = d.Clients
	}
	if c.Blocks == 0 {
		c.Blocks = d.Blocks
	}
	if c.CacheFraction == 0 {
		c.CacheFraction = d.CacheFraction
	}
	if c.QueueLen == 0 {
		c.QueueLen = d.QueueLen
	}
	if c.Sweep == nil {
		c.Sweep = d.Sweep
	}
	if c.ServerLinkMbps == 0 {
		c.ServerLinkMbps = d.ServerLinkMbps
	}
	if c.ClientLinkMbps == 0 {
		c.ClientLinkMbps = d.ClientLinkMbps
	}
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	if c.Quick {
		c.Blocks = max(1, c.Blocks/4)
		c.QueueLen = max(1, c.QueueLen/4)
		sw := make([]int, len(c.Sweep))
		for i, q := range c.Sweep {
			sw[i] = max(1, q/4)
		}
		c.Sweep = sw
	}
	return c
}

// NFSCCParams returns the simulated system of the study: 4 KiB blocks, a
// fast-Ethernet cost model (local 0.02 ms, a block from server memory or a
// peer 0.6 ms, disk 10 ms, message 0.1 ms: assumptions, the seed gives
// none), the server holding the whole data set in memory (640 MB).
func NFSCCParams(c NFSCCConfig) sim.Params {
	c = c.withDefaults()
	p := sim.DefaultParams()
	p.Clients, p.BlockSize, p.WarmUp, p.Seed = c.Clients, 4096, 0, c.Seed
	p.ClientCacheBlocks = max(1, int(c.CacheFraction*float64(c.Blocks)))
	p.ServerCacheBlocks = max(c.Blocks, 640<<20/4096)
	p.LocalMs, p.RemoteMs, p.ServerMs, p.DiskMs, p.MessageMs = 0.02, 0.6, 0.6, 10, 0.1
	p = p.WithOption(dirsim.OptContention, "on")
	p = p.WithOption(dirsim.OptServerLink, strconv.FormatFloat(c.ServerLinkMbps, 'g', -1, 64))
	p = p.WithOption(dirsim.OptClientLink, strconv.FormatFloat(c.ClientLinkMbps, 'g', -1, 64))
	return p.WithOption(dirsim.OptQueueLen, strconv.Itoa(c.QueueLen))
}

// NFSCCPatterns are seed 000's four synthetic benchmarks.
var nfsccPatterns = []string{sim.GenSequential, sim.GenRandom, sim.GenHotColdLocal, sim.GenHotColdGlobal}

// nfsccVariants: NFS (none), NFS-cc, NFS-cc with discard notifications off.
var nfsccVariants = []struct{ name, key, value string }{
	{"none", dirsim.OptPolicy, "none"},
	{"directory", dirsim.OptNotify, "on"},
	{"directory-nonotify", dirsim.OptNotify, "off"},
}

// NFSCCRun is one pattern, one variant, one run.
type NFSCCRun struct {
	Pattern string             `json:"pattern"`
	Variant string             `json:"variant"` // none, directory, directory-nonotify
	Run     int                `json:"run"`     // 1 (cold client caches) or 2 (warm)
	Metrics sim.Metrics        `json:"metrics"`
	Clients []dirsim.ClientRow `json:"clients"` // during this run
}

// NFSCCSweepPoint is the forward miss rate at one queue length (0: off).
type NFSCCSweepPoint struct {
	QueueLen        int     `json:"queue_len"`
	ForwardMissRate float64 `json:"forward_miss_rate"`
	Notifications   int64   `json:"notifications"` // replacement (discard) messages
	AvgAccessMs     float64 `json:"avg_access_ms"`
}

// NFSCCResult is the study's output.
type NFSCCResult struct {
	Config NFSCCConfig       `json:"config"`
	Params sim.Params        `json:"params"`
	Runs   []NFSCCRun        `json:"runs"`
	Sweep  []NFSCCSweepPoint `json:"sweep"` // random pattern, second run
}

// NFSCC runs the study.
func NFSCC(ctx context.Context, cfg NFSCCConfig) (*NFSCCResult, error) {
	cfg = cfg.withDefaults()
	p := NFSCCParams(cfg)
	res := &NFSCCResult{Config: cfg, Params: p}
	for _, pat := range nfsccPatterns {
		for _, v := range nfsccVariants {
			runs, err := nfsccPair(ctx, cfg, p.WithOption(v.key, v.value), pat, v.name)
			if err != nil {
				return nil, err
			}
			res.Runs = append(res.Runs, runs[0], runs[1])
		}
	}
	for _, q := range append(append([]int(nil), cfg.Sweep...), 0) {
		pq := p.WithOption(dirsim.OptQueueLen, strconv.Itoa(max(q, 1)))
		name := "directory/queue=" + strconv.Itoa(q)
		if q == 0 {
			pq, name = pq.WithOption(dirsim.OptNotify, "off"), "directory/queue=off"
		}
		runs, err := nfsccPair(ctx, cfg, pq, sim.GenRandom, name)
		if err != nil {
			return nil, err
		}
		m := runs[1].Metrics
		res.Sweep = append(res.Sweep, NFSCCSweepPoint{QueueLen: q, ForwardMissRate: m.ForwardMissRate,
			Notifications: m.Counts.ReplMsgs, AvgAccessMs: m.AvgAccessMs})
	}
	return res, nil
}

// nfsccPair runs one pattern twice on one simulated system: the first run
// with cold client caches, the second with the caches the first left.
func nfsccPair(ctx context.Context, cfg NFSCCConfig, p sim.Params, pattern, variant string) ([2]NFSCCRun, error) {
	var out [2]NFSCCRun
	per := cfg.Clients * cfg.Blocks
	g, err := sim.Generate(sim.GenConfig{Pattern: pattern, Clients: cfg.Clients, Accesses: 2 * per, Blocks: cfg.Blocks, Seed: cfg.Seed})
	if err != nil {
		return out, err
	}
	s, err := dirsim.New(p)
	if err != nil {
		return out, err
	}
	s.PreloadServer(1, cfg.Blocks)
	var before []dirsim.ClientRow
	for run := range 2 {
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf("nfscc: %s %s run %d", pattern, variant, run+1))
		}
		w := dirsim.ClockOrder(dirsim.Window(g, run*per, per), s)
		algo := "directory"
		if variant == "none" {
			algo = "nfs"
		}
		m, err := sim.Run(ctx, w, s, p, sim.RunOptions{Algorithm: algo, Config: fmt.Sprintf("%s/%s/run%d", variant, pattern, run+1)})
		if err != nil {
			return out, fmt.Errorf("nfscc %s %s run %d: %w", pattern, variant, run+1, err)
		}
		rows := s.Clients()
		delta := make([]dirsim.ClientRow, len(rows))
		for i, r := range rows {
			delta[i] = r
			if before != nil {
				b := before[i]
				delta[i].Served -= b.Served
				delta[i].Received -= b.Received
				delta[i].Hits -= b.Hits
				delta[i].Misses -= b.Misses
			}
		}
		before = rows
		out[run] = NFSCCRun{Pattern: pattern, Variant: variant, Run: run + 1, Metrics: m, Clients: delta}
	}
	return out, nil
}

func (r *NFSCCResult) find(pattern, variant string, run int) *NFSCCRun {
	for i := range r.Runs {
		x := &r.Runs[i]
		if x.Pattern == pattern && x.Variant == variant && x.Run == run {
			return x
		}
	}
	return nil
}

// The seed's published numbers, for the side-by-side tables.
var (
	nfsccSeedWith    = map[string][2]string{sim.GenSequential: {"0", "0.88%"}, sim.GenRandom: {"0.92%", "1.47%"}, sim.GenHotColdLocal: {"0", "0.70%"}, sim.GenHotColdGlobal: {"0", "0.97%"}}
	nfsccSeedWithout = map[string][2]string{sim.GenSequential: {"0", "43.8%"}, sim.GenRandom: {"24.7%", "45.7%"}, sim.GenHotColdLocal: {"0", "10.4%"}, sim.GenHotColdGlobal: {"0", "17.4%"}}
)

// NFSCCStudy is the registered nfscc study: seed 000's setup (not the
// environment's base parameters, which are seed 002's), quick at a quarter
// of the size.
func NFSCCStudy(ctx context.Context, env *Env) (*Report, error) {
	cfg := NFSCCConfig{Quick: env.Quick, Seed: env.Params.Seed}
	if env.Progress != nil {
		cfg.Progress = func(msg string) { env.progressf("  %s", msg) }
	}
	res, err := NFSCC(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return res.Report(), nil
}

// Report turns the result into the study's rows, tables (the seed's
// numbers side by side) and plots.
func (r *NFSCCResult) Report() *Report {
	rep := &Report{Study: "nfscc"}
	for _, x := range r.Runs {
		rep.Rows = append(rep.Rows, x.Metrics)
	}
	c := r.Config
	pct := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }

	fig6 := Table{Name: "fig6", Title: "Figure 6: average block read time (ms), none (NFS) vs directory (NFS-cc)",
		Header: []string{"pattern", "run", "none", "directory", "change", "seed"}}
	for _, pat := range nfsccPatterns {
		for run := 1; run <= 2; run++ {
			n, d := r.find(pat, "none", run).Metrics, r.find(pat, "directory", run).Metrics
			fig6.Rows = append(fig6.Rows, []string{pat, strconv.Itoa(run), fmt.Sprintf("%.3f", n.AvgAccessMs),
				fmt.Sprintf("%.3f", d.AvgAccessMs), fmt.Sprintf("%+.0f%%", 100*(d.AvgAccessMs/n.AvgAccessMs-1)), "-50..-80%"})
		}
	}
	rep.Tables = append(rep.Tables, fig6)
	for _, tab := range []struct {
		name, title, variant string
		seed                 map[string][2]string
	}{
		{"table4", "Table 4: forward miss rate with discard notifications [seed]", "directory", nfsccSeedWith},
		{"table5", "Table 5: forward miss rate without discard notifications [seed]", "directory-nonotify", nfsccSeedWithout},
	} {
		t := Table{Name: tab.name, Title: tab.title, Header: append([]string{"run"}, nfsccPatterns...)}
		for run := 1; run <= 2; run++ {
			row := []string{strconv.Itoa(run)}
			for _, pat := range nfsccPatterns {
				row = append(row, fmt.Sprintf("%s [%s]", pct(r.find(pat, tab.variant, run).Metrics.ForwardMissRate), tab.seed[pat][run-1]))
			}
			t.Rows = append(t.Rows, row)
		}
		rep.Tables = append(rep.Tables, t)
	}
	for run := 1; run <= 2; run++ {
		t := Table{Name: fmt.Sprintf("table%d", run+1),
			Title:  fmt.Sprintf("Table %d / figure 7: per client, run %d, with notifications: served by the server / forward hits / forward misses", run+1, run),
			Header: []string{"pattern"}}
		for i := range c.Clients {
			t.Header = append(t.Header, strconv.Itoa(i+1))
		}
		for _, pat := range nfsccPatterns {
			row := []string{pat}
			for _, cl := range r.find(pat, "directory", run).Clients {
				row = append(row, fmt.Sprintf("%d/%d/%d", cl.Served, cl.Hits, cl.Misses))
			}
			t.Rows = append(t.Rows, row)
		}
		rep.Tables = append(rep.Tables, t)
	}
	sweep := Table{Name: "queue", Title: "Discard queue length sweep (random, second run)",
		Header: []string{"queue_len", "forward_miss_rate", "notifications", "avg_access_ms"}}
	line := Series{Label: "notifications on"}
	var offRate float64
	for _, s := range r.Sweep {
		q := strconv.Itoa(s.QueueLen)
		if s.QueueLen == 0 {
			q, offRate = "off", s.ForwardMissRate
		} else {
			line.X = append(line.X, float64(s.QueueLen))
			line.Y = append(line.Y, 100*s.ForwardMissRate)
		}
		sweep.Rows = append(sweep.Rows, []string{q, pct(s.ForwardMissRate), strconv.FormatInt(s.Notifications, 10), fmt.Sprintf("%.3f", s.AvgAccessMs)})
	}
	rep.Tables = append(rep.Tables, sweep)

	bars := Plot{Name: "fig6", Title: "Average block read time, second run (seed 000 figure 6)", YLabel: "ms",
		Bars: true, Categories: nfsccPatterns}
	for _, v := range []string{"none", "directory"} {
		s := Series{Label: v}
		for _, pat := range nfsccPatterns {
			s.Y = append(s.Y, r.find(pat, v, 2).Metrics.AvgAccessMs)
		}
		bars.Series = append(bars.Series, s)
	}
	off := Series{Label: "notifications off"}
	if n := len(line.X); n > 0 {
		off.X, off.Y = []float64{line.X[0], line.X[n-1]}, []float64{100 * offRate, 100 * offRate}
	}
	rep.Plots = append(rep.Plots, bars, Plot{Name: "queue", Title: "Forward miss rate vs discard queue length (random, second run)",
		XLabel: "queue length (blocks)", YLabel: "forward miss rate (%)", Series: []Series{line, off}})
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("seed 000 setup: %d clients, one file of %d 4 KiB blocks, each client reads %d blocks per run, client caches %d blocks (%.0f%% of the data set: an assumption), discard queue %d, links %g/%g Mbit/s; the server holds the file in memory",
			c.Clients, c.Blocks, c.Blocks, r.Params.ClientCacheBlocks, 100*c.CacheFraction, c.QueueLen, c.ServerLinkMbps, c.ClientLinkMbps),
		"closed loop: each client issues its next read when the previous one completed (dirsim.ClockOrder); read time includes queueing at the server link, the client links and the disk",
		"rows: algorithm nfs is NFS on the same cost model (dirsim policy=none, variant none); config names variant/pattern/run",
		"the seed's sequential runs had clients drift apart; the generator's clients read in lockstep, so forwards mostly reach blocks still pending (waited for), and the stale-holder misses without notifications are fewer than the seed's 43.8%")
	return rep
}
