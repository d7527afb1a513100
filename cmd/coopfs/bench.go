package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/coopfs/coopfs/internal/bench/local"
	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/bench/tlscost"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/obs"
)

// benchWorkload is one `coopfs bench` workload. Later workloads (the
// cooperative concurrent copy in the netns testbed, the synthetic patterns)
// are added to benchWorkloads and reuse benchOutput for their results.
type benchWorkload struct {
	name    string
	summary string
	hidden  bool // helpers the benchmarks start; not listed
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func benchWorkloads() []benchWorkload {
	return []benchWorkload{
		{"local", "one server and one client here: memory cache vs do-nothing FUSE, page cache vs local disk, cold and 4 KiB random reads", false, runBenchLocal},
		{"tls", "the cost of TLS against --insecure: cold, peer and memory-cache reads, CPU per GB (root)", false, runBenchTLS},
		{"coop", "cooperative benchmarks on a netns testbed: concurrent copy, patterns, discard, andrew, fault (root)", false, runBenchCoop},
		{"replay", "a trace played live on a netns testbed and in the simulator, side by side: hit ratios, messages, hints, read time (root)", false, runBenchReplay},
		{"proxy", "the caching proxy on a netns testbed: a second client behind a LAN proxy, a warm restart (root)", false, runBenchProxy},
		{"wholefile", "seed 001's experiments on a netns testbed, per policy: staggered readers, web server, overloaded server, overhead, cluster warm-up (root)", false, runBenchWholefile},
		{"fio", "fio's sequential, random 4 KiB and small-file jobs on ext4, bindfs and coopfs (write-through, write-back), side by side (root)", false, runBenchFio},
		{"meta", "metadata and small files: tar x, find+stat, grep -r, du, python import, rm -rf vs ext4 and bindfs; close-to-open across mounts", false, runBenchMeta},
		{local.NullfsCommand, "mount the do-nothing go-fuse file system (used by bench local)", true, runBenchNullfs},
	}
}

// runBench implements `coopfs bench WORKLOAD [flags]`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		benchUsage(stderr)
		if len(args) == 0 {
			return errUsage
		}
		return flag.ErrHelp
	}
	for _, w := range benchWorkloads() {
		if w.name == args[0] {
			return w.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "coopfs bench: unknown workload %q\n", args[0])
	benchUsage(stderr)
	return errUsage
}

func benchUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: coopfs bench WORKLOAD [flags]\n\nWorkloads:")
	for _, b := range benchWorkloads() {
		if !b.hidden {
			fmt.Fprintf(w, "  %-9s %s\n", b.name, b.summary)
		}
	}
	fmt.Fprintln(w, "\nRun 'coopfs bench WORKLOAD -h' for its flags; workloads print a table and write JSON and plots.")
}

// benchOutput are the output flags every workload shares.
type benchOutput struct {
	jsonPath string
	outDir   string
}

func (o *benchOutput) register(fs interface {
	StringVar(p *string, name, value, usage string)
}) {
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to FILE")
	fs.StringVar(&o.outDir, "out", "", "write WORKLOAD.json, WORKLOAD.txt (the table) and the plot WORKLOAD.png/.svg to DIR")
}

// write prints the table and writes the files asked for.
func (o *benchOutput) write(r *report.Report, stdout io.Writer) error {
	plot := func(paths ...string) error { return r.Plot(report.UnitMBps, paths...) }
	return report.Output{JSON: o.jsonPath, Dir: o.outDir}.Write(r, r.Bench, plot, stdout)
}

// hideFlags leaves the named flags out of fs's usage (developer flags);
// the others print as flag.PrintDefaults prints them.
func hideFlags(fs *flag.FlagSet, stderr io.Writer, synopsis string, names ...string) {
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s %s\n\nFlags:\n", fs.Name(), synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			if slices.Contains(names, f.Name) {
				return
			}
			typ, usage := flag.UnquoteUsage(f)
			line := "  -" + f.Name
			if typ != "" {
				line += " " + typ
			}
			line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
				line += fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintln(stderr, line)
		})
	}
}

// localFlags parses the flags of `coopfs bench local` into a Config.
func localFlags(args []string, stderr io.Writer) (local.Config, benchOutput, string, error) {
	const synopsis = "[flags]\n\nOne coopfs server and one FUSE client on this machine, measured side by side with\n" +
		"ceilings of the same run (see docs/benchmarks.md). Needs FUSE; the cold phase needs root."
	fs := newFlagSet("bench local", synopsis, stderr)
	size := block.Size(local.DefaultSize)
	fs.Var(&size, "size", "size of the test file")
	reps := fs.Int("reps", local.DefaultReps, "repetitions of every measurement (the report gives medians)")
	threads := fs.Int("threads", local.DefaultThreads, "threads of the 4 KiB random reads")
	randOps := fs.Int("rand-ops", local.DefaultRandOps, "4 KiB random reads per thread and repetition")
	skipCold := fs.Bool("skip-cold", false, "leave out the cold reads (they drop every cache of the machine)")
	skipWrites := fs.Bool("skip-writes", false, "leave out the write rows (write-through and write-back against the export and the disk cache's directory)")
	keep := fs.Bool("keep", false, "keep the test file and the process logs")
	logLevel := fs.String("log-level", "warn", "launcher log level")
	cpuProfile := fs.String("cpuprofile", "", "") // hidden: profile of this process
	var out benchOutput
	out.register(fs)
	hideFlags(fs, stderr, synopsis, "cpuprofile")
	if err := parseFlags(fs, args); err != nil {
		return local.Config{}, out, "", err
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "coopfs bench local: takes no arguments")
		fs.Usage()
		return local.Config{}, out, "", errUsage
	}
	if *reps < 1 || *threads < 1 || *randOps < 1 {
		return local.Config{}, out, "", fmt.Errorf("--reps, --threads and --rand-ops must be at least 1 (got %d, %d, %d)", *reps, *threads, *randOps)
	}
	cfg := local.Config{Size: int64(size), Reps: *reps, Threads: *threads, RandOps: *randOps, SkipCold: *skipCold, SkipWrites: *skipWrites,
		Keep: *keep, Command: "coopfs bench local " + strings.Join(args, " "),
		Progress: stderr, Logger: obs.NewLogger(stderr, *logLevel)}
	if err := cfg.Validate(); err != nil {
		return cfg, out, "", err
	}
	return cfg, out, *cpuProfile, nil
}

func runBenchLocal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, out, cpuProfile, err := localFlags(args, stderr)
	if err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	r, err := local.Run(ctx, cfg)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted; everything started was stopped")
		}
		return err
	}
	return out.write(r, stdout)
}

func runBenchTLS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = "[flags]\n\nA server and two FUSE clients on this machine, with TLS and digests and with --insecure,\n" +
		"side by side in one run (docs/benchmarks.md). Needs FUSE and root (it drops caches)."
	fs := newFlagSet("bench tls", synopsis, stderr)
	size := block.Size(512 << 20)
	fs.Var(&size, "size", "size of the test file")
	reps := fs.Int("reps", 3, "repetitions (the report gives medians)")
	logLevel := fs.String("log-level", "warn", "launcher log level")
	var out benchOutput
	out.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *reps < 1 || size < 1<<20 {
		fmt.Fprintln(stderr, "coopfs bench tls: takes no arguments; --reps at least 1, --size at least 1MiB")
		fs.Usage()
		return errUsage
	}
	r, err := tlscost.Run(ctx, tlscost.Config{Size: int64(size), Reps: *reps, Command: "coopfs bench tls " + strings.Join(args, " "),
		Progress: stderr, Logger: obs.NewLogger(stderr, *logLevel)})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted; everything started was stopped")
		}
		return err
	}
	return out.write(r, stdout)
}

func runBenchNullfs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench "+local.NullfsCommand, "--size BYTES MOUNTPOINT", stderr)
	size := block.Size(local.DefaultSize)
	fs.Var(&size, "size", "size of the one file, "+"data")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	return local.RunNullfs(ctx, fs.Arg(0), int64(size))
}
