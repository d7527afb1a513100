package tlscost

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/bench/workload"
	"github.com/coopfs/coopfs/internal/block"
)

// Config of a run.
type Config struct {
	Size     int64 // bytes of the test file; default 512 MiB
	Reps     int   // repetitions; default 3
	Dir      string
	Command  string
	Progress io.Writer
	Logger   *slog.Logger
}

// Modes compared.
const (
	ModeTLS      = "tls"
	ModeInsecure = "insecure"
)

var phases = []string{"cold", "peer", "memory"}

func key(phase, mode, what string) string { return phase + "_" + mode + "_" + what }

// Run measures and returns the report.
func Run(ctx context.Context, cfg Config) (*report.Report, error) {
	if cfg.Size == 0 {
		cfg.Size = 512 << 20
	}
	if cfg.Reps == 0 {
		cfg.Reps = 3
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if err := cluster.FUSEUnavailable(); err != nil {
		return nil, fmt.Errorf("bench tls measures FUSE mounts: %w", err)
	}
	if err := workload.DropCaches(); err != nil {
		return nil, fmt.Errorf("bench tls drops caches for its cold reads: %w", err)
	}
	r := report.New("tls", cfg.Command)
	r.Params["size"] = block.Size(cfg.Size).String()
	r.Params["reps"] = strconv.Itoa(cfg.Reps)
	for _, p := range phases {
		r.Row(key(p, ModeInsecure, "mbps"), p+" reads, --insecure", report.UnitMBps)
		r.Row(key(p, ModeTLS, "mbps"), p+" reads, TLS", report.UnitMBps).Compare(key(p, ModeInsecure, "mbps"), 0)
	}
	for _, p := range phases {
		r.Row(key(p, ModeInsecure, "cpu"), p+" reads, --insecure: CPU s per GB", "cpu-s/GB")
		r.Row(key(p, ModeTLS, "cpu"), p+" reads, TLS: CPU s per GB", "cpu-s/GB").Compare(key(p, ModeInsecure, "cpu"), 0)
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "coopfs-bench-tls-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	export := filepath.Join(dir, "export")
	if err := os.MkdirAll(export, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Progress, "writing a %s test file...\n", block.Size(cfg.Size))
	if _, err := workload.WriteFile(filepath.Join(export, "f"), cfg.Size, 1, nil); err != nil {
		return nil, err
	}
	for rep := range cfg.Reps {
		// Alternate which mode goes first, so that neither always runs on
		// a machine the other just warmed or disturbed.
		modes := []string{ModeTLS, ModeInsecure}
		if rep%2 == 1 {
			modes = []string{ModeInsecure, ModeTLS}
		}
		for _, mode := range modes {
			fmt.Fprintf(cfg.Progress, "repetition %d of %d, %s...\n", rep+1, cfg.Reps, mode)
			if err := once(ctx, cfg, r, export, filepath.Join(dir, fmt.Sprintf("%s-%d", mode, rep)), mode); err != nil {
				return r, fmt.Errorf("%s, repetition %d: %w", mode, rep+1, err)
			}
		}
	}
	r.Finish()
	return r, nil
}

func once(ctx context.Context, cfg Config, r *report.Report, export, dir, mode string) error {
	cache := strconv.FormatInt(cfg.Size+cfg.Size/8+64<<20, 10)
	cl, err := cluster.Start(ctx, cluster.Config{Export: export, Clients: 2, Dir: dir, Logger: cfg.Logger,
		Insecure:   mode == ModeInsecure,
		ServerArgs: []string{"--policy", "directory", "--forward-choice", "balanced", "--cache-size", cache},
		MountArgs:  []string{"--cache-size", cache}})
	if err != nil {
		return err
	}
	defer cl.Close()
	pids := []int{cl.Server.Pid, cl.Clients[0].Pid, cl.Clients[1].Pid}
	mnts := cl.Mountpoints()
	f1, f2 := filepath.Join(mnts[0], "f"), filepath.Join(mnts[1], "f")
	read := func(phase, path string, drop func() error) error {
		if err := drop(); err != nil {
			return err
		}
		c0, err := cpuSeconds(pids)
		if err != nil {
			return err
		}
		res, err := workload.ReadFile(ctx, path, false, workload.SeqOptions{})
		if err != nil {
			return err
		}
		if res.Bytes != cfg.Size {
			return fmt.Errorf("%s: read %d bytes of %d", phase, res.Bytes, cfg.Size)
		}
		c1, err := cpuSeconds(pids)
		if err != nil {
			return err
		}
		r.Get(key(phase, mode, "mbps")).Add(res.MBps())
		r.Get(key(phase, mode, "cpu")).Add((c1 - c0) / (float64(res.Bytes) / 1e9))
		return nil
	}
	if err := read("cold", f1, workload.DropCaches); err != nil {
		return err
	}
	if err := read("peer", f2, func() error { return workload.DropFile(f2) }); err != nil {
		return err
	}
	if err := read("memory", f1, func() error { return workload.DropFile(f1) }); err != nil {
		return err
	}
	return cl.Close()
}

// cpuSeconds sums the user and system CPU time of pids (clock ticks of
// 1/100 s, as Linux reports them in /proc/PID/stat).
func cpuSeconds(pids []int) (float64, error) {
	var total float64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("cpu time of %d: %w", pid, err)
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			return 0, fmt.Errorf("cpu time of %d: unexpected /proc format", pid)
		}
		f := strings.Fields(s[i+1:])
		// after ")": state(0) ... utime is field 14 of the whole line,
		// index 11 here; stime index 12.
		if len(f) < 13 {
			return 0, fmt.Errorf("cpu time of %d: unexpected /proc format", pid)
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		total += (u + st) / 100
	}
	return total, nil
}
