package coop

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coopfs/coopfs/internal/bench/testbed"
)

// ErrUsage marks an error the flag package already explained.
var ErrUsage = errors.New("usage")

const usageText = `Usage: coopfs bench coop SUBCOMMAND [flags]

Cooperative-read benchmarks (seed 000 §IV) on a testbed of network-namespace
hosts with tc-shaped links. Needs root, iproute2, nsenter and FUSE.

Subcommands:
  copy      N clients read one large file at once; aggregate throughput vs N (figure 5)
  patterns  4 KiB sequential/random/hotcold reads, cold and warm: block read time (figure 6, table 3)
  discard   forward miss rate with and without discard notifications (tables 4, 5)
  andrew    Andrew-style phases through one client, none vs directory (table 1)
  fault     SIGKILL one serving client during a concurrent copy
  replot    redraw the plots of a saved report: replot FILE.json [OUTDIR]
  worker    (internal) a workload process run inside a host

Run 'coopfs bench coop SUBCOMMAND -h' for the flags.
`

// Main runs `coopfs bench coop SUBCOMMAND args...`.
func Main(ctx context.Context, args []string, ex Exec, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usageText)
		if len(args) == 0 {
			return ErrUsage
		}
		return nil
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "worker":
		return RunWorker(ctx, args, stderr)
	case "replot":
		return replot(args, stdout)
	}
	fs := flag.NewFlagSet("bench coop "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cm Common
	out := fs.String("out", "", "write the JSON report and the plots into this directory (default: the run directory)")
	fs.StringVar(&cm.Dir, "dir", "", "run directory: export, host logs (default: a new temporary directory)")
	fs.StringVar(&cm.ServerLink, "server-link", "100mbit", "the server's link rate (tc rate; \"\" = unshaped)")
	fs.StringVar(&cm.ClientLink, "client-link", "100mbit", "each client's link rate")
	coopfsBin := fs.String("coopfs", ex.Coopfs, "the coopfs binary run for serve and mount")
	keep := fs.Bool("keep", false, "keep the run directory (export, logs) after a successful run")

	var run func() (report, error)
	switch sub {
	case "copy":
		var cfg CopyConfig
		clients := fs.String("clients", "1,2,4,8,12", "client counts")
		policies := fs.String("policies", "none,directory", "policies to compare: none, directory, hints, wholefile, directory-balanced (serve --forward-choice balanced), directory-serverlast (serve --server-rotation=false); any of them with -insecure (every process with --insecure, no TLS)")
		size := sizeFlag(fs, "size", 100e6, "bytes of the file (100MB, 64MiB...)")
		fs.StringVar(&cfg.BlockSize, "block-size", "", "serve --block-size (default: the server's, 1MiB)")
		fs.IntVar(&cfg.ReadAhead, "read-ahead", 0, "mount --read-ahead in blocks (default: the mount's)")
		fs.DurationVar(&cfg.Stagger, "stagger", 0, "start client i i×stagger after the first (diagnosis; the seed starts all at once)")
		run = func() (report, error) {
			var err error
			if cfg.Clients, err = parseInts(*clients); err != nil {
				return nil, err
			}
			cfg.Policies = parseList(*policies)
			for _, p := range cfg.Policies {
				if err := checkPolicy(p); err != nil {
					return nil, err
				}
			}
			cfg.Common, cfg.Size = cm, int64(*size)
			r, err := RunCopy(ctx, cfg)
			if r == nil {
				return nil, err
			}
			return r, err
		}
	case "fault":
		var cfg FaultConfig
		fs.IntVar(&cfg.Clients, "clients", 4, "clients reading at once")
		fs.IntVar(&cfg.Victim, "victim", 2, "the client (1-based) whose mount is SIGKILLed")
		fs.Float64Var(&cfg.KillAt, "kill-at", 0.4, "when to kill, as a fraction of the file's time at the client link")
		size := sizeFlag(fs, "size", 100e6, "bytes of the file")
		fs.DurationVar(&cfg.ForwardTimeout, "forward-timeout", 0, "mount --forward-timeout (default: the mount's, 5s)")
		run = func() (report, error) {
			cfg.Common, cfg.Size = cm, int64(*size)
			r, err := RunFault(ctx, cfg)
			if r == nil {
				return nil, err
			}
			return r, err
		}
	case "patterns", "discard":
		var cfg PatternsConfig
		clients := fs.Int("clients", 12, "clients running the pattern at once")
		pats := fs.String("patterns", strings.Join(Patterns(), ","), "patterns to run")
		size := sizeFlag(fs, "size", 100e6, "bytes of the data set file")
		fs.IntVar(&cfg.Reads, "reads", 25600, "4 KiB reads per client and run")
		fs.StringVar(&cfg.BlockSize, "block-size", "4KiB", "serve --block-size and the read size")
		cache := fs.String("cache-size", "64MiB", "mount --cache-size (the seed's clients had 64 MB)")
		variants := "none,directory"
		if sub == "discard" {
			variants = "directory,directory-nodiscard"
		}
		vs := fs.String("variants", variants, "what to compare: none, directory, directory-nodiscard, directory-balanced, hints")
		fs.IntVar(&cfg.DiscardQueue, "discard-queue", 0, "mount --discard-queue (0: the mount's default, 400)")
		run = func() (report, error) {
			cfg.Common, cfg.Size, cfg.Clients, cfg.ClientCache = cm, int64(*size), *clients, *cache
			cfg.Patterns, cfg.Variants, cfg.Name = parseList(*pats), parseList(*vs), sub
			r, err := RunPatterns(ctx, cfg)
			if r == nil {
				return nil, err
			}
			return r, err
		}
	case "andrew":
		var cfg AndrewConfig
		fs.IntVar(&cfg.Repeats, "repeats", 5, "runs per policy (alternating); medians are reported")
		fs.IntVar(&cfg.Dirs, "dirs", 20, "directories in the source tree")
		fs.IntVar(&cfg.Files, "files", 25, "files per directory")
		run = func() (report, error) {
			cfg.Common = cm
			r, err := RunAndrew(ctx, cfg)
			if r == nil {
				return nil, err
			}
			return r, err
		}
	default:
		fmt.Fprint(stderr, usageText)
		return fmt.Errorf("unknown subcommand %q: %w", sub, ErrUsage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: %w", fs.Args(), ErrUsage)
	}
	cm.Exec.Coopfs, cm.Exec.Worker, cm.Progress = *coopfsBin, ex.Worker, stderr
	if cm.Exec.Coopfs == "" {
		return errors.New("--coopfs: no coopfs binary")
	}
	if err := checkPrereqs(); err != nil {
		return err
	}
	tmp := cm.Dir == ""
	if tmp {
		d, err := os.MkdirTemp("", "coopbench-")
		if err != nil {
			return err
		}
		cm.Dir = d
	}
	if *out == "" {
		*out = cm.Dir
	}
	start := time.Now()
	rep, err := run()
	if rep != nil {
		rep.Table(stdout)
		if werr := writeReport(*out, sub, rep); werr != nil {
			err = errors.Join(err, werr)
		}
		fmt.Fprintf(stderr, "%s: %.0f s; report and plots in %s\n", sub, time.Since(start).Seconds(), *out)
	}
	if err == nil && tmp && !*keep && *out != cm.Dir {
		_ = os.RemoveAll(cm.Dir)
	} else if err == nil && tmp && !*keep {
		// the report lives there: drop only the bulky export
		_ = os.RemoveAll(filepath.Join(cm.Dir, "export"))
	}
	return err
}

// report is what every benchmark returns.
type report interface {
	Table(w io.Writer)
	Plots() []Plot
}

func writeReport(dir, name string, r report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "coop-"+name+".json"), b, 0o644); err != nil {
		return err
	}
	var errs []error
	for _, p := range r.Plots() {
		for _, ext := range []string{"png", "svg"} {
			if err := p.Save(filepath.Join(dir, p.Name+"."+ext)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range parseList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q in %q", f, s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no counts given")
	}
	return out, nil
}

// checkPolicy reports whether p is a policy startCluster runs: a server
// policy, then -balanced and -serverlast for directory, -insecure for any
// (cut in startCluster's order).
func checkPolicy(p string) error {
	base, _ := strings.CutSuffix(p, "-insecure")
	base, last := strings.CutSuffix(base, "-serverlast")
	base, bal := strings.CutSuffix(base, "-balanced")
	switch {
	case base == "directory":
		return nil
	case !last && !bal && (base == "none" || base == "hints" || base == "wholefile"):
		return nil
	}
	return fmt.Errorf("bench coop: policy %q: want none, directory, hints, wholefile, directory-balanced or directory-serverlast, each optionally with -insecure", p)
}

func parseList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// sizeValue is a byte count flag: 100MB, 64MiB, 4KiB, 1e6.
type sizeValue float64

func sizeFlag(fs *flag.FlagSet, name string, def float64, usage string) *sizeValue {
	v := sizeValue(def)
	fs.Var(&v, name, usage)
	return &v
}

func (v *sizeValue) String() string { return strconv.FormatFloat(float64(*v), 'f', -1, 64) }

func (v *sizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

// ParseSize parses a byte count with an optional unit: KB MB GB (powers of
// 10), KiB MiB GiB (powers of 2), or none.
func ParseSize(s string) (int64, error) {
	units := []struct {
		suf string
		m   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	t := strings.TrimSpace(s)
	m := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suf) {
			t, m = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f*m < 1 {
		return 0, fmt.Errorf("bad size %q: want e.g. 100MB, 64MiB or 4096", s)
	}
	return int64(f * m), nil
}

// replot redraws the plots of a report saved as coop-NAME.json.
func replot(args []string, stdout io.Writer) error {
	if len(args) < 1 || len(args) > 2 {
		return fmt.Errorf("replot FILE.json [OUTDIR]: %w", ErrUsage)
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	dir := filepath.Dir(args[0])
	if len(args) == 2 {
		dir = args[1]
	}
	name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(args[0]), "coop-"), ".json")
	var r report
	switch name {
	case "copy":
		r = &CopyReport{}
	case "patterns", "discard":
		r = &PatternsReport{}
	case "andrew":
		r = &AndrewReport{}
	case "fault":
		r = &FaultReport{}
	default:
		return fmt.Errorf("replot: %s is not a coop-{copy,patterns,discard,andrew,fault}.json report", args[0])
	}
	if err := json.Unmarshal(b, r); err != nil {
		return fmt.Errorf("replot %s: %w", args[0], err)
	}
	r.Table(stdout)
	return writeReport(dir, name, r)
}

// checkPrereqs fails early, before any data set is written, when the
// testbed or FUSE cannot work here.
func checkPrereqs() error {
	if err := testbed.CheckPrereqs(); err != nil {
		return err
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("the coop benchmarks mount FUSE file systems: %w (modprobe fuse)", err)
	}
	return nil
}
