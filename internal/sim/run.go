package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// RunOptions control one run.
type RunOptions struct {
	// Algorithm and Config label the Metrics ("default" if Config is empty).
	Algorithm, Config string
	// Progress, if set, is called every ProgressEvery accesses with the
	// number simulated so far.
	Progress      func(done int64)
	ProgressEvery int64
}

// Run replays w through alg with parameters p and returns the metrics of
// the accesses after the warm-up. The first p.WarmUp accesses warm the
// caches and are not counted; if the workload has no more accesses than
// that, nothing is discarded and Metrics.WarmUp is 0 (short traces would
// otherwise yield no results). Run checks ctx every 64Ki accesses.
func Run(ctx context.Context, w Workload, alg Algorithm, p Params, o RunOptions) (Metrics, error) {
	if err := p.Validate(); err != nil {
		return Metrics{}, err
	}
	if o.Config == "" {
		o.Config = "default"
	}
	if ps, ok := alg.(Prescanner); ok {
		src, err := w.Open()
		if err != nil {
			return Metrics{}, fmt.Errorf("open %s for prescan: %w", w.Name(), err)
		}
		err = ps.Prescan(src)
		CloseSource(src)
		if err != nil {
			return Metrics{}, fmt.Errorf("prescan %s: %w", w.Name(), err)
		}
	}
	src, err := w.Open()
	if err != nil {
		return Metrics{}, fmt.Errorf("open %s: %w", w.Name(), err)
	}
	defer CloseSource(src)
	rec := NewRecorder(p)
	var n, warm int64
	for {
		a, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Metrics{}, fmt.Errorf("read %s: %w", w.Name(), err)
		}
		if a.Client < 0 || a.Client >= p.Clients {
			return Metrics{}, fmt.Errorf("%s: access %d names client %d, but there are %d clients (set --clients)", w.Name(), n+1, a.Client, p.Clients)
		}
		if n == int64(p.WarmUp) && n > 0 {
			rec.Reset()
			warm = n
		}
		rec.Begin(a)
		rec.Record(a, alg.Access(a, rec.Counters()))
		n++
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return Metrics{}, err
			}
		}
		if o.Progress != nil && o.ProgressEvery > 0 && n%o.ProgressEvery == 0 {
			o.Progress(n)
		}
	}
	return rec.Metrics(o.Algorithm, o.Config, w.Name(), warm), nil
}

// Slice is an in-memory workload, for tests and small generated traces.
type Slice struct {
	Label    string
	Accesses []Access
}

// Name implements Workload.
func (s *Slice) Name() string { return s.Label }

// Open implements Workload.
func (s *Slice) Open() (Source, error) { return &sliceSource{a: s.Accesses}, nil }

type sliceSource struct {
	a []Access
	i int
}

func (s *sliceSource) Next() (Access, error) {
	if s.i >= len(s.a) {
		return Access{}, io.EOF
	}
	s.i++
	return s.a[s.i-1], nil
}

// Collect reads a whole workload into memory (tests, small traces).
func Collect(w Workload) ([]Access, error) {
	var out []Access
	err := ForEach(w, func(a Access) { out = append(out, a) })
	return out, err
}
