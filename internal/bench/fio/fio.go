package fio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/workload"
	"github.com/coopfs/coopfs/internal/block"
)

// Defaults of Config, and the smaller figures of --quick.
const (
	DefaultSize        = 1 << 30
	DefaultSmallFiles  = 10000
	DefaultSmallSize   = 128 << 10
	DefaultRandSeconds = 10
	DefaultReps        = 3

	QuickSize        = 32 << 20
	QuickSmallFiles  = 200
	QuickRandSeconds = 1
	QuickReps        = 1
)

// jobCounts are the numbers of fio jobs of the sequential steps.
func jobCounts() []int { return []int{1, 4, 16} }

// AllTargets are the targets, in table order.
func AllTargets() []string { return []string{TargetExt4, TargetPass, TargetCoopWT, TargetCoopWB} }

// Config is one run.
type Config struct {
	Size        int64 // bytes each sequential step writes and reads, over all its jobs
	SmallFiles  int
	SmallSize   int64
	RandSeconds int // runtime of each random-read step
	Reps        int
	Targets     []string // "" = AllTargets
	Fio         string   // the fio binary ("" = fio on PATH)
	// Binary and Env run the coopfs processes ("" = this program).
	Binary string
	Env    []string
	// Dir holds the export, the mounts and the logs ("" = a temporary
	// directory, removed afterwards unless Keep).
	Dir      string
	Keep     bool
	Command  string
	Progress io.Writer
	Logger   *slog.Logger
}

// Quick sets the small figures of --quick where c leaves them zero.
func (c *Config) Quick() {
	if c.Size == 0 {
		c.Size = QuickSize
	}
	if c.SmallFiles == 0 {
		c.SmallFiles = QuickSmallFiles
	}
	if c.RandSeconds == 0 {
		c.RandSeconds = QuickRandSeconds
	}
	if c.Reps == 0 {
		c.Reps = QuickReps
	}
}

func (c *Config) setDefaults() {
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.SmallFiles == 0 {
		c.SmallFiles = DefaultSmallFiles
	}
	if c.SmallSize == 0 {
		c.SmallSize = DefaultSmallSize
	}
	if c.RandSeconds == 0 {
		c.RandSeconds = DefaultRandSeconds
	}
	if c.Reps == 0 {
		c.Reps = DefaultReps
	}
	if len(c.Targets) == 0 {
		c.Targets = AllTargets()
	}
	if c.Fio == "" {
		c.Fio = "fio"
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate checks a Config after defaults; exported for the CLI.
func (c *Config) Validate() error {
	c.setDefaults()
	maxJobs := int64(slices.Max(jobCounts()))
	switch {
	case c.Size < maxJobs<<20:
		return fmt.Errorf("--size %d: want at least %d MiB (1 MiB per job of the %d-job step)", c.Size, maxJobs, maxJobs)
	case c.SmallFiles < 1 || c.SmallFiles > 1_000_000:
		return fmt.Errorf("--small-files %d: want 1 to 1000000", c.SmallFiles)
	case c.SmallSize < 1 || c.SmallSize > 64<<20:
		return fmt.Errorf("--small-size %d: want 1 byte to 64 MiB", c.SmallSize)
	case c.RandSeconds < 1 || c.RandSeconds > 3600:
		return fmt.Errorf("--rand-runtime %ds: want 1s to 1h", c.RandSeconds)
	case c.Reps < 1 || c.Reps > 100:
		return fmt.Errorf("--reps %d: want 1 to 100", c.Reps)
	}
	for _, t := range c.Targets {
		if !slices.Contains(AllTargets(), t) {
			return fmt.Errorf("--targets: unknown target %q (want some of %s)", t, strings.Join(AllTargets(), ","))
		}
	}
	return nil
}

// bench is one run in progress.
type bench struct {
	cfg    Config
	r      *Report
	dir    string
	export string
	p      io.Writer
}

// Run runs the job set on every target and returns the finished report.
// Everything it starts is stopped before it returns.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkFio(ctx, cfg.Fio); err != nil {
		return nil, err
	}
	if err := cluster.FUSEUnavailable(); err != nil {
		return nil, fmt.Errorf("bench fio measures FUSE mounts, and FUSE cannot be used here: %w", err)
	}
	if err := workload.DropCaches(); err != nil {
		return nil, fmt.Errorf("bench fio drops caches before its cold reads: %w", err)
	}
	b := &bench{cfg: cfg, r: NewReport(cfg.Command, cfg.Targets), p: cfg.Progress}
	b.declare()
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "coopfs-bench-fio-")
		if err != nil {
			return nil, err
		}
		dir = d
		if !cfg.Keep {
			defer func() {
				if live, _ := cluster.MountsUnder(d); len(live) == 0 {
					os.RemoveAll(d)
				}
			}()
		}
	}
	b.dir = dir
	b.export = filepath.Join(dir, "export")
	if err := os.MkdirAll(b.export, 0o755); err != nil {
		return nil, err
	}
	for rep := range cfg.Reps {
		b.r.Load = append(b.r.Load, loadAvg())
		for _, t := range cfg.Targets {
			fmt.Fprintf(b.p, "repetition %d of %d: %s...\n", rep+1, cfg.Reps, t)
			if err := b.runTarget(ctx, t); err != nil {
				return nil, err
			}
		}
	}
	b.r.Finish()
	return b.r, nil
}

func (b *bench) declare() {
	r, c := b.r, b.cfg
	r.Params["size"] = block.Size(c.Size).String()
	r.Params["small_files"] = strconv.Itoa(c.SmallFiles)
	r.Params["small_size"] = block.Size(c.SmallSize).String()
	r.Params["rand_runtime"] = strconv.Itoa(c.RandSeconds) + "s"
	r.Params["reps"] = strconv.Itoa(c.Reps)
	for _, n := range jobCounts() {
		r.Row(seqKey("write", n), fmt.Sprintf("sequential 1 MiB writes, %d jobs, end_fsync", n), UnitMBps)
	}
	for _, n := range jobCounts() {
		r.Row(seqKey("read", n), fmt.Sprintf("sequential 1 MiB reads, %d jobs, cold", n), UnitMBps)
	}
	r.Row(KeyRand, fmt.Sprintf("4 KiB random reads, %d jobs, buffered, after seq-read-1", randJobs), UnitIOPS)
	r.Row(KeyRandDirect, fmt.Sprintf("4 KiB random reads, %d jobs, O_DIRECT, after seq-read-1", randJobs), UnitIOPS)
	r.Row(KeyTTFB, "open to the first 4 KiB of a file, cold (median over the 16-job files)", UnitMicros)
	name := fmt.Sprintf("%d files of %s", c.SmallFiles, block.Size(c.SmallSize))
	r.Row(KeySmallCreate, "create and write "+name, UnitFilesS)
	r.Row(KeySmallRead, "read "+name+", cold", UnitFilesS)
	r.Row(KeySmallStat, "stat "+name+", cold", UnitFilesS)
}

// Row keys besides seq-write-N and seq-read-N.
const (
	KeyRand        = "rand-read-4k"
	KeyRandDirect  = "rand-read-4k-direct"
	KeyTTFB        = "ttfb"
	KeySmallCreate = "small-create"
	KeySmallRead   = "small-read"
	KeySmallStat   = "small-stat"
	randJobs       = 4
)

func seqKey(op string, jobs int) string { return fmt.Sprintf("seq-%s-%d", op, jobs) }

// startTarget starts target name over its own directory of the export.
func (b *bench) startTarget(ctx context.Context, name string) (target, error) {
	sub := filepath.Join(b.export, name)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return nil, err
	}
	switch name {
	case TargetExt4:
		return &ext4Target{dir: sub}, nil
	case TargetPass:
		return newPassTarget(ctx, sub, filepath.Join(b.dir, "mnt-bindfs"))
	}
	// The memory cache holds the 1-job file, as bench local's does, so that
	// the random reads after seq-read-1 are served by coopfs's cache.
	cache := b.cfg.Size + b.cfg.Size/8 + 64<<20
	ccfg := cluster.Config{Binary: b.cfg.Binary, Env: b.cfg.Env, Export: b.export, Clients: 1,
		Dir: filepath.Join(b.dir, name), Keep: true, Logger: b.cfg.Logger,
		ServerArgs: []string{"--log-level", "warn"},
		MountArgs:  []string{"--log-level", "warn", "--cache-size", strconv.FormatInt(cache, 10)}}
	if name == TargetCoopWB {
		// A fresh disk cache per repetition, room for everything the steps
		// write twice over (dirty data waits there for its write-back).
		disk := filepath.Join(b.dir, "disk-cache-"+name)
		if err := os.RemoveAll(disk); err != nil {
			return nil, err
		}
		size := 2*(3*b.cfg.Size+int64(b.cfg.SmallFiles)*(b.cfg.SmallSize+4096)) + 1<<30
		ccfg.MountArgs = append(ccfg.MountArgs, "--disk-cache", disk, "--disk-cache-size", strconv.FormatInt(size, 10),
			"--write-policy", "write-back")
	}
	return newCoopTarget(ctx, name, name, ccfg)
}

// runTarget runs every step once on target name, then removes its files.
func (b *bench) runTarget(ctx context.Context, name string) (err error) {
	t, err := b.startTarget(ctx, name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := t.close(); cerr != nil && err == nil {
			err = fmt.Errorf("stop %s: %w", name, cerr)
		}
		if err == nil {
			err = os.RemoveAll(filepath.Join(b.export, name))
		}
	}()
	steps := []func(context.Context, target) error{b.seqWrites, b.seqReads, b.ttfb, b.smallFiles}
	for _, step := range steps {
		if err := step(ctx, t); err != nil {
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}
