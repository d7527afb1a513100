package study

import (
	"container/heap"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/coopfs/coopfs/internal/sim"
)

// The scale study's workloads: many clients reading one shared data set at
// about the same time, each at a fixed rate (open loop, so that the
// server's messages per client-second mean something).

// Fan-out patterns.
const (
	FanoutCheckpoint = "checkpoint" // every client reads one file from its first block to its last (a checkpoint at a job's restart)
	FanoutZipf       = "zipf"       // every client reads whole files of a shared set, picked with Zipf popularity (a training set)
)

// fanout is a fan-out workload: client c starts at start[c] and issues
// read i at start[c] + i/rate; the reads of all clients are yielded in time
// order (ties by client).
type fanout struct {
	cfg   FanoutConfig
	name  string
	reads int // per client
	start []time.Duration
}

// FanoutConfig describes a fan-out workload.
type FanoutConfig struct {
	Pattern string
	Clients int
	// Rate is each client's reads a second.
	Rate float64
	// Stagger: the clients start at uniformly random times within it.
	Stagger time.Duration
	// Checkpoint: the file's blocks (every client reads them all).
	Blocks int
	// Zipf: Files of FileBlocks blocks; each client reads Reads files (whole),
	// file k with a probability proportional to 1/(k+1)^Alpha.
	Files, FileBlocks, Reads int
	Alpha                    float64
	Seed                     uint64
}

// NewFanout returns the workload cfg describes.
func NewFanout(cfg FanoutConfig) (sim.Workload, error) {
	if cfg.Clients < 1 || cfg.Rate <= 0 || cfg.Stagger < 0 {
		return nil, fmt.Errorf("fan-out workload: %d clients at %g reads/s, stagger %v: want at least a client, a positive rate", cfg.Clients, cfg.Rate, cfg.Stagger)
	}
	w := &fanout{cfg: cfg, start: make([]time.Duration, cfg.Clients)}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5ca1e))
	for c := range w.start {
		if cfg.Stagger > 0 {
			w.start[c] = time.Duration(rng.Int64N(int64(cfg.Stagger)))
		}
	}
	switch cfg.Pattern {
	case FanoutCheckpoint:
		if cfg.Blocks < 1 {
			return nil, fmt.Errorf("fan-out checkpoint: %d blocks, want at least 1", cfg.Blocks)
		}
		w.reads = cfg.Blocks
		w.name = fmt.Sprintf("checkpoint-%dx%d", cfg.Clients, cfg.Blocks)
	case FanoutZipf:
		if cfg.Files < 1 || cfg.FileBlocks < 1 || cfg.Reads < 1 || cfg.Alpha <= 1 {
			return nil, fmt.Errorf("fan-out zipf: %d files of %d blocks, %d reads, alpha %g: want positive sizes and alpha > 1", cfg.Files, cfg.FileBlocks, cfg.Reads, cfg.Alpha)
		}
		w.reads = cfg.Reads * cfg.FileBlocks
		w.name = fmt.Sprintf("zipf-%dx%d", cfg.Clients, cfg.Reads)
	default:
		return nil, fmt.Errorf("fan-out pattern %q: want %s or %s", cfg.Pattern, FanoutCheckpoint, FanoutZipf)
	}
	return w, nil
}

func (w *fanout) Name() string { return w.name }

func (w *fanout) Open() (sim.Source, error) {
	n := w.cfg.Clients
	src := &fanoutSource{w: w, next: make([]int, n), file: make([]uint64, n)}
	if w.cfg.Pattern == FanoutZipf {
		src.zipf = make([]*rand.Zipf, n)
		for c := range n {
			rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(c)+1))
			src.zipf[c] = rand.NewZipf(rng, w.cfg.Alpha, 1, uint64(w.cfg.Files-1))
		}
	}
	for c := range n {
		src.h = append(src.h, c)
	}
	heap.Init(src)
	return src, nil
}

type fanoutSource struct {
	w    *fanout
	next []int        // each client's next read
	file []uint64     // zipf: the file each client is reading
	zipf []*rand.Zipf // zipf: each client's own stream of files
	h    []int        // clients with reads left, by the time of their next
}

func (s *fanoutSource) at(c int) time.Duration {
	return s.w.start[c] + time.Duration(float64(s.next[c])/s.w.cfg.Rate*float64(time.Second))
}

func (s *fanoutSource) Len() int { return len(s.h) }
func (s *fanoutSource) Less(i, j int) bool {
	a, b := s.at(s.h[i]), s.at(s.h[j])
	return a < b || a == b && s.h[i] < s.h[j]
}
func (s *fanoutSource) Swap(i, j int) { s.h[i], s.h[j] = s.h[j], s.h[i] }
func (s *fanoutSource) Push(x any)    { s.h = append(s.h, x.(int)) }
func (s *fanoutSource) Pop() any {
	x := s.h[len(s.h)-1]
	s.h = s.h[:len(s.h)-1]
	return x
}

// Next yields the earliest pending read.
func (s *fanoutSource) Next() (sim.Access, error) {
	if len(s.h) == 0 {
		return sim.Access{}, io.EOF
	}
	c := s.h[0]
	i := s.next[c]
	a := sim.Access{Time: s.at(c), Client: c, File: 1, Block: uint64(i), Op: sim.OpRead}
	if s.zipf != nil { // whole files: a new one at every FileBlocks reads
		fb := s.w.cfg.FileBlocks
		if i%fb == 0 {
			s.file[c] = 2 + s.zipf[c].Uint64()
		}
		a.File, a.Block = s.file[c], uint64(i%fb)
	}
	if s.next[c]++; s.next[c] == s.w.reads {
		heap.Pop(s)
	} else {
		heap.Fix(s, 0)
	}
	return a, nil
}
