package dirsim

import (
	"errors"
	"fmt"
	"io"

	"github.com/coopfs/coopfs/internal/sim"
)

// ClockOrder turns w into a closed-loop workload for s: each client issues
// its next access as soon as its previous read completed in s (Sim.Clock),
// and accesses are yielded in the order of those issue times, with Time set
// to them. Each client's own sequence of accesses is w's; only the
// interleaving and the times change. This is how the seed's benchmarks run
// (every client reads as fast as it can), and it keeps the link queues FIFO
// in virtual time.
func ClockOrder(w sim.Workload, s *Sim) sim.Workload { return &clockOrder{w: w, s: s} }

type clockOrder struct {
	w sim.Workload
	s *Sim
}

func (o *clockOrder) Name() string { return o.w.Name() + "+closed-loop" }

func (o *clockOrder) Open() (sim.Source, error) {
	src, err := o.w.Open()
	if err != nil {
		return nil, err
	}
	n := len(o.s.done)
	return &clockSource{src: src, s: o.s, bufs: make([][]sim.Access, n), heads: make([]int, n)}, nil
}

type clockSource struct {
	src   sim.Source
	s     *Sim
	bufs  [][]sim.Access // per client, not yet yielded
	heads []int
	eof   bool
}

func (c *clockSource) Close() error { return sim.CloseSource(c.src) }

// Next yields the pending access of the client whose clock is earliest,
// reading ahead in the underlying source as far as needed to find it.
func (c *clockSource) Next() (sim.Access, error) {
	for {
		best := -1
		for i := range c.bufs {
			if c.eof && c.heads[i] >= len(c.bufs[i]) {
				continue // exhausted
			}
			if best < 0 || c.s.done[i] < c.s.done[best] {
				best = i
			}
		}
		if best < 0 {
			return sim.Access{}, io.EOF
		}
		if c.heads[best] < len(c.bufs[best]) {
			a := c.bufs[best][c.heads[best]]
			c.heads[best]++
			if c.heads[best] == len(c.bufs[best]) {
				c.bufs[best], c.heads[best] = c.bufs[best][:0], 0
			}
			a.Time = c.s.done[best]
			return a, nil
		}
		if err := c.fill(best); err != nil {
			return sim.Access{}, err
		}
	}
}

// fill reads the underlying source until client want has an access or the
// source ends.
func (c *clockSource) fill(want int) error {
	for !c.eof {
		a, err := c.src.Next()
		if errors.Is(err, io.EOF) {
			c.eof = true
			return nil
		}
		if err != nil {
			return err
		}
		if a.Client < 0 || a.Client >= len(c.bufs) {
			return fmt.Errorf("access names client %d, but the simulation has %d clients", a.Client, len(c.bufs))
		}
		c.bufs[a.Client] = append(c.bufs[a.Client], a)
		if a.Client == want {
			return nil
		}
	}
	return nil
}

// Window is the part of w from access number from (0-based), n accesses
// long (to its end if n < 0): the seed's first and second runs of one
// generated stream.
func Window(w sim.Workload, from, n int) sim.Workload { return &window{w: w, from: from, n: n} }

type window struct {
	w       sim.Workload
	from, n int
}

func (w *window) Name() string { return fmt.Sprintf("%s[%d:+%d]", w.w.Name(), w.from, w.n) }

func (w *window) Open() (sim.Source, error) {
	src, err := w.w.Open()
	if err != nil {
		return nil, err
	}
	for range w.from {
		if _, err := src.Next(); err != nil {
			sim.CloseSource(src)
			if errors.Is(err, io.EOF) {
				return &windowSource{src: src}, nil
			}
			return nil, err
		}
	}
	return &windowSource{src: src, left: w.n}, nil
}

type windowSource struct {
	src  sim.Source
	left int
}

func (w *windowSource) Close() error { return sim.CloseSource(w.src) }

func (w *windowSource) Next() (sim.Access, error) {
	if w.left == 0 {
		return sim.Access{}, io.EOF
	}
	w.left--
	return w.src.Next()
}
