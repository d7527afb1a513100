package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/bench/workload"
)

// Write row keys.
const (
	KeyExportWrite = "export-write"
	KeyWTWrite     = "wt-write"
	KeyDiskWrite   = "disk-write"
	KeyWBWrite     = "wb-write"
)

// Targets of the write ratios.
const (
	TargetWriteThrough = 0.6
	TargetWriteBack    = 0.8
)

func (b *bench) declareWriteRows() {
	r := b.r
	r.Row(KeyExportWrite, "export dir directly, seq 1 MiB writes + fsync", report.UnitMBps)
	r.Row(KeyWTWrite, "coopfs write-through, seq 1 MiB writes + fsync", report.UnitMBps).Bounds(KeyExportWrite, TargetWriteThrough)
	r.Row(KeyDiskWrite, "the disk cache's directory directly, seq 1 MiB writes + fsync", report.UnitMBps)
	r.Row(KeyWBWrite, "coopfs write-back into its disk cache, seq 1 MiB writes + fsync", report.UnitMBps).Bounds(KeyDiskWrite, TargetWriteBack)
}

// writePhase: per repetition, the file written (1 MiB writes, fsync,
// close) to the export, through a write-through mount, to the disk cache's
// directory and through a write-back mount into that disk cache.
func (b *bench) writePhase(ctx context.Context) error {
	fmt.Fprintln(b.p, "starting a write-through and a write-back client...")
	wt, err := b.startCluster(ctx, "write-through")
	if err != nil {
		return err
	}
	defer wt.Close()
	diskDir := filepath.Join(b.dir, "disk-cache")
	cache := b.cfg.Size + b.cfg.Size/8 + 64<<20
	wb, err := cluster.Start(ctx, cluster.Config{Binary: b.cfg.Binary, Env: b.cfg.Env, Export: b.export,
		Clients: 1, Dir: filepath.Join(b.dir, "write-back"), Keep: true, Logger: b.cfg.Logger,
		MountArgs: []string{"--cache-size", strconv.FormatInt(cache, 10), "--disk-cache", diskDir,
			"--disk-cache-size", strconv.FormatInt(2*b.cfg.Size+256<<20, 10), "--write-policy", "write-back"}})
	if err != nil {
		return err
	}
	defer wb.Close()
	direct := filepath.Join(b.dir, "disk-direct")
	if err := os.MkdirAll(direct, 0o755); err != nil {
		return err
	}
	steps := []struct{ key, path string }{
		{KeyExportWrite, filepath.Join(b.export, "written-export")},
		{KeyWTWrite, filepath.Join(wt.Mountpoints()[0], "written-wt")},
		{KeyDiskWrite, filepath.Join(direct, "written")},
		{KeyWBWrite, filepath.Join(wb.Mountpoints()[0], "written-wb")},
	}
	for rep := range b.cfg.Reps {
		fmt.Fprintf(b.p, "writes, repetition %d of %d...\n", rep+1, b.cfg.Reps)
		for _, s := range steps {
			mbps, err := writeSeq(ctx, s.path, b.cfg.Size)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A failed write (ENOSPC from a full write-back cache) is a
			// result, not the end of the run: noted, the row left short.
			if err != nil {
				b.r.Notes = append(b.r.Notes, fmt.Sprintf("%s, repetition %d: %v", s.key, rep+1, err))
			} else {
				b.r.Get(s.key).Add(mbps)
			}
			if err := os.Remove(s.path); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("%s: %w", s.key, err)
			}
		}
	}
	if err := wb.Close(); err != nil {
		return err
	}
	return wt.Close()
}

// writeSeq writes size bytes to a new file at path in 1 MiB writes from a
// page-aligned buffer, fsyncs and closes it, and returns MB/s over all of it.
func writeSeq(ctx context.Context, path string, size int64) (float64, error) {
	buf := workload.AlignedBuf(1 << 20)
	for i := range buf {
		buf[i] = byte(i*7 + i>>12)
	}
	start := time.Now()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	for done := int64(0); done < size; {
		if err := ctx.Err(); err != nil {
			f.Close()
			return 0, err
		}
		n, err := f.Write(buf[:min(int64(len(buf)), size-done)])
		if err != nil {
			f.Close()
			return 0, err
		}
		done += int64(n)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, fmt.Errorf("fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return float64(size) / 1e6 / time.Since(start).Seconds(), nil
}

// mountOption is the value of option key ("max_read") in the mount options
// of the mount at dir, from /proc/self/mountinfo ("" if absent).
func mountOption(dir, key string) (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != dir {
			continue
		}
		for _, field := range f[5:] {
			for _, opt := range strings.Split(field, ",") {
				if v, ok := strings.CutPrefix(opt, key+"="); ok {
					return v, nil
				}
			}
		}
		return "", nil
	}
	return "", fmt.Errorf("%s is not a mount point", dir)
}
