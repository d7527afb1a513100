package meta

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/obs"
)

// ErrUsage marks an error the flag package already explained.
var ErrUsage = errors.New("usage")

const synopsis = `Usage: coopfs bench meta [flags]

Metadata and small-file workloads (tar x, find+stat, grep -r cold and warm,
du -s, a Python import, rm -rf) side by side against the export directory,
a FUSE passthrough of it (bindfs) and a coopfs mount (policy none), then
close-to-open across two coopfs mounts. Needs FUSE; the cold steps drop the
machine's caches (root). See docs/benchmarks-meta.md.

Flags:
`

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, " ") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// Output says where the result goes besides the table on stdout.
type Output struct {
	JSON string // a JSON file
	Out  string // a directory for meta.json, meta.txt, meta.png, meta.svg
}

// ParseFlags parses the flags of `coopfs bench meta` into a Config.
func ParseFlags(args []string, stderr io.Writer) (Config, Output, error) {
	fs := flag.NewFlagSet("coopfs bench meta", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, synopsis)
		fs.PrintDefaults()
	}
	var cfg Config
	var out Output
	var mountArgs stringsFlag
	fs.IntVar(&cfg.Repeat, "repeat", DefaultRepeat, "repetitions of every workload on every target (the report gives medians)")
	fs.StringVar(&cfg.Tree, "tree", "", "directory whose tarball is extracted (default: the src directory of the Go installation, go env GOROOT)")
	fs.IntVar(&cfg.GenFiles, "gen-files", 0, "extract a generated tree of this many small files instead of --tree")
	fs.IntVar(&cfg.PyModules, "py-modules", DefaultPyModules, "modules of the generated Python package tree (-1: no Python import)")
	stepList := fs.String("steps", "", "comma-separated steps to run (default: all; tar and rm always run, a warm step brings its cold one): "+stepNames())
	fs.IntVar(&cfg.C2OFiles, "c2o-files", DefaultC2OFiles, "files of the close-to-open check across two mounts (-1: skipped)")
	fs.StringVar(&cfg.Passthrough, "passthrough", PassAuto, "the FUSE passthrough: bindfs, loopback (go-fuse's, in its own process) or auto (bindfs if installed)")
	fs.Var(&mountArgs, "mount-arg", "extra flag for coopfs mount, repeatable (e.g. --mount-arg=--attr-timeout=10s)")
	fs.StringVar(&cfg.Dir, "dir", "", "run directory: export, tarball, logs (default: a new temporary directory)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the run directory (logs) afterwards")
	fs.StringVar(&out.JSON, "json", "", "also write the result as JSON to FILE")
	fs.StringVar(&out.Out, "out", "", "write meta.json, meta.txt (the table) and the plot meta.png/.svg to DIR")
	logLevel := fs.String("log-level", "warn", "launcher log level")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, out, err
		}
		return cfg, out, ErrUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "coopfs bench meta: takes no arguments, only flags")
		fs.Usage()
		return cfg, out, ErrUsage
	}
	if cfg.Repeat < 1 {
		return cfg, out, fmt.Errorf("--repeat %d: want at least 1", cfg.Repeat)
	}
	if cfg.PyModules == 0 {
		cfg.PyModules = -1
	}
	if cfg.C2OFiles == 0 {
		cfg.C2OFiles = -1
	}
	cfg.MountArgs = mountArgs
	if *stepList != "" {
		cfg.Steps = strings.Split(*stepList, ",")
	}
	cfg.Command = strings.TrimSpace("coopfs bench meta " + strings.Join(args, " "))
	cfg.Progress = stderr
	cfg.Logger = obs.NewLogger(stderr, *logLevel)
	return cfg, out, cfg.Validate()
}

// Main runs `coopfs bench meta [flags]`, or `coopfs bench meta replot
// FILE.json DIR`, which redraws the table and plot of a saved result.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == loopbackCommand {
		if len(args) != 3 {
			fmt.Fprintf(stderr, "Usage: coopfs bench meta %s EXPORT MOUNTPOINT\n", loopbackCommand)
			return ErrUsage
		}
		return serveLoopback(ctx, args[1], args[2])
	}
	if len(args) > 0 && args[0] == "replot" {
		if len(args) != 3 {
			fmt.Fprintln(stderr, "Usage: coopfs bench meta replot FILE.json DIR")
			return ErrUsage
		}
		res, err := ReadResult(args[1])
		if err != nil {
			return err
		}
		return res.Write(Output{Out: args[2]}, stdout)
	}
	cfg, out, err := ParseFlags(args, stderr)
	if err != nil {
		return err
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted; everything started was stopped")
		}
		return err
	}
	return res.Write(out, stdout)
}

// Write prints the table and writes the files out asks for.
func (res *Result) Write(out Output, stdout io.Writer) error {
	return report.Output{JSON: out.JSON, Dir: out.Out}.Write(res, "meta", res.Plot, stdout)
}

// ReadResult reads a result written by WriteJSON.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil || res.Report == nil {
		return nil, fmt.Errorf("%s is not a bench meta result (%v)", path, err)
	}
	return &res, nil
}

func stepNames() string {
	var ks []string
	for _, st := range steps() {
		ks = append(ks, st.key)
	}
	return strings.Join(append(ks, StepRTT), ",")
}
