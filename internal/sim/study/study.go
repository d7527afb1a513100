package study

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/coopfs/coopfs/internal/sim"
)

// Env is what a study runs with.
type Env struct {
	// Quick asks for a small version (well under a minute).
	Quick bool
	// Params are the base parameters (seed defaults, then config file and
	// flags); a study overrides only what it sweeps.
	Params sim.Params
	// Progress receives progress lines; nil for silence.
	Progress io.Writer
	// Workers bounds the runs done in parallel (0: GOMAXPROCS, every core).
	Workers int
	// Trace, if set, replaces the study's generated workload where the
	// study allows it.
	Trace sim.Workload
}

func (e *Env) progressf(format string, args ...any) {
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, format+"\n", args...)
	}
}

// Config is one configuration of a study: a label, parameters and the
// workload to run.
type Config struct {
	Name     string
	Params   sim.Params
	Workload sim.Workload
}

// Report is what a study produces.
type Report struct {
	Study  string
	Rows   []sim.Metrics // one per (algorithm, configuration)
	Tables []Table       // derived tables, the seed's numbers side by side
	Plots  []Plot
	Notes  []string
}

// Table is a text table.
type Table struct {
	Name   string // file-name friendly
	Title  string
	Header []string
	Rows   [][]string
}

// RunMatrix runs every algorithm on every configuration and returns the
// metrics in order (configuration major). Algorithms not registered are
// skipped with a note in the progress output.
func RunMatrix(ctx context.Context, env *Env, algs []string, cfgs []Config) ([]sim.Metrics, error) {
	type job struct {
		alg string
		cfg Config
		i   int
	}
	var jobs []job
	for _, c := range cfgs {
		for _, a := range algs {
			if !Has(a) {
				env.progressf("  (skipping %s: not registered)", a)
				continue
			}
			jobs = append(jobs, job{a, c, len(jobs)})
		}
	}
	out := make([]sim.Metrics, len(jobs))
	workers := env.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	var mu sync.Mutex
	done := 0
	start := time.Now()
	for _, j := range jobs {
		g.Go(func() error {
			alg, p, err := Build(j.alg, j.cfg.Params)
			if err != nil {
				return err
			}
			ro := sim.RunOptions{Algorithm: j.alg, Config: j.cfg.Name}
			if env.Progress != nil {
				ro.ProgressEvery = 1 << 20
				ro.Progress = func(n int64) {
					mu.Lock()
					env.progressf("  ... %s on %s: %.1fM accesses (%s elapsed)", j.alg, j.cfg.Name, float64(n)/1e6,
						time.Since(start).Round(100*time.Millisecond))
					mu.Unlock()
				}
			}
			m, err := sim.Run(ctx, j.cfg.Workload, alg, p, ro)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", j.alg, j.cfg.Name, err)
			}
			out[j.i] = m
			mu.Lock()
			done++
			env.progressf("  [%d/%d] %-10s %-14s %8.3f ms/access  (%s elapsed)", done, len(jobs), j.alg, j.cfg.Name,
				m.AvgAccessMs, time.Since(start).Round(100*time.Millisecond))
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// find returns the row for (alg, cfg).
func find(rows []sim.Metrics, alg, cfg string) (sim.Metrics, bool) {
	for _, r := range rows {
		if r.Algorithm == alg && r.Config == cfg {
			return r, true
		}
	}
	return sim.Metrics{}, false
}
