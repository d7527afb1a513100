package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/nullfs"
	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/bench/workload"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/fusefs"
	"github.com/coopfs/coopfs/internal/obs"
)

// Defaults of Config.
const (
	DefaultSize    = 1 << 30
	DefaultReps    = 3
	DefaultThreads = 4
	DefaultRandOps = 20000
)

// Targets of the ratios (issue 2, "Measured").
const (
	TargetMemCache  = 0.8
	TargetPageCache = 0.5
)

// NullfsCommand is the hidden `coopfs bench` workload that mounts nullfs in
// the foreground: NullfsCommand --size BYTES MOUNTPOINT.
const NullfsCommand = "nullfs-mount"

// Config is one run.
type Config struct {
	Size    int64 // bytes of the test file
	Reps    int   // repetitions of every measurement
	Threads int   // random readers
	RandOps int   // random reads per thread and repetition
	// SkipCold leaves out the cold phase (it drops every cache of the
	// machine, which disturbs whoever else uses it).
	SkipCold bool
	// SkipWrites leaves out the write rows.
	SkipWrites bool
	// Binary and Env run the coopfs processes ("" = this program).
	Binary string
	Env    []string
	// Dir holds the data set and the logs ("" = a temporary directory,
	// removed afterwards unless Keep).
	Dir  string
	Keep bool
	// Command is recorded in the report.
	Command  string
	Progress io.Writer
	Logger   *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.Reps == 0 {
		c.Reps = DefaultReps
	}
	if c.Threads == 0 {
		c.Threads = DefaultThreads
	}
	if c.RandOps == 0 {
		c.RandOps = DefaultRandOps
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate checks a Config after defaults; exported for the CLI's tests.
func (c *Config) Validate() error {
	c.setDefaults()
	switch {
	case c.Size < 1<<20:
		return fmt.Errorf("--size %d: want at least 1MiB", c.Size)
	case c.Reps < 1 || c.Reps > 100:
		return fmt.Errorf("--reps %d: want 1 to 100", c.Reps)
	case c.Threads < 1 || c.Threads > 256:
		return fmt.Errorf("--threads %d: want 1 to 256", c.Threads)
	case c.RandOps < 1:
		return fmt.Errorf("--rand-ops %d: want at least 1", c.RandOps)
	}
	return nil
}

// Row keys.
const (
	KeyNullfsSeq    = "nullfs-seq"
	KeyMemSeq       = "mem-seq"
	KeyExportWarm   = "export-warm"
	KeyPageCache    = "pagecache-seq"
	KeyNullfsDirect = "nullfs-direct"
	KeyMemDirect    = "mem-direct"
	KeyExportCold   = "export-cold"
	KeyColdSeq      = "cold-seq"
	KeyNullfsRand   = "nullfs-rand4k"
	KeyMemRand      = "mem-rand4k"
)

// bench is one run in progress.
type bench struct {
	cfg    Config
	r      *report.Report
	dir    string
	export string
	file   string // the test file in the export
	p      io.Writer
}

// Run runs the benchmark and returns its report (finished: medians and
// ratios computed). Everything started is stopped before it returns.
func Run(ctx context.Context, cfg Config) (*report.Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cluster.FUSEUnavailable(); err != nil {
		return nil, fmt.Errorf("bench local measures FUSE mounts, and FUSE cannot be used here: %w", err)
	}
	b := &bench{cfg: cfg, r: report.New("local", cfg.Command), p: cfg.Progress}
	b.r.Params["size"] = block.Size(cfg.Size).String()
	b.r.Params["reps"] = strconv.Itoa(cfg.Reps)
	b.r.Params["threads"] = strconv.Itoa(cfg.Threads)
	b.r.Params["rand_ops_per_thread"] = strconv.Itoa(cfg.RandOps)
	b.declareRows()

	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "coopfs-bench-")
		if err != nil {
			return nil, err
		}
		dir = d
		if !cfg.Keep {
			defer func() {
				if live, _ := cluster.MountsUnder(d); len(live) == 0 {
					os.RemoveAll(d)
				}
			}()
		}
	}
	b.dir = dir
	b.export = filepath.Join(dir, "export")
	if err := os.MkdirAll(b.export, 0o755); err != nil {
		return nil, err
	}
	b.file = filepath.Join(b.export, nullfs.FileName)
	fmt.Fprintf(b.p, "writing a %s test file...\n", block.Size(cfg.Size))
	if _, err := workload.WriteFile(b.file, cfg.Size, 1, nil); err != nil {
		return nil, err
	}
	if !cfg.SkipCold {
		if err := b.coldPhase(ctx); err != nil {
			return nil, err
		}
	} else {
		b.r.Notes = append(b.r.Notes, "cold phase skipped (--skip-cold)")
	}
	if err := b.warmPhase(ctx); err != nil {
		return nil, err
	}
	if !cfg.SkipWrites {
		if err := b.writePhase(ctx); err != nil {
			return nil, err
		}
	}
	b.r.Finish()
	return b.r, nil
}

func (b *bench) declareRows() {
	r := b.r
	r.Row(KeyNullfsSeq, "do-nothing go-fuse, seq 1 MiB reads", report.UnitMBps)
	r.Row(KeyMemSeq, "coopfs memory cache, seq 1 MiB reads, page cache dropped", report.UnitMBps).Bounds(KeyNullfsSeq, TargetMemCache)
	r.Row(KeyExportWarm, "export dir directly, page cache warm", report.UnitMBps)
	r.Row(KeyPageCache, "coopfs re-read from the kernel page cache (KEEP_CACHE)", report.UnitMBps).Bounds(KeyExportWarm, TargetPageCache)
	r.Row(KeyNullfsDirect, "do-nothing go-fuse, O_DIRECT 1 MiB reads", report.UnitMBps)
	r.Row(KeyMemDirect, "coopfs memory cache, O_DIRECT 1 MiB reads", report.UnitMBps).Bounds(KeyNullfsDirect, 0)
	if !b.cfg.SkipCold {
		r.Row(KeyExportCold, "export dir directly, cold (caches dropped)", report.UnitMBps)
		r.Row(KeyColdSeq, "coopfs cold: fresh server+client, caches dropped", report.UnitMBps).Bounds(KeyExportCold, 0)
	}
	name := fmt.Sprintf("%d threads, O_DIRECT 4 KiB random reads", b.cfg.Threads)
	r.Row(KeyNullfsRand, "do-nothing go-fuse, "+name, report.UnitOpsSec)
	r.Row(KeyMemRand, "coopfs memory cache, "+name, report.UnitOpsSec).Bounds(KeyNullfsRand, 0)
	if !b.cfg.SkipWrites {
		b.declareWriteRows()
	}
}

// startCluster starts a server and one client whose cache holds the file.
func (b *bench) startCluster(ctx context.Context, name string) (*cluster.Cluster, error) {
	cache := b.cfg.Size + b.cfg.Size/8 + 64<<20
	return cluster.Start(ctx, cluster.Config{Binary: b.cfg.Binary, Env: b.cfg.Env, Export: b.export,
		Clients: 1, Dir: filepath.Join(b.dir, name), Keep: true, Logger: b.cfg.Logger,
		MountArgs: []string{"--cache-size", strconv.FormatInt(cache, 10)}})
}

// coldPhase: per repetition, drop caches and read the export file, then
// drop caches and read through a fresh server and client.
func (b *bench) coldPhase(ctx context.Context) error {
	if err := workload.DropCaches(); err != nil {
		b.r.Notes = append(b.r.Notes, "cold phase skipped: "+err.Error())
		return nil
	}
	for rep := range b.cfg.Reps {
		fmt.Fprintf(b.p, "cold reads, repetition %d of %d...\n", rep+1, b.cfg.Reps)
		if err := workload.DropCaches(); err != nil {
			return err
		}
		res, err := workload.ReadFile(ctx, b.file, false, workload.SeqOptions{})
		if err != nil {
			return err
		}
		b.r.Get(KeyExportCold).Add(res.MBps())
		if err := b.coldClient(ctx, rep); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) coldClient(ctx context.Context, rep int) error {
	cl, err := b.startCluster(ctx, fmt.Sprintf("cold-%d", rep+1))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := workload.DropCaches(); err != nil {
		return err
	}
	path := filepath.Join(cl.Mountpoints()[0], nullfs.FileName)
	res, err := workload.ReadFile(ctx, path, false, workload.SeqOptions{})
	if err != nil {
		return err
	}
	if res.Bytes != b.cfg.Size {
		return fmt.Errorf("cold read: %d bytes of %d", res.Bytes, b.cfg.Size)
	}
	b.r.Get(KeyColdSeq).Add(res.MBps())
	if rep == 0 {
		cs, err := cl.Counters(ctx)
		if err != nil {
			return err
		}
		b.r.Notes = append(b.r.Notes, fmt.Sprintf("cold read counters: the server served %s from disk and %s from memory",
			mib(cs[0].Samples.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerDisk})),
			mib(cs[0].Samples.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerMemory}))))
	}
	return cl.Close()
}

func mib(v float64) string { return fmt.Sprintf("%.0f MiB", v/(1<<20)) }

// warmPhase measures everything served from memory, with nullfs and the
// export directory as the ceilings, interleaved per repetition.
func (b *bench) warmPhase(ctx context.Context) error {
	fmt.Fprintln(b.p, "starting a server, a client and the do-nothing file system...")
	cl, err := b.startCluster(ctx, "warm")
	if err != nil {
		return err
	}
	defer cl.Close()
	nullMnt := filepath.Join(cl.Dir(), "mnt-nullfs")
	if err := os.Mkdir(nullMnt, 0o755); err != nil {
		return err
	}
	if _, err := cl.StartProc(ctx, "nullfs", []string{"bench", NullfsCommand, "--size", strconv.FormatInt(b.cfg.Size, 10), nullMnt}, nullMnt); err != nil {
		return err
	}
	m := &mounts{
		coop:      filepath.Join(cl.Mountpoints()[0], nullfs.FileName),
		null:      filepath.Join(nullMnt, nullfs.FileName),
		export:    b.file,
		metrics:   cl.Clients[0].MetricsAddr,
		size:      b.cfg.Size,
		checkPath: true,
	}
	if err := b.sameMountSettings(cl.Mountpoints()[0], nullMnt); err != nil {
		return err
	}
	fmt.Fprintln(b.p, "filling the client's memory cache...")
	if _, err := workload.ReadFile(ctx, m.coop, false, workload.SeqOptions{}); err != nil {
		return err
	}
	if _, err := workload.ReadFile(ctx, m.export, false, workload.SeqOptions{}); err != nil { // warm the page cache
		return err
	}
	for rep := range b.cfg.Reps {
		fmt.Fprintf(b.p, "warm reads, repetition %d of %d...\n", rep+1, b.cfg.Reps)
		if err := b.warmRep(ctx, m, rep); err != nil {
			return err
		}
	}
	return cl.Close()
}

// sameMountSettings records the read-ahead and largest request of the
// coopfs and nullfs mounts, and notes when they differ: nullfs is the
// ceiling of the coopfs mount only when mounted the same way.
func (b *bench) sameMountSettings(coop, null string) error {
	var got [2]string
	for i, d := range []string{coop, null} {
		kb, err := fusefs.ReadAheadKB(d)
		if err != nil {
			return fmt.Errorf("read_ahead_kb of %s: %w", d, err)
		}
		maxRead, err := mountOption(d, "max_read")
		if err != nil {
			return fmt.Errorf("max_read of %s: %w", d, err)
		}
		b.r.Params["read_ahead_kb_"+filepath.Base(d)] = strconv.Itoa(kb)
		b.r.Params["max_read_"+filepath.Base(d)] = maxRead
		got[i] = fmt.Sprintf("read_ahead_kb=%d max_read=%s", kb, maxRead)
	}
	if got[0] != got[1] {
		b.r.Notes = append(b.r.Notes, fmt.Sprintf("the mounts differ (coopfs %s, nullfs %s): the nullfs rows do not bound the coopfs rows", got[0], got[1]))
	}
	return nil
}

// mounts are the files the warm phase reads.
type mounts struct {
	coop, null, export string
	metrics            string // the coopfs mount's /metrics
	size               int64
	checkPath          bool
}

func (b *bench) warmRep(ctx context.Context, m *mounts, rep int) error {
	seq := func(key, path string, direct, drop bool) (workload.SeqResult, error) {
		if drop {
			if err := workload.DropFile(path); err != nil {
				return workload.SeqResult{}, err
			}
		}
		res, err := workload.ReadFile(ctx, path, direct, workload.SeqOptions{})
		if err == nil && res.Bytes != m.size {
			err = fmt.Errorf("%s: read %d bytes of %d", key, res.Bytes, m.size)
		}
		if err == nil {
			b.r.Get(key).Add(res.MBps())
		}
		return res, err
	}
	// 1. memory cache vs nullfs, page cache dropped; 2. the re-read that
	// the page cache serves vs the export directory.
	if _, err := seq(KeyNullfsSeq, m.null, false, true); err != nil {
		return err
	}
	before, err := b.agentReads(ctx, m.metrics)
	if err != nil {
		return err
	}
	if _, err := seq(KeyMemSeq, m.coop, false, true); err != nil {
		return err
	}
	mid, err := b.agentReads(ctx, m.metrics)
	if err != nil {
		return err
	}
	if _, err := seq(KeyPageCache, m.coop, false, false); err != nil {
		return err
	}
	after, err := b.agentReads(ctx, m.metrics)
	if err != nil {
		return err
	}
	if _, err := seq(KeyExportWarm, m.export, false, false); err != nil {
		return err
	}
	b.checkPaths(rep, before, mid, after)
	// 3. O_DIRECT, no page cache at all.
	if _, err := seq(KeyNullfsDirect, m.null, true, false); err != nil {
		return err
	}
	if _, err := seq(KeyMemDirect, m.coop, true, false); err != nil {
		return err
	}
	// 4. random 4 KiB.
	for _, x := range []struct{ key, path string }{{KeyNullfsRand, m.null}, {KeyMemRand, m.coop}} {
		f, err := workload.Open(x.path, true)
		if err != nil {
			return err
		}
		res, err := workload.ReadRandom(ctx, f, m.size, workload.RandOptions{Threads: b.cfg.Threads, Ops: b.cfg.RandOps, Seed: uint64(rep)})
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", x.key, err)
		}
		b.r.Get(x.key).Add(res.OpsPerSec())
	}
	return nil
}

// layerReads are the agent's read counters by layer.
type layerReads map[string]float64

func (b *bench) agentReads(ctx context.Context, addr string) (layerReads, error) {
	ss, err := obs.Fetch(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("counters of the mount: %w", err)
	}
	out := layerReads{}
	for _, l := range obs.Layers() {
		out[l] = ss.Sum(obs.MetricReads, map[string]string{"layer": l})
	}
	return out, nil
}

func (lr layerReads) sub(o layerReads) (local, server, total float64) {
	for l, v := range lr {
		d := v - o[l]
		total += d
		switch l {
		case obs.LayerLocalMemory:
			local += d
		case obs.LayerServerMemory, obs.LayerServerDisk:
			server += d
		}
	}
	return
}

// checkPaths notes, from the counters, whether each phase took the path it
// claims: the memory-cache read reached the agent but not the server, the
// page-cache re-read did not reach the agent.
func (b *bench) checkPaths(rep int, before, mid, after layerReads) {
	local, server, _ := mid.sub(before)
	_, _, total := after.sub(mid)
	var problems []string
	if local == 0 {
		problems = append(problems, "mem-seq caused no agent reads (the page cache was not dropped)")
	}
	if server > 0 {
		problems = append(problems, fmt.Sprintf("mem-seq caused %.0f server reads (the client cache did not hold the file)", server))
	}
	if total > 0 {
		problems = append(problems, fmt.Sprintf("pagecache-seq caused %.0f agent reads (the kernel did not keep the page cache)", total))
	}
	for _, p := range problems {
		b.r.Notes = append(b.r.Notes, fmt.Sprintf("repetition %d: %s", rep+1, p))
	}
	if rep == 0 && len(problems) == 0 {
		b.r.Notes = append(b.r.Notes, fmt.Sprintf("counters confirm the paths: mem-seq = %.0f agent block reads from memory and none from the server; pagecache-seq = no agent reads", local))
	}
}

// ErrNoFUSE is returned by RunNullfs where FUSE cannot be used.
var ErrNoFUSE = errors.New("FUSE cannot be used here")

// RunNullfs mounts the do-nothing file system with a file of size bytes at
// dir, with the coopfs mount options, until ctx ends.
func RunNullfs(ctx context.Context, dir string, size int64) error {
	if err := cluster.FUSEUnavailable(); err != nil {
		return fmt.Errorf("%w: %v", ErrNoFUSE, err)
	}
	m, err := nullfs.Mount(ctx, dir, size, fusefs.Config{})
	if err != nil {
		return err
	}
	<-ctx.Done()
	_ = m.Unmount()
	m.Wait()
	return nil
}
