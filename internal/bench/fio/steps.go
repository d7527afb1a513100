package fio

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/bench/report"
)

// checkFio says in one line what to do when fio cannot run.
func checkFio(ctx context.Context, bin string) error {
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("bench fio needs fio (apt-get install fio, or make deps): %s: %w", bin, err)
	}
	if !strings.HasPrefix(string(out), "fio-") {
		return fmt.Errorf("%s --version printed %q, not fio's version", bin, bytes.TrimSpace(out))
	}
	return nil
}

// runFio runs fio with args and the JSON output, and parses it.
func (b *bench) runFio(ctx context.Context, args ...string) (FioResult, error) {
	args = append([]string{"--output-format=json", "--ioengine=psync", "--fallocate=none", "--group_reporting"}, args...)
	cmd := exec.CommandContext(ctx, b.cfg.Fio, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	res, err := ParseFio(stdout.Bytes())
	if runErr != nil || err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return res, fmt.Errorf("fio %s: %v %v: %s", strings.Join(args[4:], " "), runErr, err, msg)
	}
	return res, nil
}

func seqArgs(root, op string, jobs int, size int64) []string {
	return []string{"--name=" + seqKey(op, jobs), "--directory=" + root,
		"--filename_format=" + seqKey("file", jobs) + ".$jobnum", "--rw=" + op, "--bs=1M",
		"--size=" + strconv.FormatInt(size/int64(jobs)>>20<<20, 10), "--numjobs=" + strconv.Itoa(jobs)}
}

// seqWrites writes the files of every sequential step.
func (b *bench) seqWrites(ctx context.Context, t target) error {
	for _, n := range jobCounts() {
		fmt.Fprintf(b.p, "  %s on %s\n", seqKey("write", n), t.name())
		row := b.r.Get(seqKey("write", n))
		res, err := b.runFio(ctx, append(seqArgs(t.root(), "write", n, b.cfg.Size), "--end_fsync=1")...)
		if err != nil {
			row.Fail(t.name(), err)
			continue
		}
		row.Add(t.name(), res.WriteBW/1e6)
	}
	return nil
}

// seqReads reads them back, cold, and runs the random reads after the
// 1-job read.
func (b *bench) seqReads(ctx context.Context, t target) error {
	for _, n := range jobCounts() {
		if err := t.cold(ctx); err != nil {
			return err
		}
		fmt.Fprintf(b.p, "  %s on %s\n", seqKey("read", n), t.name())
		row := b.r.Get(seqKey("read", n))
		res, err := b.runFio(ctx, seqArgs(t.root(), "read", n, b.cfg.Size)...)
		switch {
		case err != nil:
			row.Fail(t.name(), err)
		case res.ReadBytes == 0:
			row.Fail(t.name(), fmt.Errorf("read nothing"))
		default:
			row.Add(t.name(), res.ReadBW/1e6)
		}
		if n == 1 {
			b.randReads(ctx, t)
		}
	}
	return nil
}

func (b *bench) randReads(ctx context.Context, t target) {
	file := filepath.Join(t.root(), seqKey("file", 1)+".0")
	for _, direct := range []bool{false, true} {
		key := KeyRand
		if direct {
			key = KeyRandDirect
		}
		fmt.Fprintf(b.p, "  %s on %s\n", key, t.name())
		row := b.r.Get(key)
		args := []string{"--name=" + key, "--filename=" + file, "--rw=randread", "--bs=4k",
			"--size=" + strconv.FormatInt(b.cfg.Size>>20<<20, 10), "--numjobs=" + strconv.Itoa(randJobs),
			"--time_based", "--runtime=" + strconv.Itoa(b.cfg.RandSeconds),
			// Warm: each file system's caches as seq-read-1 left them
			// (fio would drop the mount's page cache, not bindfs's ext4).
			"--invalidate=0"}
		if direct {
			args = append(args, "--direct=1")
		}
		res, err := b.runFio(ctx, args...)
		if err != nil {
			row.Fail(t.name(), err)
			continue
		}
		row.Add(t.name(), res.ReadIOPS)
	}
}

// ttfb times, cold, the open and first 4 KiB read of each file of the
// 16-job step, one after another; the sample is their median.
func (b *bench) ttfb(ctx context.Context, t target) error {
	if err := t.cold(ctx); err != nil {
		return err
	}
	fmt.Fprintf(b.p, "  %s on %s\n", KeyTTFB, t.name())
	row := b.r.Get(KeyTTFB)
	buf := make([]byte, 4096)
	n := slices.Max(jobCounts())
	var lat []float64
	for i := range n {
		path := filepath.Join(t.root(), fmt.Sprintf("%s.%d", seqKey("file", n), i))
		start := time.Now()
		f, err := os.Open(path)
		if err == nil {
			_, err = io.ReadFull(f, buf)
			f.Close()
		}
		if err != nil {
			row.Fail(t.name(), fmt.Errorf("first byte of %s: %w", filepath.Base(path), err))
			return nil
		}
		lat = append(lat, float64(time.Since(start).Nanoseconds())/1e3)
	}
	row.Add(t.name(), report.Median(lat))
	return nil
}

// smallFiles creates, reads and stats the small files, as juicefs bench
// does: one process, one directory, files written whole and closed
// without fsync.
func (b *bench) smallFiles(ctx context.Context, t target) error {
	if err := os.MkdirAll(filepath.Join(t.root(), "small"), 0o755); err != nil {
		return fmt.Errorf("small files: %w", err)
	}
	// t.root() moves when a restart mounts coopfs afresh.
	name := func(i int) string { return filepath.Join(t.root(), "small", fmt.Sprintf("f%06d", i)) }
	data := make([]byte, b.cfg.SmallSize)
	for i := range data {
		data[i] = byte(i % 251)
	}
	nf := b.cfg.SmallFiles
	each := func(key string, op func(i int) error) error {
		fmt.Fprintf(b.p, "  %s on %s\n", key, t.name())
		start := time.Now()
		for i := range nf {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := op(i); err != nil {
				b.r.Get(key).Fail(t.name(), err)
				return nil
			}
		}
		b.r.Get(key).Add(t.name(), float64(nf)/time.Since(start).Seconds())
		return nil
	}
	if err := each(KeySmallCreate, func(i int) error { return os.WriteFile(name(i), data, 0o644) }); err != nil {
		return err
	}
	syscall.Sync()
	if err := t.cold(ctx); err != nil {
		return err
	}
	buf := make([]byte, b.cfg.SmallSize+1)
	read := func(i int) error {
		f, err := os.Open(name(i))
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.ReadFull(f, buf)
		if err != io.ErrUnexpectedEOF && err != nil {
			return err
		}
		if int64(n) != b.cfg.SmallSize {
			return fmt.Errorf("%s: read %d bytes of %d", name(i), n, b.cfg.SmallSize)
		}
		return nil
	}
	if err := each(KeySmallRead, read); err != nil {
		return err
	}
	if err := t.cold(ctx); err != nil {
		return err
	}
	return each(KeySmallStat, func(i int) error { _, err := os.Lstat(name(i)); return err })
}

// loadAvg is the machine's 1-minute load average (0 if unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
