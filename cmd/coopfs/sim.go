package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/sim"
	"github.com/coopfs/coopfs/internal/sim/study"
)

const simUsage = `Usage: coopfs sim SUBCOMMAND [flags]

Subcommands:
  run    run algorithms on a trace or a generated workload
         coopfs sim run --trace F[,F2...] --format FMT --algo A,B [--json]
         coopfs sim run --gen PATTERN --algo A,B [--json]
  study  run a whole study and write its tables and plots
         coopfs sim study sarkar|nfscc|sprite|nasd|scale [--quick] [--out DIR]
  gen    write a generated workload in the coopfs trace format
         coopfs sim gen PATTERN [--clients N --accesses N --seed S ...] > file
  convert  convert a trace between formats (coopfs, lirs, txt, oracleGeneral, oracleGeneralOpNS, csv)
         coopfs sim convert --trace IN --format FMT --to FMT --out OUT[.gz|.zst]
  bench  accesses/s and peak memory per algorithm on one trace (and libCacheSim's)
         coopfs sim bench --trace F --format FMT [--algo A,B] [--clients 1,42]
  list   list the algorithms, studies and generator patterns

Run 'coopfs sim SUBCOMMAND -h' for its flags; see docs/sim.md.
`

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, simUsage)
		return errUsage
	}
	switch args[0] {
	case "run":
		return simRun(ctx, args[1:], stdout, stderr)
	case "study":
		return simStudy(ctx, args[1:], stdout, stderr)
	case "gen":
		return simGen(args[1:], stdout, stderr)
	case "convert":
		return simConvert(args[1:], stdout, stderr)
	case "bench":
		return simBench(ctx, args[1:], stdout, stderr)
	case "list":
		return simList(stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, simUsage)
		return nil
	}
	fmt.Fprint(stderr, simUsage)
	return fmt.Errorf("unknown subcommand %q: want run, study, gen, convert, bench or list", args[0])
}

// paramFlags binds every sim.Params field to a flag; apply builds the
// parameters: seed defaults, then the config file, then the flags given.
type paramFlags struct {
	fs                   *flag.FlagSet
	config               string
	clients, warmup      int
	clientBlocks         int
	serverBlocks         int
	clientSize           block.Size
	serverSize           block.Size
	blockSize            block.Size
	local, remote, srv   float64
	disk, msg            float64
	seed                 int64
	nchance              int
	gmsEpoch, gmsEpochAc int
	sets                 multiFlag
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func addParamFlags(fs *flag.FlagSet) *paramFlags {
	d := sim.DefaultParams()
	f := &paramFlags{fs: fs, blockSize: block.Size(d.BlockSize),
		clientSize: block.Size(int64(d.ClientCacheBlocks) * d.BlockSize),
		serverSize: block.Size(int64(d.ServerCacheBlocks) * d.BlockSize)}
	fs.StringVar(&f.config, "config", "", "JSON file of simulation parameters (keys as in docs/sim.md); flags override it")
	fs.IntVar(&f.clients, "clients", d.Clients, "number of clients")
	fs.Var(&f.clientSize, "client-cache", "client cache size per client")
	fs.IntVar(&f.clientBlocks, "client-cache-blocks", d.ClientCacheBlocks, "client cache size in blocks (overrides --client-cache)")
	fs.Var(&f.serverSize, "server-cache", "server memory size")
	fs.IntVar(&f.serverBlocks, "server-cache-blocks", d.ServerCacheBlocks, "server memory in blocks (overrides --server-cache)")
	fs.Var(&f.blockSize, "block-size", "block size")
	fs.Float64Var(&f.local, "local-ms", d.LocalMs, "latency of a local cache hit (ms)")
	fs.Float64Var(&f.remote, "remote-ms", d.RemoteMs, "latency of a remote client cache hit (ms)")
	fs.Float64Var(&f.srv, "server-ms", d.ServerMs, "latency of a server memory hit (ms)")
	fs.Float64Var(&f.disk, "disk-ms", d.DiskMs, "latency of a disk read (ms)")
	fs.Float64Var(&f.msg, "message-ms", d.MessageMs, "latency of one extra message hop (ms)")
	fs.IntVar(&f.warmup, "warmup", d.WarmUp, "warm-up accesses not counted (ignored if the trace is no longer)")
	fs.Int64Var(&f.seed, "seed", d.Seed, "random seed (algorithms and generators)")
	fs.IntVar(&f.nchance, "nchance", d.NChance, "N-chance recirculation count n")
	fs.IntVar(&f.gmsEpoch, "gms-epoch", d.GMSEpochReplacements, "GMS epoch length in replacements (0: a tenth of client memory)")
	fs.IntVar(&f.gmsEpochAc, "gms-epoch-accesses", d.GMSEpochMaxAccesses, "GMS epoch limit in accesses (0: none)")
	fs.Var(&f.sets, "set", "algorithm option key=value (repeatable), e.g. --set server_memory=discard")
	fs.Var(&f.sets, "opt", "same as --set")
	return f
}

// apply returns the parameters and a label: "default" when they are the
// seed's, else the settings that differ.
func (f *paramFlags) apply() (sim.Params, string, error) {
	p := sim.DefaultParams()
	var changed []string
	if f.config != "" {
		data, err := os.ReadFile(f.config)
		if err != nil {
			return p, "", fmt.Errorf("config file: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return p, "", fmt.Errorf("config file %s: %w", f.config, err)
		}
		changed = append(changed, "config="+f.config)
	}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["block-size"] {
		p.BlockSize = int64(f.blockSize)
	}
	if p.BlockSize <= 0 {
		return p, "", fmt.Errorf("block size must be positive")
	}
	apply := map[string]func(){
		"clients":             func() { p.Clients = f.clients },
		"client-cache":        func() { p.ClientCacheBlocks = int(int64(f.clientSize) / p.BlockSize) },
		"server-cache":        func() { p.ServerCacheBlocks = int(int64(f.serverSize) / p.BlockSize) },
		"client-cache-blocks": func() { p.ClientCacheBlocks = f.clientBlocks },
		"server-cache-blocks": func() { p.ServerCacheBlocks = f.serverBlocks },
		"local-ms":            func() { p.LocalMs = f.local },
		"remote-ms":           func() { p.RemoteMs = f.remote },
		"server-ms":           func() { p.ServerMs = f.srv },
		"disk-ms":             func() { p.DiskMs = f.disk },
		"message-ms":          func() { p.MessageMs = f.msg },
		"warmup":              func() { p.WarmUp = f.warmup },
		"seed":                func() { p.Seed = f.seed },
		"nchance":             func() { p.NChance = f.nchance },
		"gms-epoch":           func() { p.GMSEpochReplacements = f.gmsEpoch },
		"gms-epoch-accesses":  func() { p.GMSEpochMaxAccesses = f.gmsEpochAc },
	}
	// Sizes in blocks win over sizes in bytes: apply in this order.
	for _, name := range []string{"clients", "client-cache", "server-cache", "client-cache-blocks", "server-cache-blocks",
		"local-ms", "remote-ms", "server-ms", "disk-ms", "message-ms", "warmup", "seed", "nchance", "gms-epoch", "gms-epoch-accesses"} {
		if set[name] {
			apply[name]()
			changed = append(changed, name+"="+f.fs.Lookup(name).Value.String())
		}
	}
	if set["block-size"] {
		changed = append(changed, "block-size="+f.blockSize.String())
	}
	for _, kv := range f.sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return p, "", fmt.Errorf("--set %q: want key=value", kv)
		}
		p = p.WithOption(k, v)
		changed = append(changed, kv)
	}
	if err := p.Validate(); err != nil {
		return p, "", err
	}
	label := "default"
	if len(changed) > 0 {
		label = strings.Join(changed, ",")
	}
	return p, label, nil
}

// genFlags binds a generator configuration.
type genFlags struct {
	c sim.GenConfig
}

func addGenFlags(fs *flag.FlagSet) *genFlags {
	d := sim.DefaultGenConfig()
	g := &genFlags{}
	fs.IntVar(&g.c.Clients, "gen-clients", 0, "generator: clients (default: --clients)")
	fs.IntVar(&g.c.Accesses, "accesses", d.Accesses, "generator: records to generate")
	fs.IntVar(&g.c.Blocks, "blocks", d.Blocks, "generator: data set size in blocks (sequential, random, hotcold-*)")
	fs.IntVar(&g.c.Files, "files", d.Files, "generator: files (zipf) or shared files (office)")
	fs.Float64Var(&g.c.ZipfS, "zipf-s", d.ZipfS, "generator: Zipf exponent")
	fs.IntVar(&g.c.MaxFile, "max-file", d.MaxFile, "generator: largest file in blocks")
	fs.Float64Var(&g.c.Active, "active", d.Active, "generator (office): fraction of active clients")
	fs.Float64Var(&g.c.Shared, "shared", d.Shared, "generator (office): fraction of sessions on shared files")
	fs.Float64Var(&g.c.Write, "write", d.Write, "generator (office): fraction of sessions that rewrite the file")
	fs.Float64Var(&g.c.SharedWrite, "shared-write", 0, "generator (office): fraction of shared-file sessions that rewrite the file (0: --write/4)")
	fs.Float64Var(&g.c.Temp, "temp", d.Temp, "generator (office): fraction of sessions on temporary files")
	fs.IntVar(&g.c.Private, "private", d.Private, "generator (office): private files per client")
	fs.Float64Var(&g.c.IdleRate, "idle-rate", d.IdleRate, "generator (office): idle client activity relative to an active one")
	fs.IntVar(&g.c.Servers, "servers", d.Servers, "generator (multiserver): storage servers")
	return g
}

func simRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sim run", "(--trace F[,F...] --format FMT | --gen PATTERN) --algo A,B [flags]", stderr)
	trace := fs.String("trace", "", "trace file(s), comma-separated; several are lottery-merged, one client each (gzip and zstd are detected)")
	tf := addTraceFlags(fs)
	gen := fs.String("gen", "", "run on a generated workload instead: "+strings.Join(sim.Patterns(), ", "))
	algos := fs.String("algo", "baseline,nchance,gms,globallru,optimal", "algorithms, comma-separated (see 'coopfs sim list')")
	asJSON := fs.Bool("json", false, "print one JSON object per (algorithm, configuration)")
	asCSV := fs.Bool("csv", false, "print CSV")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	cpuProfile := fs.String("cpuprofile", "", "") // hidden: profile of this process
	memProfile := fs.String("memprofile", "", "") // hidden: heap profile at the end
	pf := addParamFlags(fs)
	gf := addGenFlags(fs)
	hideFlags(fs, stderr, "(--trace F[,F...] --format FMT | --gen PATTERN) --algo A,B [flags]", "cpuprofile", "memprofile")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags go before it?)", fs.Arg(0))
	}
	p, label, err := pf.apply()
	if err != nil {
		return err
	}
	var w sim.Workload
	switch {
	case *trace != "" && *gen != "":
		return errors.New("give --trace or --gen, not both")
	case *trace != "":
		o, err := tf.options(p.BlockSize)
		if err != nil {
			return err
		}
		var ws []sim.Workload
		for _, path := range strings.Split(*trace, ",") {
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("trace: %w", err)
			}
			ws = append(ws, &sim.File{Path: path, Format: o.Format, Options: o})
		}
		w = ws[0]
		if len(ws) > 1 {
			m := &sim.Merge{Traces: ws, Seed: p.Seed}
			n, err := m.Clients()
			if err != nil {
				return err
			}
			if n > p.Clients {
				return fmt.Errorf("the merged traces have %d clients but --clients is %d", n, p.Clients)
			}
			w = m
		}
	case *gen != "":
		c := gf.c
		c.Pattern, c.Seed = *gen, p.Seed
		if c.Clients == 0 {
			c.Clients = p.Clients
		}
		if w, err = sim.Generate(c); err != nil {
			return err
		}
	default:
		return errors.New("give --trace FILE (with --format) or --gen PATTERN")
	}
	var names []string
	for _, a := range strings.Split(*algos, ",") {
		a = strings.TrimSpace(a)
		if _, err := study.Lookup(a); err != nil {
			return err
		}
		names = append(names, a)
	}
	env := &study.Env{Params: p}
	if !*quiet {
		env.Progress = stderr
	}
	start := time.Now()
	rows, err := study.RunMatrix(ctx, env, names, []study.Config{{Name: label, Params: p, Workload: w}})
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "done in %v\n", time.Since(start).Round(time.Millisecond))
	}
	if *memProfile != "" {
		if f, err := os.Create(*memProfile); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	switch {
	case *asJSON:
		return study.WriteJSON(stdout, rows)
	case *asCSV:
		return study.WriteCSV(stdout, rows)
	}
	return study.WriteText(stdout, rows)
}

func simStudy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var names []string
	for _, s := range study.Studies() {
		names = append(names, s.Name)
	}
	fs := newFlagSet("sim study", strings.Join(names, "|")+" [--quick] [--out DIR] [flags]", stderr)
	quick := fs.Bool("quick", false, "run a small version (well under a minute)")
	out := fs.String("out", "", "directory for CSV, JSON and plots (PNG and SVG)")
	asJSON := fs.Bool("json", false, "print the rows as JSON instead of text")
	asCSV := fs.Bool("csv", false, "print the rows as CSV instead of text")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	workers := fs.Int("workers", 0, "runs in parallel (0: one per core)")
	pf := addParamFlags(fs)
	// Accept the study name before or after the flags.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	if name == "" {
		fs.Usage()
		return errUsage
	}
	st, err := study.LookupStudy(name)
	if err != nil {
		return err
	}
	p, _, err := pf.apply()
	if err != nil {
		return err
	}
	env := &study.Env{Quick: *quick, Params: p, Workers: *workers}
	if !*quiet {
		env.Progress = stderr
	}
	start := time.Now()
	r, err := st.Run(ctx, env)
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "study %s done in %v\n", name, time.Since(start).Round(time.Millisecond))
	}
	switch {
	case *asJSON:
		err = study.WriteJSON(stdout, r.Rows)
	case *asCSV:
		err = study.WriteCSV(stdout, r.Rows)
	default:
		_, err = study.WriteReport(stdout, r, "")
	}
	if err != nil || *out == "" {
		return err
	}
	files, err := study.WriteReport(io.Discard, r, *out)
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "wrote %d files to %s\n", len(files), *out)
	}
	return nil
}

func simGen(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sim gen", "PATTERN [flags] > file   (PATTERN: "+strings.Join(sim.Patterns(), ", ")+")", stderr)
	clients := fs.Int("clients", sim.DefaultGenConfig().Clients, "clients")
	seed := fs.Int64("seed", 1, "random seed")
	gf := addGenFlags(fs)
	var pattern string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		pattern, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if pattern == "" && fs.NArg() > 0 {
		pattern = fs.Arg(0)
	}
	if pattern == "" {
		fs.Usage()
		return errUsage
	}
	c := gf.c
	c.Pattern, c.Seed = pattern, *seed
	if c.Clients == 0 {
		c.Clients = *clients
	}
	w, err := sim.Generate(c)
	if err != nil {
		return err
	}
	return sim.WriteTrace(stdout, w)
}

func simList(stdout io.Writer) error {
	fmt.Fprintln(stdout, "Algorithms:")
	algs := study.Algorithms()
	sort.Slice(algs, func(i, j int) bool { return algs[i].Name < algs[j].Name })
	for _, a := range algs {
		fmt.Fprintf(stdout, "  %-16s %s\n", a.Name, a.Summary)
	}
	fmt.Fprintln(stdout, "\nStudies:")
	for _, s := range study.Studies() {
		fmt.Fprintf(stdout, "  %-16s %s\n", s.Name, s.Summary)
	}
	fmt.Fprintln(stdout, "\nGenerator patterns:")
	fmt.Fprintf(stdout, "  %s\n", strings.Join(sim.Patterns(), ", "))
	return nil
}

// traceFlags are how a trace is read.
type traceFlags struct {
	format, csvSpec, sizes *string
}

func addTraceFlags(fs *flag.FlagSet) *traceFlags {
	var names []string
	for _, f := range sim.Formats() {
		names = append(names, string(f))
	}
	return &traceFlags{
		format: fs.String("format", "coopfs", "trace format: "+strings.Join(names, ", ")),
		csvSpec: fs.String("csv-spec", "", "csv columns, libCacheSim style: time-col=1,obj-id-col=2,obj-size-col=3,op-col=4,client-col=5,\n"+
			"delimiter=comma,has-header=true,obj-id-is-num=true,time-scale=1 (default: the layout 'sim convert' writes)"),
		sizes: fs.String("sizes", "blocks", "object sizes (oracleGeneral, oracleGeneralOpNS, csv): blocks (an object of S bytes is ceil(S/block-size) blocks)\n"+
			"or ignore (one block per object, libCacheSim's --ignore-obj-size)"),
	}
}

// options builds the read options; keep is for converters (sizes pass on).
func (t *traceFlags) options(blockSize int64) (sim.ReadOptions, error) {
	f, err := sim.ParseFormat(*t.format)
	if err != nil {
		return sim.ReadOptions{}, err
	}
	o := sim.ReadOptions{Format: f, BlockSize: blockSize}
	if *t.csvSpec != "" {
		if f != sim.FormatCSV {
			return o, fmt.Errorf("--csv-spec is for --format csv, not %s", f)
		}
		if o.CSV, err = sim.ParseCSVSpec(*t.csvSpec); err != nil {
			return o, err
		}
	}
	if t.sizes != nil {
		if o.Sizes, err = sim.ParseSizeMode(*t.sizes); err != nil {
			return o, err
		}
	}
	return o, nil
}

func simConvert(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sim convert", "--trace IN --format FMT --to FMT --out OUT[.gz|.zst]", stderr)
	trace := fs.String("trace", "", "input trace (gzip and zstd are detected)")
	to := fs.String("to", "", "output format: coopfs, lirs, txt, oracleGeneral, oracleGeneralOpNS (with the client as namespace), csv")
	out := fs.String("out", "", "output file ('-': stdout); a .gz or .zst name compresses it")
	bs := block.Size(8 << 10)
	fs.Var(&bs, "block-size", "size written for accesses without one (block traces)")
	tf := addTraceFlags(fs)
	tf.sizes = nil // sizes pass through to the output
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags go before it?)", fs.Arg(0))
	}
	if *trace == "" || *to == "" || *out == "" {
		fs.Usage()
		return errors.New("give --trace, --to and --out")
	}
	o, err := tf.options(int64(bs))
	if err != nil {
		return err
	}
	toF, err := sim.ParseFormat(*to)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	if _, err := os.Stat(*trace); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	w := &sim.File{Path: *trace, Format: o.Format, Options: o}
	var dst io.Writer = stdout
	var fh *os.File
	if *out != "-" {
		if fh, err = os.Create(*out); err != nil {
			return fmt.Errorf("output: %w", err)
		}
		defer fh.Close()
		dst = fh
	}
	cw, err := compressWriter(dst, *out)
	if err != nil {
		return err
	}
	if err := sim.Convert(cw, w, toF, int64(bs)); err != nil {
		return err
	}
	if err := cw.Close(); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	if fh != nil {
		if err := fh.Close(); err != nil {
			return fmt.Errorf("output: %w", err)
		}
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// compressWriter compresses by the output name's extension (.gz, .zst).
func compressWriter(w io.Writer, name string) (io.WriteCloser, error) {
	switch {
	case strings.HasSuffix(name, ".gz"):
		return gzip.NewWriter(w), nil
	case strings.HasSuffix(name, ".zst"):
		return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
	}
	return nopWriteCloser{w}, nil
}
