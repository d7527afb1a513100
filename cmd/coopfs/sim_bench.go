package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/sim"
	"github.com/coopfs/coopfs/internal/sim/study"
)

// benchRow is one measured run of 'sim bench': an algorithm on a trace
// (coopfs or libCacheSim), or a reader alone (Tool "reader").
type benchRow struct {
	Tool      string  `json:"tool"` // coopfs, libCacheSim or reader
	Algorithm string  `json:"algorithm"`
	Trace     string  `json:"trace,omitempty"`
	Format    string  `json:"format,omitempty"`
	Clients   int     `json:"clients"`
	Accesses  int64   `json:"accesses"`
	WallS     float64 `json:"wall_s"`
	CPUS      float64 `json:"cpu_s"` // user + system
	PerSec    float64 `json:"accesses_per_s"`
	PerCPUSec float64 `json:"accesses_per_cpu_s"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	MissRatio float64 `json:"miss_ratio"` // reads that missed the local cache / reads
	// MBPerS and MBPerCPUS are a reader's speed over the trace's bytes
	// (uncompressed).
	MBPerS    float64 `json:"mb_per_s,omitempty"`
	MBPerCPUS float64 `json:"mb_per_cpu_s,omitempty"`
	// Load1 is the machine's 1-minute load average when the run started
	// (the rates mean little on a loaded machine).
	Load1 float64 `json:"load1"`
	// TargetMps is issue 13's speed target for the algorithm in M
	// accesses/s (MB/s for a text reader; 0: none); MetWall and MetCPU say
	// whether the run reached it in wall-clock time and per CPU-second.
	TargetMps float64 `json:"target_m_per_s,omitempty"`
	MetWall   bool    `json:"met_wall,omitempty"`
	MetCPU    bool    `json:"met_cpu,omitempty"`
	// VsLibCacheSim is this run's accesses per second (wall, and per
	// CPU-second) over libCacheSim's LRU's on the same trace (Belady's for
	// optimal; 0: not run there).
	VsLibCacheSim    float64 `json:"vs_libcachesim,omitempty"`
	VsLibCacheSimCPU float64 `json:"vs_libcachesim_cpu,omitempty"`
}

// speedTarget is issue 13's target in M accesses/s: 7 for the LRU-class
// algorithms and Optimal, 3 for hints.
func speedTarget(algo string) float64 {
	switch algo {
	case "baseline", "globallru", "nchance", "gms", "directory", "optimal":
		return 7
	case "hints":
		return 3
	}
	return 0
}

// textTarget is issue 13's target for parsing text traces, in MB/s.
const textTarget = 200

// loadAvg returns the 1-minute load average (0 if unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}

// lcsAlgo is libCacheSim's name for the coopfs algorithm that is exactly
// it on one client.
var lcsAlgo = map[string]string{"baseline": "lru", "optimal": "belady"}

// benchAlgos are the algorithms the bench runs by default: those with a
// speed target.
const benchAlgos = "baseline,globallru,nchance,gms,directory,optimal,hints"

// benchFlags are the flags of 'sim bench' that both of its modes use.
type benchFlags struct {
	algos, clients    *string
	cacheBlocks, reps *int
	lcs, bin          *string
	asJSON            *bool
	suite, out        *string
	accesses, files   *int
}

func simBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "(--suite DIR | --trace F --format FMT) [--algo A,B] [--clients 1,42] [--libcachesim PATH] [--reps R] [--json]"
	fs := newFlagSet("sim bench", usage, stderr)
	trace := fs.String("trace", "", "trace file (gzip and zstd are detected)")
	tf := addTraceFlags(fs)
	bf := benchFlags{
		suite:       fs.String("suite", "", "run issue 13's whole benchmark in DIR: the 10 M-access Zipf traces (made if absent) in every format, 1 and 42 clients, every algorithm, the readers, libCacheSim beside"),
		out:         fs.String("out", "", "with --suite: also write the rows as JSON to this file"),
		accesses:    fs.Int("accesses", 10000000, "with --suite: accesses of the generated traces"),
		files:       fs.Int("files", 100000, "with --suite: files of the generated traces"),
		algos:       fs.String("algo", benchAlgos, "algorithms, comma-separated"),
		clients:     fs.String("clients", "1", "client counts, comma-separated (a trace with more clients needs more)"),
		cacheBlocks: fs.Int("cache-blocks", 100000, "client cache in blocks with one client (no server memory); more clients use seed 002 table 5.2"),
		reps:        fs.Int("reps", 1, "runs of each; the median is reported"),
		lcs:         fs.String("libcachesim", "", "libCacheSim's cachesim binary: the same traces go through its lru and belady (what baseline and optimal are on one client)"),
		asJSON:      fs.Bool("json", false, "print JSON rows"),
		bin:         fs.String("coopfs", "", ""), // hidden: the coopfs binary to run (default: this one)
	}
	hideFlags(fs, stderr, usage, "coopfs")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 || (*trace == "") == (*bf.suite == "") {
		fs.Usage()
		return errors.New("give --suite DIR or --trace (and --format), no arguments")
	}
	if *bf.reps < 1 || *bf.cacheBlocks < 1 || *bf.accesses < 1 || *bf.files < 1 {
		return errors.New("--reps, --cache-blocks, --accesses and --files must be at least 1")
	}
	self := *bf.bin
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return err
		}
	}
	b := &bencher{ctx: ctx, f: bf, self: self, stderr: stderr}
	var err error
	if *bf.suite != "" {
		err = b.suite(*bf.suite)
	} else {
		err = b.single(*trace, tf)
	}
	if err != nil {
		return err
	}
	return b.report(stdout)
}

// bencher runs the bench's processes and collects their rows.
type bencher struct {
	ctx    context.Context
	f      benchFlags
	self   string
	stderr io.Writer
	rows   []benchRow
}

// single benches one trace given with --trace and --format.
func (b *bencher) single(trace string, tf *traceFlags) error {
	o, err := tf.options(8 << 10)
	if err != nil {
		return err
	}
	if _, err := os.Stat(trace); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	for _, cs := range strings.Split(*b.f.clients, ",") {
		var c int
		if _, err := fmt.Sscan(strings.TrimSpace(cs), &c); err != nil || c < 1 {
			return fmt.Errorf("--clients %q: want positive integers", *b.f.clients)
		}
		t := benchTrace{path: trace, format: o.Format, csvSpec: *tf.csvSpec, sizes: *tf.sizes, clients: c}
		if err := b.trace(t); err != nil {
			return err
		}
	}
	return nil
}

// benchTrace is one trace of a bench and how to read it.
type benchTrace struct {
	path           string
	format         sim.Format
	csvSpec, sizes string
	clients        int
}

// trace runs every algorithm on t, and libCacheSim's counterparts. With
// libCacheSim, each run of an algorithm is paired with a run of
// libCacheSim's counterpart right before or after it (the order alternating
// rep by rep), and the row's × libCacheSim is the median of the pairs'
// ratios: on a shared machine whose speed drifts, a ratio of two runs
// minutes apart measures the drift as much as the simulators. libCacheSim's
// row for the trace is the median of all its paired runs.
func (b *bencher) trace(t benchTrace) error {
	lcsRuns := map[string][]benchRow{} // libCacheSim's runs of each algorithm on t
	var lcsOrder []string
	lcsFailed := map[string]bool{}
	for _, a := range strings.Split(*b.f.algos, ",") {
		a = strings.TrimSpace(a)
		if _, err := study.Lookup(a); err != nil {
			return err
		}
		cmd := []string{"sim", "run", "--trace", t.path, "--format", string(t.format), "--sizes", t.sizes, "--algo", a,
			"--clients", fmt.Sprint(t.clients), "--warmup", "0", "--quiet", "--json"}
		if t.csvSpec != "" {
			cmd = append(cmd, "--csv-spec", t.csvSpec)
		}
		if t.clients == 1 {
			cmd = append(cmd, "--client-cache-blocks", fmt.Sprint(*b.f.cacheBlocks), "--server-cache-blocks", "0")
		}
		la := lcsAlgo[a]
		if la == "" {
			la = "lru" // every other algorithm is held to libCacheSim's LRU
		}
		pair := *b.f.lcs != "" && lcsReads(t.format) && !lcsFailed[la]
		var runs, lruns []benchRow
		for i := range *b.f.reps {
			lcsFirst := pair && i%2 == 1
			if lcsFirst {
				pair = b.pairedLibCacheSim(t, la, &lruns, lcsFailed)
			}
			r, err := benchRun(b.ctx, b.self, cmd, parseCoopfsBench)
			if err != nil {
				return fmt.Errorf("%s on %s, %d clients: %w", a, filepath.Base(t.path), t.clients, err)
			}
			runs = append(runs, r)
			if pair && !lcsFirst {
				pair = b.pairedLibCacheSim(t, la, &lruns, lcsFailed)
			}
		}
		r := medianRun(runs)
		r.Tool, r.Algorithm, r.Clients = "coopfs", a, t.clients
		r.Trace, r.Format = filepath.Base(t.path), string(t.format)
		if r.TargetMps = speedTarget(a); r.TargetMps > 0 {
			r.MetWall, r.MetCPU = r.PerSec >= r.TargetMps*1e6, r.PerCPUSec >= r.TargetMps*1e6
		}
		if len(lruns) == len(runs) {
			r.VsLibCacheSim, r.VsLibCacheSimCPU = pairedRatios(runs, lruns)
		}
		b.add(r)
		if len(lruns) > 0 {
			if _, ok := lcsRuns[la]; !ok {
				lcsOrder = append(lcsOrder, la)
			}
			lcsRuns[la] = append(lcsRuns[la], lruns...)
		}
	}
	for _, la := range lcsOrder {
		b.add(medianRun(lcsRuns[la]))
	}
	return nil
}

// pairedLibCacheSim runs libCacheSim's la on t once and appends the run to
// runs. It reports whether the pairing goes on: on an error it says so once
// and marks la failed for the trace.
func (b *bencher) pairedLibCacheSim(t benchTrace, la string, runs *[]benchRow, failed map[string]bool) bool {
	lr, err := b.libCacheSim(t, la)
	if err != nil {
		fmt.Fprintf(b.stderr, "libCacheSim %s on %s: %v (skipped)\n", la, filepath.Base(t.path), err)
		failed[la] = true
		*runs = nil
		return false
	}
	*runs = append(*runs, lr)
	return true
}

// pairedRatios returns the medians of runs[i]'s rates over lruns[i]'s, wall
// and per CPU-second (0 where a rate is missing).
func pairedRatios(runs, lruns []benchRow) (wall, cpu float64) {
	var ws, cs []float64
	for i := range runs {
		if lruns[i].PerSec > 0 {
			ws = append(ws, runs[i].PerSec/lruns[i].PerSec)
		}
		if lruns[i].PerCPUSec > 0 && runs[i].PerCPUSec > 0 {
			cs = append(cs, runs[i].PerCPUSec/lruns[i].PerCPUSec)
		}
	}
	return median(ws), median(cs)
}

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// add records r and prints its line on stderr.
func (b *bencher) add(r benchRow) {
	b.rows = append(b.rows, r)
	if r.Tool == "reader" {
		fmt.Fprintf(b.stderr, "%-11s %-26s %8.1f MB/s (%7.1f MB/CPU-s)  load %.1f\n", r.Tool, r.Trace, r.MBPerS, r.MBPerCPUS, r.Load1)
		return
	}
	fmt.Fprintf(b.stderr, "%-11s %-10s %-26s %2d clients %6.2f M/s (%6.2f M/CPU-s) %7.1f MB  miss %.4f  load %.1f\n",
		r.Tool, r.Algorithm, r.Trace, r.Clients, r.PerSec/1e6, r.PerCPUSec/1e6, r.PeakRSSMB, r.MissRatio, r.Load1)
}

// libCacheSim runs libCacheSim's cachesim on t with algorithm la once: one cache
// of as many objects as the coopfs clients hold together (bytes of 8 KiB
// blocks when sizes count).
func (b *bencher) libCacheSim(t benchTrace, la string) (benchRow, error) {
	blocks := *b.f.cacheBlocks
	if t.clients > 1 {
		blocks = t.clients * sim.DefaultParams().ClientCacheBlocks
	}
	r, err := benchLibCacheSim(b.ctx, *b.f.lcs, t.path, string(t.format), t.csvSpec, t.sizes, la, blocks)
	r.Algorithm, r.Clients, r.Trace, r.Format = la, t.clients, filepath.Base(t.path), string(t.format)
	return r, err
}

// report prints the rows: JSON, or a table.
func (b *bencher) report(stdout io.Writer) error {
	if *b.f.out != "" {
		data, _ := json.MarshalIndent(b.rows, "", "  ")
		if err := os.WriteFile(*b.f.out, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if *b.f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(b.rows)
	}
	fmt.Fprintf(stdout, "| tool | algorithm | trace | clients | accesses | M/s (MB/s) | M/CPU-s (MB/CPU-s) | peak RSS MB | miss ratio | load | target: met wall, per CPU-s | × libCacheSim wall, per CPU-s |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range b.rows {
		target, vs := "", ""
		if r.TargetMps > 0 {
			target = fmt.Sprintf("%.0f: %s, %s", r.TargetMps, yesNo(r.MetWall), yesNo(r.MetCPU))
		}
		if r.VsLibCacheSim > 0 {
			vs = fmt.Sprintf("%.2f, %.2f", r.VsLibCacheSim, r.VsLibCacheSimCPU)
		}
		rate, cpu := fmt.Sprintf("%.2f", r.PerSec/1e6), fmt.Sprintf("%.2f", r.PerCPUSec/1e6)
		if r.Tool == "reader" {
			rate, cpu = fmt.Sprintf("(%.0f)", r.MBPerS), fmt.Sprintf("(%.0f)", r.MBPerCPUS)
		}
		fmt.Fprintf(stdout, "| %s | %s | %s | %d | %d | %s | %s | %.0f | %.4f | %.1f | %s | %s |\n", r.Tool, r.Algorithm, r.Trace, r.Clients,
			r.Accesses, rate, cpu, r.PeakRSSMB, r.MissRatio, r.Load1, target, vs)
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// benchRun runs a command once and returns the run with its peak RSS and
// CPU time; parse reads the accesses and the miss ratio from the output.
// (Repetitions are the caller's: trace pairs each with a libCacheSim run.)
func benchRun(ctx context.Context, bin string, args []string, parse func(out []byte) (int64, float64, error)) (benchRow, error) {
	var out, errb bytes.Buffer
	load := loadAvg()
	c := exec.CommandContext(ctx, bin, args...)
	c.Stdout, c.Stderr = &out, &errb
	start := time.Now()
	if err := c.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return benchRow{}, fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, msg)
	}
	wall := time.Since(start).Seconds()
	n, miss, err := parse(append(out.Bytes(), errb.Bytes()...))
	if err != nil {
		return benchRow{}, fmt.Errorf("%s: %w", filepath.Base(bin), err)
	}
	r := benchRow{Accesses: n, WallS: wall, MissRatio: miss, Load1: load}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.PeakRSSMB = float64(ru.Maxrss) / 1024
		r.CPUS = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	r.PerSec = float64(n) / wall
	if r.CPUS > 0 {
		r.PerCPUSec = float64(n) / r.CPUS
	}
	return r, nil
}

// medianRun returns the median of runs by wall time (the slower of the
// middle two for an even count), keeping its other fields.
func medianRun(runs []benchRow) benchRow {
	runs = slices.Clone(runs)
	sort.Slice(runs, func(i, j int) bool { return runs[i].WallS < runs[j].WallS })
	return runs[len(runs)/2]
}

func parseCoopfsBench(out []byte) (int64, float64, error) {
	var ms []sim.Metrics
	if err := json.Unmarshal(out, &ms); err != nil || len(ms) != 1 {
		return 0, 0, fmt.Errorf("unexpected output of sim run: %v", err)
	}
	m := ms[0]
	return m.Accesses, 1 - m.LocalHitRatio, nil
}

// lcsReads reports whether libCacheSim reads format f.
func lcsReads(f sim.Format) bool {
	switch f {
	case sim.FormatOracle, sim.FormatOracleNS, sim.FormatCSV, sim.FormatTxt, sim.FormatLIRS:
		return true
	}
	return false
}

// benchLibCacheSim runs libCacheSim's cachesim once on the same trace: one
// cache of blocks objects (bytes of 8 KiB blocks when sizes count).
func benchLibCacheSim(ctx context.Context, bin, trace, format, csvSpec, sizes, algo string, blocks int) (benchRow, error) {
	f, err := sim.ParseFormat(format)
	if err != nil {
		return benchRow{}, err
	}
	args := []string{trace}
	switch {
	case !lcsReads(f):
		return benchRow{}, fmt.Errorf("libCacheSim cannot read the %s format: convert the trace (coopfs sim convert --to oracleGeneral)", f)
	case f == sim.FormatOracle || f == sim.FormatOracleNS:
		args = append(args, string(f))
	case f == sim.FormatCSV:
		args = append(args, "csv")
	default:
		args = append(args, "txt")
	}
	if algo == "belady" && f != sim.FormatOracle && f != sim.FormatOracleNS {
		return benchRow{}, fmt.Errorf("libCacheSim's belady needs the next-access field of the oracleGeneral formats")
	}
	size := fmt.Sprint(blocks)
	ignore := "1"
	if f.Sized() && sizes != string(sim.SizesIgnore) {
		size, ignore = fmt.Sprint(int64(blocks)*8<<10), "0"
	}
	args = append(args, algo, size, "--ignore-obj-size", ignore)
	if f == sim.FormatCSV {
		if csvSpec == "" {
			csvSpec = "time-col=1,obj-id-col=2,obj-size-col=3,has-header=true"
		}
		args = append(args, "-t", csvSpec)
	}
	// cachesim appends its results to TRACE.cachesim in the working
	// directory unless told otherwise: keep them out of the caller's tree.
	odir, err := os.MkdirTemp("", "coopfs-cachesim-")
	if err != nil {
		return benchRow{}, fmt.Errorf("libCacheSim's output directory: %w", err)
	}
	defer os.RemoveAll(odir)
	args = append(args, "--output", filepath.Join(odir, filepath.Base(trace)+".cachesim"))
	r, err := benchRun(ctx, bin, args, func(out []byte) (int64, float64, error) {
		i := bytes.LastIndex(out, []byte(" req, miss ratio "))
		if i < 0 {
			return 0, 0, errors.New("no miss ratio in cachesim's output")
		}
		var n int64
		var miss float64
		j := bytes.LastIndexByte(out[:i], ',')
		if _, err := fmt.Sscan(string(out[j+1:i]), &n); err != nil {
			return 0, 0, fmt.Errorf("cachesim's request count: %w", err)
		}
		if _, err := fmt.Sscan(strings.TrimSuffix(strings.Fields(string(out[i+len(" req, miss ratio "):]))[0], ","), &miss); err != nil {
			return 0, 0, fmt.Errorf("cachesim's miss ratio: %w", err)
		}
		return n, miss, nil
	})
	r.Tool = "libCacheSim"
	return r, err
}
