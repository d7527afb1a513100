package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/sim"
)

// suiteTrace is one trace of the bench suite: its file in the suite's
// directory, how it is read and made.
type suiteTrace struct {
	name    string
	format  sim.Format
	clients int
	sizes   sim.SizeMode
	from    string // the trace it is converted from ("": generated)
}

// suiteTraces are issue 13's traces: a Zipf workload of N accesses with one
// client and with 42, in every format that holds it (oracleGeneral and txt
// carry no client; the 42-client binary trace is oracleGeneralOpNS). The
// one-client csv is converted from oracleGeneral so that it holds the reads
// only, as every libCacheSim format does; the 42-client one from
// oracleGeneralOpNS, likewise.
func suiteTraces() []suiteTrace {
	return []suiteTrace{
		{"z1.coopfs", sim.FormatCoopfs, 1, sim.SizesBlocks, ""},
		{"z1.oracleGeneral", sim.FormatOracle, 1, sim.SizesIgnore, "z1.coopfs"},
		{"z1.txt", sim.FormatTxt, 1, sim.SizesBlocks, "z1.coopfs"},
		{"z1.csv", sim.FormatCSV, 1, sim.SizesIgnore, "z1.oracleGeneral"},
		{"z42.coopfs", sim.FormatCoopfs, 42, sim.SizesBlocks, ""},
		{"z42.oracleGeneralOpNS", sim.FormatOracleNS, 42, sim.SizesIgnore, "z42.coopfs"},
		{"z42.csv", sim.FormatCSV, 42, sim.SizesIgnore, "z42.oracleGeneralOpNS"},
	}
}

// suite runs issue 13's benchmark in dir: the traces (made if absent),
// each reader alone, then every algorithm on every trace (libCacheSim
// beside).
func (b *bencher) suite(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--suite: %w", err)
	}
	for _, t := range suiteTraces() {
		if err := b.makeTrace(dir, t); err != nil {
			return err
		}
	}
	for _, t := range suiteTraces() {
		if err := b.reader(dir, t); err != nil {
			return err
		}
	}
	for _, t := range suiteTraces() {
		bt := benchTrace{path: filepath.Join(dir, t.name), format: t.format, sizes: string(t.sizes), clients: t.clients}
		if err := b.trace(bt); err != nil {
			return err
		}
	}
	return nil
}

// makeTrace writes t in dir unless a file of that name is there. A child
// process (coopfs sim gen or sim convert) makes it, not this one: a child's
// peak RSS as the kernel reports it (ru_maxrss) starts from its parent's
// peak at the exec, so a bench process that held a generated trace would
// lend every later row its size.
func (b *bencher) makeTrace(dir string, t suiteTrace) error {
	path := filepath.Join(dir, t.name)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	fmt.Fprintf(b.stderr, "making %s\n", path)
	tmp := path + ".tmp"
	defer os.Remove(tmp)
	var args []string
	if t.from == "" {
		args = []string{"sim", "gen", "zipf", "--clients", fmt.Sprint(t.clients), "--accesses", fmt.Sprint(*b.f.accesses),
			"--files", fmt.Sprint(*b.f.files), "--seed", "1"}
	} else {
		src := suiteTraceNamed(t.from)
		args = []string{"sim", "convert", "--trace", filepath.Join(dir, src.name), "--format", string(src.format),
			"--to", string(t.format), "--out", tmp}
	}
	c := exec.CommandContext(b.ctx, b.self, args...)
	var errb bytes.Buffer
	c.Stderr = &errb
	if t.from == "" {
		f, err := os.Create(tmp)
		if err != nil {
			return fmt.Errorf("--suite: %w", err)
		}
		defer f.Close()
		c.Stdout = f
	}
	if err := c.Run(); err != nil {
		return fmt.Errorf("making %s: %w: %s", t.name, err, strings.TrimSpace(errb.String()))
	}
	return os.Rename(tmp, path)
}

func suiteTraceNamed(name string) suiteTrace {
	for _, t := range suiteTraces() {
		if t.name == name {
			return t
		}
	}
	panic("no suite trace " + name)
}

// reader times t's reader alone: the whole file (read once before, into
// the page cache) parsed in batches as Run reads it (no numbering, no
// algorithm), in this process.
func (b *bencher) reader(dir string, t suiteTrace) error {
	path := filepath.Join(dir, t.name)
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := warm(path); err != nil {
		return err
	}
	w := &sim.File{Path: path, Format: t.format, Options: sim.ReadOptions{Format: t.format, Sizes: sim.SizesKeep}}
	load := loadAvg()
	cpu0, start := processCPU(), time.Now()
	src, err := w.Open()
	if err != nil {
		return err
	}
	var n int64
	batch := make([]sim.Access, 8192)
	for {
		k, err := sim.FillBatch(src, batch)
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			sim.CloseSource(src)
			return fmt.Errorf("reading %s: %w", t.name, err)
		}
	}
	sim.CloseSource(src)
	wall, cpu := time.Since(start).Seconds(), (processCPU() - cpu0).Seconds()
	mb := float64(st.Size()) / 1e6
	r := benchRow{Tool: "reader", Algorithm: "-", Trace: t.name, Format: string(t.format), Clients: t.clients, Accesses: n,
		WallS: wall, CPUS: cpu, PerSec: float64(n) / wall, MBPerS: mb / wall, Load1: load}
	if cpu > 0 {
		r.PerCPUSec, r.MBPerCPUS = float64(n)/cpu, mb/cpu
	}
	if t.format != sim.FormatOracle && t.format != sim.FormatOracleNS {
		r.TargetMps = textTarget
		r.MetWall, r.MetCPU = r.MBPerS >= textTarget, r.MBPerCPUS >= textTarget
	}
	b.add(r)
	return nil
}

// warm reads path once so that the timed read finds it in the page cache:
// the reader's speed, not the disk's.
func warm(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// processCPU returns this process's user + system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
