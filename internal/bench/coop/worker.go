package coop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/bench/workload"
)

// The access patterns of the synthetic benchmarks (seed 000 §IV-D).
const (
	PatSequential    = "sequential"
	PatRandom        = "random"
	PatHotcoldLocal  = "hotcold-local"
	PatHotcoldGlobal = "hotcold-global"
)

// Patterns lists the synthetic patterns in the seed's order.
func Patterns() []string {
	return []string{PatSequential, PatRandom, PatHotcoldLocal, PatHotcoldGlobal}
}

// Result is what one worker process reports.
type Result struct {
	Mode       string  `json:"mode"`
	Client     int     `json:"client"`
	Bytes      int64   `json:"bytes"`
	Ops        int64   `json:"ops"`
	StartNS    int64   `json:"start_unix_ns"`
	EndNS      int64   `json:"end_unix_ns"`
	Direct     bool    `json:"direct,omitempty"`
	MeanUS     float64 `json:"mean_us,omitempty"`
	P50US      float64 `json:"p50_us,omitempty"`
	P90US      float64 `json:"p90_us,omitempty"`
	P99US      float64 `json:"p99_us,omitempty"`
	MaxUS      float64 `json:"max_us,omitempty"`
	Digest     string  `json:"digest,omitempty"`
	Verified   bool    `json:"verified"`
	Mismatches int64   `json:"mismatches,omitempty"`
	// Phases are the Andrew phases' times in milliseconds, in order.
	Phases []Phase `json:"phases,omitempty"`
	// FirstByteNS is when the first read returned data (copy).
	FirstByteNS int64 `json:"first_byte_unix_ns,omitempty"`
	// Progress is the bytes read by each time (copy): about a hundred
	// points over the file, the last at EndNS.
	Progress []BytesAt `json:"progress,omitempty"`
}

// BytesAt is a point of a copy's progress: Bytes read by AtNS after the
// worker's start.
type BytesAt struct {
	AtNS  int64 `json:"at_ns"`
	Bytes int64 `json:"bytes"`
}

// progressPoints bounds the points of a copy's Progress.
const progressPoints = 100

// progressRecorder samples a copy's progress: the first byte's time and a
// point each time another hundredth of size is read.
type progressRecorder struct {
	start, first time.Time
	step, next   int64
	points       []BytesAt
}

func newProgress(start time.Time, size int64) *progressRecorder {
	step := max(size/progressPoints, 1)
	return &progressRecorder{start: start, step: step, next: step}
}

func (p *progressRecorder) read(done int64) {
	if done <= 0 {
		return
	}
	now := time.Now()
	if p.first.IsZero() {
		p.first = now
	}
	if done >= p.next {
		p.points = append(p.points, BytesAt{AtNS: now.Sub(p.start).Nanoseconds(), Bytes: done})
		p.next = (done/p.step + 1) * p.step
	}
}

// Phase is one timed phase of the Andrew-style run.
type Phase struct {
	Name string  `json:"name"`
	MS   float64 `json:"ms"`
}

// Elapsed is the worker's measured wall time.
func (r *Result) Elapsed() time.Duration { return time.Duration(r.EndNS - r.StartNS) }

func readResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("worker result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("worker result %s: %w", path, err)
	}
	return &r, nil
}

// workerConfig is the worker subcommand's flags.
type workerConfig struct {
	result  string
	mode    string
	file    string
	export  string // the same file in the export, to compare block reads
	digest  string // expected SHA-256 of the whole file (seq mode)
	ioSize  int
	reads   int
	client  int
	clients int
	seed    uint64
	direct  bool
	startAt int64
	src     string // andrew: source tree
	dst     string // andrew: target directory in the mount
}

// RunWorker is the worker subcommand: it runs one workload through a mount
// inside a testbed host and writes its Result as JSON to --result.
func RunWorker(ctx context.Context, args []string, stderr io.Writer) error {
	var c workerConfig
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.result, "result", "", "write the JSON result here (required)")
	fs.StringVar(&c.mode, "mode", "copy", "copy, sequential, random, hotcold-local, hotcold-global or andrew")
	fs.StringVar(&c.file, "file", "", "file to read (in the mount)")
	fs.StringVar(&c.export, "export-file", "", "the same file in the export, to check block reads against")
	fs.StringVar(&c.digest, "digest", "", "expected SHA-256 (hex) of the whole file, for copy")
	fs.IntVar(&c.ioSize, "io", 4096, "bytes per read")
	fs.IntVar(&c.reads, "reads", 25600, "reads (block patterns)")
	fs.IntVar(&c.client, "client", 0, "this client's index (0-based)")
	fs.IntVar(&c.clients, "clients", 1, "number of clients")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed")
	fs.BoolVar(&c.direct, "direct", true, "open with O_DIRECT (block patterns): measure coopfs, not the page cache")
	fs.Int64Var(&c.startAt, "start-at", 0, "wait until this Unix time in ns before starting")
	fs.StringVar(&c.src, "src", "", "andrew: source tree")
	fs.StringVar(&c.dst, "dst", "", "andrew: target directory (in the mount)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.result == "" {
		return errors.New("worker: --result is required")
	}
	if c.startAt > 0 {
		if d := time.Until(time.Unix(0, c.startAt)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	var r *Result
	var err error
	switch c.mode {
	case "copy":
		r, err = workerCopy(ctx, c)
	case PatSequential, PatRandom, PatHotcoldLocal, PatHotcoldGlobal:
		r, err = workerBlocks(ctx, c)
	case "andrew":
		r, err = workerAndrew(ctx, c)
	default:
		return fmt.Errorf("worker: unknown mode %q", c.mode)
	}
	if err != nil {
		return err
	}
	r.Mode, r.Client = c.mode, c.client
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(c.result, b, 0o644); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if !r.Verified {
		return fmt.Errorf("worker: data check failed: %d mismatches, digest %s want %s", r.Mismatches, r.Digest, c.digest)
	}
	return nil
}

// workerCopy reads the whole file with 1 MiB reads (like cp) and hashes it.
func workerCopy(ctx context.Context, c workerConfig) (*Result, error) {
	var size int64
	if st, err := os.Stat(c.file); err == nil {
		size = st.Size()
	}
	start := time.Now()
	pr := newProgress(start, size)
	res, err := workload.ReadFile(ctx, c.file, false, workload.SeqOptions{BufSize: 1 << 20, Hash: true, Progress: pr.read})
	end := time.Now()
	if err != nil {
		return nil, err
	}
	r := &Result{Bytes: res.Bytes, Ops: res.Bytes >> 20, StartNS: start.UnixNano(), EndNS: end.UnixNano(),
		Digest: res.Digest.String(), Progress: pr.points}
	if !pr.first.IsZero() {
		r.FirstByteNS = pr.first.UnixNano()
	}
	if n := len(r.Progress); n == 0 || r.Progress[n-1].Bytes < res.Bytes {
		r.Progress = append(r.Progress, BytesAt{AtNS: end.Sub(start).Nanoseconds(), Bytes: res.Bytes})
	}
	r.Verified = c.digest == "" || r.Digest == c.digest
	return r, nil
}

// Offsets returns the block numbers a client reads under pattern: reads
// block numbers in [0, blocks). Sequential starts at block 0 and wraps;
// random is uniform; hotcold puts 80 % of the reads in a 20 % hot region,
// the client's own (local, spread over the file by client index) or the
// first fifth of the file (global); within a region reads are uniform.
func Offsets(pattern string, blocks int64, reads, client, clients int, seed uint64) ([]int64, error) {
	if blocks < 1 {
		return nil, errors.New("offsets: empty file")
	}
	rng := rand.New(rand.NewPCG(seed, uint64(client)+1))
	out := make([]int64, reads)
	hot := max(blocks/5, 1)
	var hotStart int64
	switch pattern {
	case PatSequential:
		for i := range out {
			out[i] = int64(i) % blocks
		}
		return out, nil
	case PatRandom:
		for i := range out {
			out[i] = rng.Int64N(blocks)
		}
		return out, nil
	case PatHotcoldLocal:
		if clients > 0 {
			hotStart = blocks * int64(client%clients) / int64(clients)
		}
	case PatHotcoldGlobal:
	default:
		return nil, fmt.Errorf("unknown pattern %q", pattern)
	}
	for i := range out {
		if rng.IntN(10) < 8 || hot == blocks {
			out[i] = (hotStart + rng.Int64N(hot)) % blocks
		} else {
			// cold: uniform over the blocks outside the hot region
			out[i] = (hotStart + hot + rng.Int64N(blocks-hot)) % blocks
		}
	}
	return out, nil
}

// workerBlocks runs a synthetic pattern with io-sized reads, timing each,
// then checks every distinct block read against the export.
func workerBlocks(ctx context.Context, c workerConfig) (*Result, error) {
	st, err := os.Stat(c.file)
	if err != nil {
		return nil, err
	}
	offs, err := Offsets(c.mode, st.Size()/int64(c.ioSize), c.reads, c.client, c.clients, c.seed)
	if err != nil {
		return nil, err
	}
	direct := c.direct
	f, err := workload.Open(c.file, direct)
	if err != nil && direct {
		direct = false
		f, err = workload.Open(c.file, false)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !direct {
		// Drop what the page cache holds of the file, so that the kernel
		// does not answer for coopfs.
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	}
	// Every block read is compared with the export's bytes right after the
	// read, outside the timed section: no second read through the mount,
	// which would add traffic and disturb the caches and the counters.
	var export *os.File
	if c.export != "" {
		if export, err = os.Open(c.export); err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
		defer export.Close()
	}
	buf, want := workload.AlignedBuf(c.ioSize), make([]byte, c.ioSize)
	lat := make([]time.Duration, len(offs))
	r := &Result{Direct: direct}
	start := time.Now()
	for i, b := range offs {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t := time.Now()
		n, err := f.ReadAt(buf, b*int64(c.ioSize))
		lat[i] = time.Since(t)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read block %d: %w", b, err)
		}
		r.Bytes += int64(n)
		if export != nil {
			m, err := export.ReadAt(want, b*int64(c.ioSize))
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("verify block %d: %w", b, err)
			}
			if m != n || !bytes.Equal(buf[:n], want[:m]) {
				r.Mismatches++
			}
		}
	}
	end := time.Now()
	r.Ops = int64(len(offs))
	r.StartNS, r.EndNS = start.UnixNano(), end.UnixNano()
	latStats(r, lat)
	r.Verified = r.Mismatches == 0
	return r, nil
}

func latStats(r *Result, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	q := func(p float64) float64 { return us(s[min(len(s)-1, int(p*float64(len(s))))]) }
	r.MeanUS = us(sum) / float64(len(lat))
	r.P50US, r.P90US, r.P99US, r.MaxUS = q(0.5), q(0.9), q(0.99), us(s[len(s)-1])
}

// MakeSourceTree writes an Andrew-style source tree under dir: dirs
// directories of files files each, ".c" sources of 1-16 KiB of printable
// pseudo-random text. It returns the number of bytes written.
func MakeSourceTree(dir string, dirs, files int, seed uint64) (int64, error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	var total int64
	for d := range dirs {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%02d", d), "src")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return total, err
		}
		for f := range files {
			n := 1024 + rng.IntN(15*1024)
			b := make([]byte, n)
			for i := range b {
				b[i] = byte('a' + rng.IntN(26))
				if i%64 == 63 {
					b[i] = '\n'
				}
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.c", f)), b, 0o644); err != nil {
				return total, err
			}
			total += int64(n)
		}
	}
	return total, nil
}

// workerAndrew runs the five phases of the modified Andrew benchmark
// (seed 000 §IV-B) from src into dst (in the mount), each timed.
func workerAndrew(ctx context.Context, c workerConfig) (*Result, error) {
	if c.src == "" || c.dst == "" {
		return nil, errors.New("andrew: --src and --dst are required")
	}
	var dirs, files []string // relative to src
	err := filepath.WalkDir(c.src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.src, p)
		if d.IsDir() {
			dirs = append(dirs, rel)
		} else {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r := &Result{}
	start := time.Now()
	phase := func(name string, fn func() error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := time.Now()
		if err := fn(); err != nil {
			return fmt.Errorf("andrew %s: %w", name, err)
		}
		r.Phases = append(r.Phases, Phase{Name: name, MS: float64(time.Since(t)) / 1e6})
		return nil
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"MakeDir", func() error {
			for _, d := range dirs {
				if err := os.MkdirAll(filepath.Join(c.dst, d), 0o755); err != nil {
					return err
				}
			}
			return nil
		}},
		{"Copy", func() error {
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(c.src, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(c.dst, f), b, 0o644); err != nil {
					return err
				}
				r.Bytes += int64(len(b))
			}
			return nil
		}},
		{"ScanDir", func() error {
			return filepath.WalkDir(c.dst, func(p string, d os.DirEntry, err error) error {
				if err != nil {
					return err
				}
				var st syscall.Stat_t
				return syscall.Lstat(p, &st)
			})
		}},
		{"ReadAll", func() error {
			for _, f := range files {
				if _, err := os.ReadFile(filepath.Join(c.dst, f)); err != nil {
					return err
				}
			}
			return nil
		}},
		{"Make", func() error {
			// "Compile" every source into an object file (a few rounds of
			// SHA-256 over it, half its size written), then "link" them.
			var link bytes.Buffer
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(c.dst, f))
				if err != nil {
					return err
				}
				obj := make([]byte, 0, len(b)/2+32)
				sum := sha256.Sum256(b)
				for len(obj) < len(b)/2 {
					sum = sha256.Sum256(append(sum[:], b[len(obj)%len(b):]...))
					obj = append(obj, sum[:]...)
				}
				o := filepath.Join(c.dst, f[:len(f)-len(filepath.Ext(f))]+".o")
				if err := os.WriteFile(o, obj, 0o644); err != nil {
					return err
				}
				link.Write(obj[:32])
			}
			return os.WriteFile(filepath.Join(c.dst, "a.out"), link.Bytes(), 0o755)
		}},
	}
	for _, s := range steps {
		if err := phase(s.name, s.fn); err != nil {
			return nil, err
		}
	}
	r.StartNS, r.EndNS = start.UnixNano(), time.Now().UnixNano()
	r.Ops = int64(len(files))
	// Check the copies against the sources.
	r.Verified = true
	for _, f := range files {
		a, err1 := os.ReadFile(filepath.Join(c.src, f))
		b, err2 := os.ReadFile(filepath.Join(c.dst, f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			r.Mismatches++
			r.Verified = false
		}
	}
	return r, nil
}
