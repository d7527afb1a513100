package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/bench/wholefile"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/obs"
)

// runBenchWholefile implements `coopfs bench wholefile`.
func runBenchWholefile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = "[flags]\n\n" +
		"Runs seed 001's experiments live on a server and client hosts in network namespaces with\n" +
		"shaped links, once per policy: staggered readers of one file, the web-server workload, the\n" +
		"overloaded server, single-client overhead, and `coopfs warmup --cluster` against independent\n" +
		"warm-ups (docs/benchmarks-wholefile.md). A policy the server does not know is skipped. Needs root."
	fs := newFlagSet("bench wholefile", synopsis, stderr)
	policies := fs.String("policies", "none,directory,hints,wholefile", "policies, comma-separated")
	exps := fs.String("experiments", strings.Join(wholefile.Experiments, ","), "experiments, comma-separated")
	var cfg wholefile.Config
	stagger := block.Size(100 << 20)
	fs.Var(&stagger, "stagger-size", "stagger: the file the clients read in turn")
	fs.IntVar(&cfg.StaggerClients, "stagger-clients", 4, "stagger: clients")
	fs.IntVar(&cfg.WebFiles, "web-files", 5000, "web: files")
	webMean := block.Size(100 << 10)
	fs.Var(&webMean, "web-mean", "web: mean file size (exponential)")
	fs.IntVar(&cfg.WebReads, "web-reads", 2000, "web: reads per client")
	fs.IntVar(&cfg.WebClients, "web-clients", 4, "web: clients")
	overload := block.Size(1 << 30)
	fs.Var(&overload, "overload-size", "overload: each of the two files")
	fs.Float64Var(&cfg.OverloadStart, "overload-start", 0.5, "overload: the share of the first pair's bytes that crosses the server's link before the second pair starts (up to 1: when it is done)")
	overhead := fs.String("overhead-sizes", "1MiB,10MiB,100MiB", "overhead: file sizes, comma-separated")
	fs.IntVar(&cfg.OverheadReps, "overhead-reps", 3, "overhead: cold reads per size")
	warm := block.Size(1 << 30)
	fs.Var(&warm, "warm-size", "warmup: the tree's size")
	fs.IntVar(&cfg.WarmFiles, "warm-files", 64, "warmup: the tree's files")
	fs.IntVar(&cfg.WarmClients, "warm-clients", 8, "warmup: clients")
	fs.StringVar(&cfg.ServerLink, "server-link", "100mbit", "server link rate (tc units)")
	fs.StringVar(&cfg.ClientLink, "client-link", "100mbit", "client link rate (tc units)")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of the web workload")
	serveArgs := fs.String("serve-flags", "", "extra flags of serve, space-separated (e.g. \"--server-rotation=false\")")
	mountArgs := fs.String("mount-flags", "", "extra flags of every mount, space-separated (e.g. \"--wholefile-min-size 0\")")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the run directories (logs)")
	logLevel := fs.String("log-level", "warn", "launcher log level")
	fs.StringVar(&cfg.Binary, "binary", "", "")
	var out benchOutput
	out.register(fs)
	hideFlags(fs, stderr, synopsis, "binary")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "coopfs bench wholefile: takes no arguments")
		fs.Usage()
		return errUsage
	}
	cfg.Policies, cfg.Experiments = splitList(*policies), splitList(*exps)
	cfg.ServeArgs, cfg.MountArgs = strings.Fields(*serveArgs), strings.Fields(*mountArgs)
	cfg.StaggerSize, cfg.WebMean, cfg.OverloadSize, cfg.WarmSize = int64(stagger), int64(webMean), int64(overload), int64(warm)
	for _, s := range splitList(*overhead) {
		var sz block.Size
		if err := sz.Set(s); err != nil {
			return fmt.Errorf("--overhead-sizes: %q: %w", s, err)
		}
		cfg.OverheadSizes = append(cfg.OverheadSizes, int64(sz))
	}
	cfg.Progress, cfg.Logger = stderr, obs.NewLogger(stderr, *logLevel)
	r, err := wholefile.Run(ctx, cfg)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted; the testbed was torn down")
		}
		return err
	}
	fmt.Fprintln(stdout)
	return report.Output{JSON: out.jsonPath, Dir: out.outDir}.Write(r, "wholefile", r.Plot, stdout)
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
