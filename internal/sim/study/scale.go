package study

// The scale study: the coordinator at scale. 100, 1,000 and 10,000
// simulated clients read one shared data set at about the same time (a
// checkpoint read by every client at a job's restart; a training set of
// files with Zipf popularity), through the very directory and hints state
// machines the live server and clients run. It reports the server's
// messages per access and per client-second, the directory's memory
// (entries, holder records, bytes) and the forward depth (directory: how
// many holders in a chain were still waiting for the block; hints: the
// hops a miss takes), so that one can say how many clients one server
// coordinates.

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/sim"
	"github.com/coopfs/coopfs/internal/sim/dirsim"
	"github.com/coopfs/coopfs/internal/sim/hintsim"
)

// ScaleConfig configures the scale study. Zero fields take
// DefaultScaleConfig's values.
type ScaleConfig struct {
	Clients []int `json:"clients"` // 100, 1000, 10000
	// Rate is each client's block reads a second (100: about a 100 Mbit/s
	// link's worth of 128 KiB blocks).
	Rate float64 `json:"rate_per_client_s"`
	// Stagger: the clients start at uniformly random times within it (1 s).
	Stagger time.Duration `json:"stagger"`
	// CheckpointBlocks is the checkpoint file every client reads (64).
	CheckpointBlocks int `json:"checkpoint_blocks"`
	// The training set: Files files of FileBlocks blocks; each client reads
	// Reads whole files, Zipf(Alpha).
	Files      int     `json:"files"`
	FileBlocks int     `json:"file_blocks"`
	Reads      int     `json:"reads"`
	Alpha      float64 `json:"alpha"`
	// CacheBlocks is each client's cache (96: the checkpoint fits, the
	// training set's reads evict).
	CacheBlocks int `json:"cache_blocks"`
	// Algorithms are registered names among directory, directory-balanced,
	// directory-nonotify and hints.
	Algorithms []string `json:"algorithms"`
	// MessageCostUS is the live server's CPU per coordination message, in
	// microseconds (docs/benchmarks-coop.md measures it): the tables turn
	// messages per client-second into the clients one server core keeps up
	// with.
	MessageCostUS float64 `json:"message_cost_us"`
	Seed          uint64  `json:"seed"`
	// Quick runs 10 and 100 clients on smaller sets (a second or two).
	Quick bool `json:"quick"`
	// Workers bounds the runs done in parallel (0: GOMAXPROCS).
	Workers  int              `json:"-"`
	Progress func(msg string) `json:"-"`
}

// DefaultScaleConfig returns the study's setup.
func DefaultScaleConfig() ScaleConfig {
	return ScaleConfig{Clients: []int{100, 1000, 10000}, Rate: 100, Stagger: time.Second, CheckpointBlocks: 64,
		Files: 2000, FileBlocks: 8, Reads: 16, Alpha: 1.1, CacheBlocks: 96,
		Algorithms: []string{"directory", "directory-balanced", "hints"}, MessageCostUS: scaleMessageCostUS, Seed: 1}
}

// scaleMessageCostUS is the live server's CPU per directory message,
// measured on this machine (docs/benchmarks-coop.md, "The coordinator at
// scale").
const scaleMessageCostUS = 34

func (c ScaleConfig) withDefaults() ScaleConfig {
	d := DefaultScaleConfig()
	if c.Quick && c.Clients == nil {
		c.Clients = []int{10, 100}
	}
	if c.Clients == nil {
		c.Clients = d.Clients
	}
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	set(&c.CheckpointBlocks, d.CheckpointBlocks)
	set(&c.Files, d.Files)
	set(&c.FileBlocks, d.FileBlocks)
	set(&c.Reads, d.Reads)
	set(&c.CacheBlocks, d.CacheBlocks)
	if c.Rate == 0 {
		c.Rate = d.Rate
	}
	if c.Stagger == 0 {
		c.Stagger = d.Stagger
	}
	if c.Alpha == 0 {
		c.Alpha = d.Alpha
	}
	if c.Algorithms == nil {
		c.Algorithms = d.Algorithms
	}
	if c.MessageCostUS == 0 {
		c.MessageCostUS = d.MessageCostUS
	}
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	if c.Quick {
		c.CheckpointBlocks, c.Files, c.Reads = max(1, c.CheckpointBlocks/4), max(2, c.Files/4), max(1, c.Reads/2)
	}
	return c
}

// ScalePoint is one run: an algorithm, a pattern, a number of clients.
type ScalePoint struct {
	Algorithm string `json:"algorithm"`
	Pattern   string `json:"pattern"`
	Clients   int    `json:"clients"`
	// ServerMsgs are the messages the server sends and receives: requests
	// and their replies or forwards, retries, discard notifications,
	// consistency (hints: opens and their hints, and fetches).
	ServerMsgs    int64   `json:"server_msgs"`
	MsgsPerAccess float64 `json:"server_msgs_per_access"`
	// MsgsPerClientSecond is what a client reading at Rate costs the
	// server: MsgsPerAccess × Rate.
	MsgsPerClientSecond float64 `json:"server_msgs_per_client_s"`
	// MsgsPerSecond is the server's messages over the workload's span of
	// virtual time (the clients start within the stagger).
	MsgsPerSecond        float64 `json:"server_msgs_per_s"`
	Seconds              float64 `json:"seconds"`
	ClientsPerServerCore float64 `json:"clients_per_core"` // 1 s / (MessageCostUS × messages per client-second)
	PeerFraction         float64 `json:"peer_fraction"`    // reads served by a peer / reads that missed locally
	AvgAccessMs          float64 `json:"avg_access_ms"`
	// Directory: its memory at the end of the run (nothing is evicted
	// from it: its entries are the blocks cached).
	Footprint directory.Footprint `json:"footprint"`
	// Depth is the forward depth (directory) or the extra hops of each
	// local miss (hints).
	Depth   dirsim.DepthStats `json:"depth"`
	Metrics sim.Metrics       `json:"metrics"`
}

// ScaleResult is the study's output.
type ScaleResult struct {
	Config ScaleConfig  `json:"config"`
	Params sim.Params   `json:"params"`
	Points []ScalePoint `json:"points"`
}

// ScaleParams are the simulated system: 128 KiB blocks, seed 002's
// latencies, the server's memory holding the data set (read from its disk
// the first time), client caches of CacheBlocks.
func ScaleParams(c ScaleConfig) sim.Params {
	p := sim.DefaultParams()
	p.BlockSize, p.WarmUp = 128<<10, 0
	p.ClientCacheBlocks = c.CacheBlocks
	p.ServerCacheBlocks = c.CheckpointBlocks + c.Files*c.FileBlocks
	p.Seed = int64(c.Seed)
	return p
}

var scalePatterns = []string{FanoutCheckpoint, FanoutZipf}

// Scale runs the study.
func Scale(ctx context.Context, cfg ScaleConfig) (*ScaleResult, error) {
	cfg = cfg.withDefaults()
	base := ScaleParams(cfg)
	res := &ScaleResult{Config: cfg, Params: base}
	type job struct {
		alg, pattern string
		clients      int
	}
	var jobs []job
	for _, pat := range scalePatterns {
		for _, n := range cfg.Clients {
			for _, a := range cfg.Algorithms {
				jobs = append(jobs, job{a, pat, n})
			}
		}
	}
	res.Points = make([]ScalePoint, len(jobs))
	g, ctx := errgroup.WithContext(ctx)
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	g.SetLimit(workers)
	for i, j := range jobs {
		g.Go(func() error {
			if cfg.Progress != nil {
				cfg.Progress(fmt.Sprintf("scale: %s %s %d clients", j.alg, j.pattern, j.clients))
			}
			pt, err := scaleRun(ctx, cfg, base, j.alg, j.pattern, j.clients)
			if err != nil {
				return fmt.Errorf("scale %s %s %d clients: %w", j.alg, j.pattern, j.clients, err)
			}
			res.Points[i] = pt
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return res, nil
}

// hopCounter is the hints algorithm counting each local miss's extra hops.
type hopCounter struct {
	*hintsim.Algorithm
	hist []int64
}

func (h *hopCounter) Access(a sim.Access, c *sim.Counters) sim.Outcome {
	o := h.Algorithm.Access(a, c)
	if o.Layer != sim.LayerLocal && o.Layer != sim.LayerNone {
		for len(h.hist) <= o.Hops {
			h.hist = append(h.hist, 0)
		}
		h.hist[o.Hops]++
	}
	return o
}

func scaleRun(ctx context.Context, cfg ScaleConfig, base sim.Params, alg, pattern string, clients int) (ScalePoint, error) {
	pt := ScalePoint{Algorithm: alg, Pattern: pattern, Clients: clients}
	w, err := NewFanout(FanoutConfig{Pattern: pattern, Clients: clients, Rate: cfg.Rate, Stagger: cfg.Stagger,
		Blocks: cfg.CheckpointBlocks, Files: cfg.Files, FileBlocks: cfg.FileBlocks, Reads: cfg.Reads, Alpha: cfg.Alpha, Seed: cfg.Seed})
	if err != nil {
		return pt, err
	}
	p := base
	p.Clients = clients
	a, p, err := Build(alg, p)
	if err != nil {
		return pt, err
	}
	var run sim.Algorithm
	var hops *hopCounter
	switch x := a.(type) {
	case *dirsim.Sim:
		run = x
	case *hintsim.Algorithm:
		hops = &hopCounter{Algorithm: x}
		run = hops
	default:
		return pt, fmt.Errorf("the scale study runs directory and hints variants, not %s", alg)
	}
	m, err := sim.Run(ctx, w, run, p, sim.RunOptions{Algorithm: alg, Config: fmt.Sprintf("%s/%d", pattern, clients)})
	if err != nil {
		return pt, err
	}
	pt.Metrics, pt.AvgAccessMs = m, m.AvgAccessMs
	pt.ServerMsgs = m.Counts.ManagerMsgs
	if hops != nil {
		// the hints manager is the server: beside its consistency
		// messages it receives every fetch and sends the block
		pt.ServerMsgs += 2 * (m.Hits.Server + m.Hits.Disk)
		pt.Depth = dirsim.DepthOf(hops.hist)
	} else {
		d := a.(*dirsim.Sim)
		pt.Depth = d.ForwardDepth()
		pt.Footprint = d.Directory().Footprint()
	}
	pt.MsgsPerAccess = ratio64(pt.ServerMsgs, m.Accesses)
	pt.Seconds = m.Counts.DurationSeconds
	pt.MsgsPerClientSecond = pt.MsgsPerAccess * cfg.Rate
	if pt.Seconds > 0 {
		pt.MsgsPerSecond = float64(pt.ServerMsgs) / pt.Seconds
	}
	if pt.MsgsPerClientSecond > 0 {
		pt.ClientsPerServerCore = 1e6 / cfg.MessageCostUS / pt.MsgsPerClientSecond
	}
	pt.PeerFraction = ratio64(m.Hits.Remote, m.Hits.Remote+m.Hits.Server+m.Hits.Disk)
	return pt, nil
}

func ratio64(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// find returns the point for (alg, pattern, clients).
func (r *ScaleResult) find(alg, pattern string, clients int) (ScalePoint, bool) {
	i := slices.IndexFunc(r.Points, func(p ScalePoint) bool {
		return p.Algorithm == alg && p.Pattern == pattern && p.Clients == clients
	})
	if i < 0 {
		return ScalePoint{}, false
	}
	return r.Points[i], true
}

// ScaleStudy is the registered scale study.
func ScaleStudy(ctx context.Context, env *Env) (*Report, error) {
	cfg := ScaleConfig{Quick: env.Quick, Seed: uint64(max(env.Params.Seed, 1)), Workers: env.Workers}
	if env.Progress != nil {
		cfg.Progress = func(msg string) { env.progressf("  %s", msg) }
	}
	res, err := Scale(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return res.Report(), nil
}
