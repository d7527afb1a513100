package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/coopfs/coopfs/internal/bench/fio"
	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/obs"
)

// fioFlags parses the flags of `coopfs bench fio` into a Config.
func fioFlags(args []string, stderr io.Writer) (fio.Config, benchOutput, error) {
	const synopsis = "[flags]\n\nfio's sequential, random and small-file jobs on the export's ext4, on bindfs (a FUSE\n" +
		"passthrough) and on coopfs (write-through, and write-back into a disk cache), side by side\n" +
		"(docs/benchmarks-fio.md). Needs fio, bindfs, FUSE and root (it drops caches)."
	fs := newFlagSet("bench fio", synopsis, stderr)
	var size, smallSize block.Size
	fs.Var(&size, "size", fmt.Sprintf("bytes each sequential step writes and reads, over all its jobs (default %s; --quick %s)",
		block.Size(fio.DefaultSize), block.Size(fio.QuickSize)))
	smallFiles := fs.Int("small-files", 0, fmt.Sprintf("files of the small-file steps (default %d; --quick %d)", fio.DefaultSmallFiles, fio.QuickSmallFiles))
	fs.Var(&smallSize, "small-size", fmt.Sprintf("size of each small file (default %s)", block.Size(fio.DefaultSmallSize)))
	randRuntime := fs.Duration("rand-runtime", 0, fmt.Sprintf("runtime of each random-read step (default %ds; --quick %ds)", fio.DefaultRandSeconds, fio.QuickRandSeconds))
	reps := fs.Int("reps", 0, fmt.Sprintf("repetitions, targets interleaved; the table gives medians (default %d; --quick %d)", fio.DefaultReps, fio.QuickReps))
	quick := fs.Bool("quick", false, "small sizes and one repetition: a check that every step runs, in about a minute")
	targets := fs.String("targets", strings.Join(fio.AllTargets(), ","), "the targets to run, comma-separated")
	fioBin := fs.String("fio", "fio", "the fio binary")
	keep := fs.Bool("keep", false, "keep the run directory (export, logs)")
	logLevel := fs.String("log-level", "warn", "launcher log level")
	var out benchOutput
	out.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return fio.Config{}, out, err
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "coopfs bench fio: takes no arguments")
		fs.Usage()
		return fio.Config{}, out, errUsage
	}
	if *randRuntime < 0 || *randRuntime%time.Second != 0 {
		return fio.Config{}, out, fmt.Errorf("--rand-runtime %s: want whole seconds", *randRuntime)
	}
	cfg := fio.Config{Size: int64(size), SmallFiles: *smallFiles, SmallSize: int64(smallSize),
		RandSeconds: int(*randRuntime / time.Second), Reps: *reps, Targets: strings.Split(*targets, ","),
		Fio: *fioBin, Keep: *keep, Command: "coopfs bench fio " + strings.Join(args, " "),
		Progress: stderr, Logger: obs.NewLogger(stderr, *logLevel)}
	if *quick {
		cfg.Quick()
	}
	if err := cfg.Validate(); err != nil {
		return cfg, out, err
	}
	return cfg, out, nil
}

func runBenchFio(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, out, err := fioFlags(args, stderr)
	if err != nil {
		return err
	}
	r, err := fio.Run(ctx, cfg)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted; everything started was stopped")
		}
		return err
	}
	plot := func(paths ...string) error {
		for _, p := range paths {
			ext := p[strings.LastIndexByte(p, '.'):]
			if err := r.Plot(strings.TrimSuffix(p, ext), ext); err != nil {
				return err
			}
		}
		return nil
	}
	if err := (report.Output{JSON: out.jsonPath, Dir: out.outDir}).Write(r, "fio", plot, stdout); err != nil {
		return err
	}
	if out.outDir != "" {
		var units []string
		for _, u := range r.Units() {
			units = append(units, fio.UnitFile(u))
		}
		fmt.Fprintf(stdout, "the plots are %s/fio-{%s}.{png,svg}\n", out.outDir, strings.Join(units, ","))
	}
	return nil
}
