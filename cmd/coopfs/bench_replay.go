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
	var w sim.Workload
	switch {
	case *trace != "" && *gen != "":
		return errors.New("give --trace or --gen, not both")
	case *trace != "":
		f, err := sim.ParseFormat(*format)
		if err != nil {
			return err
		}
		if _, err := os.Stat(*trace); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
		w = &sim.File{Path: *trace, Format: f, Options: sim.ReadOptions{Format: f, BlockSize: int64(blockSize), Sizes: sim.SizesBlocks}}
	case *gen != "":
		if *clients < 1 || *clients > replay.MaxClients {
			return fmt.Errorf("--clients %d: want 1 to %d", *clients, replay.MaxClients)
		}
		n := *accesses
		if n < 0 {
			n = replay.DefaultMaxAccesses
		}
		g, err := sim.Generate(sim.GenConfig{Pattern: *gen, Clients: *clients, Accesses: n, Seed: *seed,
			Files: *files, MaxFile: *maxFile, Active: *active, Private: *private, Blocks: 4096})
		if err != nil {
			return err
		}
		w = g
	default:
		fs.Usage()
		return errors.New("give --trace FILE or --gen PATTERN")
	}
	var ps []string
	for _, p := range strings.Split(*policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			ps = append(ps, p)
		}
	}
	r, err := replay.Run(ctx, replay.Config{Workload: w, MaxAccesses: *accesses, Policies: ps,
		BlockSize: int64(blockSize), ClientCache: int64(clientCache), ServerCache: int64(serverCache),
		WarmUp: *warmup, Parallel: *parallel, Seed: *seed, Binary: *binary, ServerLink: *serverLink, ClientLink: *clientLink, Keep: *keep,
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
