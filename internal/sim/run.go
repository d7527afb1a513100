package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// prefetchBatch is the number of accesses a prefetcher hands over at once.
const prefetchBatch = 8192

// prefetcher reads a source ahead in its own goroutine (the trace is parsed
// on one core while the algorithm runs on another) and hands the accesses
// over in batches, in order.
type prefetcher struct {
	out  chan prefetched
	free chan []Access
	quit chan struct{}
	done chan struct{}
	cur  []Access
	src  Source // in step: no goroutine, one access at a time
	ids  *IDs   // numbers the accesses (Numberer), nil if not asked
}

type prefetched struct {
	batch []Access
	err   error // io.EOF at the end
}

// ReadAheader is implemented by sources that may be read ahead of the
// simulation (trace files, generators, merges of them): their accesses do
// not depend on what the algorithm did. Other sources (closed-loop
// workloads whose times follow the simulated completions) are read one
// access at a time, in step with the algorithm.
type ReadAheader interface {
	ReadAhead() bool
}

// BatchSource is a Source that also hands out many accesses per call (the
// trace readers and their wrappers): fewer calls and copies per access.
type BatchSource interface {
	Source
	// NextBatch fills dst from the start and returns how many it filled;
	// the error (io.EOF at the end) comes after those accesses.
	NextBatch(dst []Access) (int, error)
}

// FillBatch fills dst from src (its NextBatch if it has one) and returns
// how many accesses it filled; err (io.EOF at the end) follows them.
func FillBatch(src Source, dst []Access) (int, error) {
	if bs, ok := src.(BatchSource); ok {
		return bs.NextBatch(dst)
	}
	for i := range dst {
		a, err := src.Next()
		if err != nil {
			return i, err
		}
		dst[i] = a
	}
	return len(dst), nil
}

// fastBatch fills dst for a reader with a fast path: fast takes what it
// can straight from the read buffer, and next reads one access the slow way
// (refilling the buffer, or reporting an error or the end) whenever fast
// stops short.
func fastBatch(dst []Access, fast func([]Access) int, next func() (Access, error)) (int, error) {
	i := 0
	for i < len(dst) {
		if i += fast(dst[i:]); i == len(dst) {
			break
		}
		a, err := next()
		if err != nil {
			return i, err
		}
		dst[i] = a
		i++
	}
	return i, nil
}

func canReadAhead(src Source) bool {
	r, ok := src.(ReadAheader)
	return ok && r.ReadAhead()
}

func newPrefetcher(src Source, ids *IDs) *prefetcher {
	if !canReadAhead(src) {
		return &prefetcher{src: src, cur: make([]Access, 0, 1), ids: ids}
	}
	p := &prefetcher{out: make(chan prefetched, 4), free: make(chan []Access, 6),
		quit: make(chan struct{}), done: make(chan struct{}), ids: ids}
	for range 6 {
		p.free <- make([]Access, 0, prefetchBatch)
	}
	go p.run(src)
	return p
}

func (p *prefetcher) run(src Source) {
	defer close(p.done)
	for {
		var b []Access
		select {
		case b = <-p.free:
		case <-p.quit:
			return
		}
		n, err := FillBatch(src, b[:prefetchBatch])
		b = b[:n]
		if p.ids != nil {
			p.ids.Number(b)
		}
		if len(b) > 0 {
			select {
			case p.out <- prefetched{batch: b}:
			case <-p.quit:
				return
			}
		}
		if err != nil {
			select {
			case p.out <- prefetched{err: err}:
			case <-p.quit:
			}
			return
		}
	}
}

// next returns the next batch (valid until the following call), nil at the
// end of the source.
func (p *prefetcher) next() ([]Access, error) {
	if p.src != nil {
		a, err := p.src.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		p.cur = append(p.cur[:0], a)
		if p.ids != nil {
			p.ids.Number(p.cur)
		}
		return p.cur, nil
	}
	if p.cur != nil {
		p.free <- p.cur
		p.cur = nil
	}
	r := <-p.out
	if r.err != nil {
		if errors.Is(r.err, io.EOF) {
			p.out <- r // later calls see the end again
			return nil, nil
		}
		p.out <- r
		return nil, r.err
	}
	p.cur = r.batch
	return r.batch, nil
}

// stop ends the reading goroutine and waits for it (the source may be
// closed afterwards).
func (p *prefetcher) stop() {
	if p.src != nil {
		return
	}
	close(p.quit)
	<-p.done
}

// prescan hands ps a fresh source of w, read ahead (and numbered, for a
// PrescanNumberer) on another goroutine.
func prescan(w Workload, ps Prescanner) error {
	src, err := w.Open()
	if err != nil {
		return fmt.Errorf("open %s for prescan: %w", w.Name(), err)
	}
	defer CloseSource(src)
	var ids *IDs
	if pn, ok := ps.(PrescanNumberer); ok {
		ids = pn.PrescanIDs()
	}
	pf := newPrefetcher(src, ids)
	defer pf.stop()
	if err := ps.Prescan(&prefetchSource{pf: pf}); err != nil {
		return fmt.Errorf("prescan %s: %w", w.Name(), err)
	}
	return nil
}

// prefetchSource is a BatchSource over a prefetcher's batches.
type prefetchSource struct {
	pf  *prefetcher
	cur []Access
}

func (s *prefetchSource) Next() (Access, error) {
	var a [1]Access
	if n, err := s.NextBatch(a[:]); n == 0 {
		return Access{}, err
	}
	return a[0], nil
}

func (s *prefetchSource) NextBatch(dst []Access) (int, error) {
	if len(s.cur) == 0 {
		b, err := s.pf.next()
		if err != nil {
			return 0, err
		}
		if b == nil {
			return 0, io.EOF
		}
		s.cur = b
	}
	n := copy(dst, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

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
	if nt, ok := alg.(NextTaker); ok {
		m, err := replay(ctx, w, alg, p, o, nt.TakeNext(), nt)
		switch {
		case errors.Is(err, errNextFailed):
		case err != nil:
			return Metrics{}, err
		case nt.NextHeld(true):
			return m, nil
		}
	}
	if ps, ok := alg.(Prescanner); ok {
		if err := prescan(w, ps); err != nil {
			return Metrics{}, err
		}
	}
	var ids *IDs
	if nb, ok := alg.(Numberer); ok {
		ids = nb.IDs()
	}
	return replay(ctx, w, alg, p, o, ids, nil)
}

// errNextFailed stops a replay whose NextTaker found a next use that does
// not hold.
var errNextFailed = errors.New("the trace's next uses do not hold")

// replay is Run's loop: it reads w ahead (numbering its accesses with ids,
// if set) and feeds alg. With nt set it stops with errNextFailed as soon
// as nt's next uses fail (checked after each batch).
func replay(ctx context.Context, w Workload, alg Algorithm, p Params, o RunOptions, ids *IDs, nt NextTaker) (Metrics, error) {
	src, err := w.Open()
	if err != nil {
		return Metrics{}, fmt.Errorf("open %s: %w", w.Name(), err)
	}
	defer CloseSource(src)
	l := loop{rec: NewRecorder(p), alg: alg, p: p, o: o, name: w.Name()}
	pf := newPrefetcher(src, ids)
	defer pf.stop()
	t, touch := alg.(Toucher)
	for {
		batch, err := pf.next()
		if err != nil {
			return Metrics{}, fmt.Errorf("read %s: %w", w.Name(), err)
		}
		if batch == nil {
			break
		}
		if !touch {
			err = l.simulate(batch)
		} else {
			err = l.simulateTouched(batch, t)
		}
		if err != nil {
			return Metrics{}, err
		}
		if nt != nil && !nt.NextHeld(false) {
			return Metrics{}, errNextFailed
		}
		if err := ctx.Err(); err != nil {
			return Metrics{}, err
		}
	}
	return l.rec.Metrics(o.Algorithm, o.Config, w.Name(), l.warm), nil
}

// loop is replay's state while it feeds the algorithm.
type loop struct {
	rec     *Recorder
	alg     Algorithm
	p       Params
	o       RunOptions
	name    string
	n, warm int64 // accesses simulated; where the warm-up ended
}

// simulate feeds the accesses of batch to the algorithm, in order.
func (l *loop) simulate(batch []Access) error {
	for i := range batch {
		a := &batch[i]
		if uint(a.Client) >= uint(l.p.Clients) {
			return fmt.Errorf("%s: access %d names client %d, but there are %d clients (set --clients)", l.name, l.n+1, a.Client, l.p.Clients)
		}
		if l.n == int64(l.p.WarmUp) && l.n > 0 {
			l.rec.Reset()
			l.warm = l.n
		}
		l.rec.Begin(a.Time)
		l.rec.Record(a.Op, l.alg.Access(*a, l.rec.Counters()))
		l.n++
		if l.o.Progress != nil && l.o.ProgressEvery > 0 && l.n%l.o.ProgressEvery == 0 {
			l.o.Progress(l.n)
		}
	}
	return nil
}

// simulateTouched simulates batch in windows of t's length, handing t each
// window after the one it simulates next (see Toucher).
func (l *loop) simulateTouched(batch []Access, t Toucher) error {
	w := max(t.TouchWindow(), 1)
	for i := 0; i < len(batch); i += w {
		end := min(i+w, len(batch))
		if end < len(batch) {
			t.Touch(batch[end:min(end+w, len(batch))])
		}
		if err := l.simulate(batch[i:end]); err != nil {
			return err
		}
	}
	return nil
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
