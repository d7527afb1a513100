package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/coopfs/coopfs/internal/bench/replay"
	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/sim"
)

// runBenchReplay implements `coopfs bench replay`: a trace played live on
// the namespace testbed and through the simulator, side by side.
func runBenchReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = "(--trace FILE [--format FMT] | --gen PATTERN [--clients N]) [flags]\n\n" +
		"Plays a workload in the simulator's trace format live, on a server and one client host per\n" +
		"trace client in network namespaces with shaped links, and through the simulator with the same\n" +
		"parameters; prints per-layer hit ratios, manager and lookup messages, hint correctness and the\n" +
		"average block read time, simulated against live, per policy (docs/benchmarks-replay.md). Needs root."
	fs := newFlagSet("bench replay", synopsis, stderr)
	trace := fs.String("trace", "", "trace file (gzip and zstd are detected)")
	format := fs.String("format", "coopfs", "trace format (see 'coopfs sim run -h')")
	gen := fs.String("gen", "", "replay a generated workload instead: "+strings.Join(sim.Patterns(), ", "))
	clients := fs.Int("clients", 8, "generator: clients (client hosts)")
	accesses := fs.Int("accesses", replay.DefaultMaxAccesses, "accesses replayed (the first ones of the trace; -1: all)")
	files := fs.Int("files", 200, "generator: shared files (office) or files (zipf)")
	maxFile := fs.Int("max-file", 64, "generator: largest file in blocks")
	active := fs.Float64("active", 0, "generator (office): fraction of active clients (0: the generator's default)")
	private := fs.Int("private", 30, "generator (office): private files per client")
	seed := fs.Int64("seed", 1, "seed of the generator and the simulated algorithms")
	policies := fs.String("policies", "none,directory,hints", "policies, comma-separated")
	blockSize := block.Size(replay.DefaultBlockSize)
	fs.Var(&blockSize, "block-size", "block size (server and simulator)")
	clientCache := block.Size(replay.DefaultClientCache)
	fs.Var(&clientCache, "client-cache", "memory cache of each client")
	serverCache := block.Size(replay.DefaultServerCache)
	fs.Var(&serverCache, "server-cache", "server memory")
	warmup := fs.Int("warmup", 0, "accesses played first and not counted")
	serverLink := fs.String("server-link", replay.DefaultLink, "server link rate (tc units)")
	clientLink := fs.String("client-link", replay.DefaultLink, "client link rate (tc units)")
	diskLatency := fs.Duration("disk-latency", 0, "put the live server's export on a slow disk: every read of it costs this (e.g. 10ms) and bypasses the page cache (0: a plain directory)")
	parallel := fs.Bool("parallel", false, "play the counted accesses with every client at once (each in its trace order) instead of one at a time")
	keep := fs.Bool("keep", false, "keep the run directory (logs)")
	logLevel := fs.String("log-level", "warn", "launcher log level")
	binary := fs.String("binary", "", "") // hidden: the coopfs binary of serve and mount (default: this one), to compare builds
	var out benchOutput
	out.register(fs)
	hideFlags(fs, stderr, synopsis, "binary")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "coopfs bench replay: takes no arguments")
		fs.Usage()
		return errUsage
	}
	w, err := replayWorkload(replayTrace{trace: *trace, format: *format, gen: *gen, clients: *clients, accesses: *accesses,
		files: *files, maxFile: *maxFile, active: *active, private: *private, seed: *seed, blockSize: int64(blockSize)})
	if err != nil {
		if errors.Is(err, errUsage) {
			fs.Usage()
			return errors.New("give --trace FILE or --gen PATTERN")
		}
		return err
	}
	var ps []string
	for _, p := range strings.Split(*policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			ps = append(ps, p)
		}
	}
	r, err := replay.Run(ctx, replay.Config{Workload: w, MaxAccesses: *accesses, Policies: ps,
		BlockSize: int64(blockSize), ClientCache: int64(clientCache), ServerCache: int64(serverCache),
		WarmUp: *warmup, Parallel: *parallel, DiskLatency: *diskLatency, Seed: *seed, Binary: *binary, ServerLink: *serverLink, ClientLink: *clientLink, Keep: *keep,
		Progress: stderr, Logger: obs.NewLogger(stderr, *logLevel)})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted; the testbed was torn down")
		}
		return err
	}
	fmt.Fprintln(stdout)
	return report.Output{JSON: out.jsonPath, Dir: out.outDir}.Write(r, "replay", r.Plot, stdout)
}

// replayTrace is where bench replay's workload comes from.
type replayTrace struct {
	trace, format, gen      string
	clients, accesses       int
	files, maxFile, private int
	active                  float64
	seed, blockSize         int64
}

// replayWorkload opens the trace file or builds the generator; errUsage
// when neither is given.
func replayWorkload(t replayTrace) (sim.Workload, error) {
	switch {
	case t.trace != "" && t.gen != "":
		return nil, errors.New("give --trace or --gen, not both")
	case t.trace != "":
		f, err := sim.ParseFormat(t.format)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(t.trace); err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		return &sim.File{Path: t.trace, Format: f, Options: sim.ReadOptions{Format: f, BlockSize: t.blockSize, Sizes: sim.SizesBlocks}}, nil
	case t.gen != "":
		if t.clients < 1 || t.clients > replay.MaxClients {
			return nil, fmt.Errorf("--clients %d: want 1 to %d", t.clients, replay.MaxClients)
		}
		n := t.accesses
		if n < 0 {
			n = replay.DefaultMaxAccesses
		}
		return sim.Generate(sim.GenConfig{Pattern: t.gen, Clients: t.clients, Accesses: n, Seed: t.seed,
			Files: t.files, MaxFile: t.maxFile, Active: t.active, Private: t.private, Blocks: 4096})
	}
	return nil, errUsage
}
