package nasd

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/coopfs/coopfs/internal/sim"
)

// WorkloadConfig describes one of seed 004's synthetic workloads. The seed
// merges ten application traces (table 1, from Cao et al.), each used by two
// clients, and maps them onto the servers by "trace configurations" from
// extremely uneven to almost even. The traces themselves are not public, so
// each client here runs a generator with the access pattern table 1 names
// (sequential loops over one or several files, random, random with a stride,
// read-write passes) over its own working set (clients share nothing, as in
// the seed), and every block is stored on the client's server.
type WorkloadConfig struct {
	Servers int `json:"servers"` // 8
	Clients int `json:"clients"` // 20: the ten applications twice
	// Spread is the trace configuration: client i's trace is stored on
	// server i mod Spread. 1 puts every trace on server 0 (the most uneven);
	// Servers spreads them over all servers (the most even).
	Spread int `json:"spread"`
	// Passes is how many times, about, each client goes over its working
	// set (default 6).
	Passes float64 `json:"passes"`
	// Scale multiplies every working set (default 1: 1.5–4.5 K blocks a
	// client, 60 K in all, near the servers' 64 K blocks of cache).
	Scale float64 `json:"scale"`
	Seed  uint64  `json:"seed"`
}

// DefaultWorkload is seed 004's default system with the most even trace
// configuration.
func DefaultWorkload() WorkloadConfig {
	return WorkloadConfig{Servers: 8, Clients: 20, Spread: 8, Passes: 6, Scale: 1, Seed: 1}
}

func (c WorkloadConfig) withDefaults() WorkloadConfig {
	if c.Passes == 0 {
		c.Passes = 6
	}
	if c.Scale == 0 {
		c.Scale = 1
	}
	return c
}

func (c WorkloadConfig) validate() error {
	switch {
	case c.Servers < 1 || c.Clients < 1:
		return fmt.Errorf("%w: workload needs servers and clients", sim.ErrConfig)
	case c.Spread < 1 || c.Spread > c.Servers:
		return fmt.Errorf("%w: spread = %d, want 1..%d (the servers)", sim.ErrConfig, c.Spread, c.Servers)
	case c.Passes <= 0 || c.Scale <= 0:
		return fmt.Errorf("%w: passes and scale must be positive", sim.ErrConfig)
	}
	return nil
}

// Apps are the names of the ten application patterns (seed 004 table 1);
// client i runs Apps[i mod 10].
var Apps = [...]string{"dinero", "cscope1", "cscope2", "cscope3", "glimpse", "ld",
	"postgres1", "postgres2", "xdataslice", "sort"}

// Workload is a seeded, replayable sim.Workload.
type Workload struct{ cfg WorkloadConfig }

// NewWorkload returns the workload cfg describes.
func NewWorkload(cfg WorkloadConfig) (*Workload, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Workload{cfg: cfg}, nil
}

// Name implements sim.Workload.
func (w *Workload) Name() string { return fmt.Sprintf("nasd-config%d", w.cfg.Spread) }

// Config returns the workload's configuration.
func (w *Workload) Config() WorkloadConfig { return w.cfg }

// ServerOf is the server a block of this workload is stored on (the
// default Config.ServerOf for the same number of servers).
func (w *Workload) ServerOf(a sim.Access) int { return int(a.File % uint64(w.cfg.Servers)) }

// Open implements sim.Workload.
func (w *Workload) Open() (sim.Source, error) {
	c := w.cfg
	src := &source{rng: rand.New(rand.NewPCG(c.Seed, 0x5eed)), servers: c.Servers}
	for i := range c.Clients {
		g := newPattern(i%len(Apps), c.Scale, rand.New(rand.NewPCG(c.Seed, uint64(i)+1)))
		n := int64(c.Passes*float64(g.size()) + 0.5)
		src.clients = append(src.clients, clientStream{pat: g, server: i % c.Spread, left: n, tickets: n})
		src.total += n
	}
	return src, nil
}

type clientStream struct {
	pat     pattern
	server  int
	left    int64
	tickets int64
}

// source lottery-merges the client streams: each next access goes to a
// client drawn with probability proportional to its tickets (its trace
// length), so that every trace spans the whole run (seed 004, after
// Waldspurger and Weihl).
type source struct {
	rng     *rand.Rand
	clients []clientStream
	servers int
	total   int64 // tickets of the clients with accesses left
	n       int64
}

func (s *source) Next() (sim.Access, error) {
	if s.total <= 0 {
		return sim.Access{}, io.EOF
	}
	x := s.rng.Int64N(s.total)
	i := 0
	for ; i < len(s.clients); i++ {
		if s.clients[i].left == 0 {
			continue
		}
		if x < s.clients[i].tickets {
			break
		}
		x -= s.clients[i].tickets
	}
	cs := &s.clients[i]
	f, b := cs.pat.next()
	if cs.left--; cs.left == 0 {
		s.total -= cs.tickets
	}
	s.n++
	file := (uint64(i)<<16|uint64(f))*uint64(s.servers) + uint64(cs.server)
	return sim.Access{Time: time.Duration(s.n) * time.Millisecond, Client: i, File: file, Block: b, Op: sim.OpRead}, nil
}

// pattern yields one client's accesses: a file index and a block in it.
type pattern interface {
	next() (file int, blk uint64)
	size() int // working set in blocks
}

func scaled(n int, scale float64) int { return max(1, int(float64(n)*scale+0.5)) }

// seqLoop reads a list of files sequentially, over and over.
type seqLoop struct {
	files    []int // lengths
	f, b, ws int
}

func (p *seqLoop) size() int { return p.ws }
func (p *seqLoop) next() (int, uint64) {
	f, b := p.f, p.b
	if p.b++; p.b >= p.files[p.f] {
		p.b, p.f = 0, (p.f+1)%len(p.files)
	}
	return f, uint64(b)
}

func newSeqLoop(lengths []int) *seqLoop {
	ws := 0
	for _, n := range lengths {
		ws += n
	}
	return &seqLoop{files: lengths, ws: ws}
}

// wholeFiles picks a file at random and reads it whole (ld).
type wholeFiles struct {
	rng      *rand.Rand
	files    []int
	f, b, ws int
}

func (p *wholeFiles) size() int { return p.ws }
func (p *wholeFiles) next() (int, uint64) {
	if p.b >= p.files[p.f] {
		p.f, p.b = p.rng.IntN(len(p.files)), 0
	}
	p.b++
	return p.f, uint64(p.b - 1)
}

// hotCold reads random blocks of one file, hotFrac of the reads going to
// the first hotSize blocks (postgres1's index-heavy join).
type hotCold struct {
	rng         *rand.Rand
	n, hot      int
	hotFraction float64
}

func (p *hotCold) size() int { return p.n }
func (p *hotCold) next() (int, uint64) {
	if p.rng.Float64() < p.hotFraction {
		return 0, uint64(p.rng.IntN(p.hot))
	}
	return 0, uint64(p.hot + p.rng.IntN(p.n-p.hot))
}

// indexScan alternates index lookups (random blocks of an index file) with
// runs of a sequential table scan (postgres2).
type indexScan struct {
	rng                 *rand.Rand
	index, table        int
	pos, phase          int
	lookups, scanLength int
}

func (p *indexScan) size() int { return p.index + p.table }
func (p *indexScan) next() (int, uint64) {
	p.phase = (p.phase + 1) % (p.lookups + p.scanLength)
	if p.phase < p.lookups {
		return 0, uint64(p.rng.IntN(p.index))
	}
	p.pos = (p.pos + 1) % p.table
	return 1, uint64(p.pos)
}

// strided reads runs at a regular stride from random starts (xdataslice).
type strided struct {
	rng                  *rand.Rand
	n, stride, run, left int
	pos                  int
}

func (p *strided) size() int { return p.n }
func (p *strided) next() (int, uint64) {
	if p.left == 0 {
		p.pos, p.left = p.rng.IntN(p.n), p.run
	}
	p.left--
	p.pos = (p.pos + p.stride) % p.n
	return 0, uint64(p.pos)
}

func newPattern(app int, s float64, rng *rand.Rand) pattern {
	n := func(x int) int { return scaled(x, s) }
	rep := func(count, length int) []int {
		out := make([]int, count)
		for i := range out {
			out[i] = n(length)
		}
		return out
	}
	switch Apps[app] {
	case "dinero": // sequential, multiple times
		return newSeqLoop([]int{n(2800)})
	case "cscope1": // one database file, sequential, multiple times
		return newSeqLoop([]int{n(2200)})
	case "cscope2": // several large files
		return newSeqLoop(rep(4, 1100))
	case "cscope3": // many small files
		return newSeqLoop(rep(50, 30))
	case "glimpse": // large and small files
		return newSeqLoop(append(rep(2, 1400), rep(40, 25)...))
	case "ld": // random, different sizes
		files := make([]int, 80)
		ws := 0
		for i := range files {
			files[i] = n(5 + rng.IntN(66))
			ws += files[i]
		}
		return &wholeFiles{rng: rng, files: files, f: 0, b: files[0], ws: ws}
	case "postgres1": // random (indexed join)
		return &hotCold{rng: rng, n: n(3000), hot: n(600), hotFraction: 0.8}
	case "postgres2": // random and sequential
		return &indexScan{rng: rng, index: n(500), table: n(2500), lookups: 8, scanLength: 32}
	case "xdataslice": // random access, regular stride
		return &strided{rng: rng, n: n(4000), stride: 8, run: 100}
	default: // sort: intensive read and write, sequential, multiple times
		return newSeqLoop([]int{n(1500), n(1500)})
	}
}
