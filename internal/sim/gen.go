package sim

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// Generator patterns.
const (
	GenSequential    = "sequential"     // seed 000: every client reads the data set sequentially
	GenRandom        = "random"         // seed 000: uniform random blocks
	GenHotColdLocal  = "hotcold-local"  // seed 000: 80 % of reads to a per-client 20 % hot region
	GenHotColdGlobal = "hotcold-global" // seed 000: the same, one hot region shared by all
	GenZipf          = "zipf"           // whole-file reads of files with Zipf popularity
	GenOffice        = "office"         // Sprite-like office/engineering file workload
	GenMultiServer   = "multiserver"    // seed 004: per-client streams lottery-merged
)

// Patterns lists the generator names.
func Patterns() []string {
	return []string{GenSequential, GenRandom, GenHotColdLocal, GenHotColdGlobal, GenZipf, GenOffice, GenMultiServer}
}

// GenConfig configures a generator. Zero fields take DefaultGenConfig's
// values. Every generator is deterministic for a given Seed.
type GenConfig struct {
	Pattern  string  `json:"pattern"`
	Clients  int     `json:"clients"`
	Accesses int     `json:"accesses"` // records to generate in total
	Seed     int64   `json:"seed"`
	Blocks   int     `json:"blocks"`   // data set size in blocks (seed 000 patterns)
	Files    int     `json:"files"`    // number of files (zipf; shared files for office)
	ZipfS    float64 `json:"zipf_s"`   // Zipf exponent (popularity of rank r ∝ r^-s)
	MaxFile  int     `json:"max_file"` // largest file in blocks (zipf, office)
	Active   float64 `json:"active"`   // office: fraction of clients active
	Shared   float64 `json:"shared"`   // office: fraction of sessions on shared files
	Write    float64 `json:"write"`    // office: fraction of sessions that rewrite the file
	// SharedWrite is the fraction of sessions on shared files that rewrite
	// the file (office; 0: Write/4).
	SharedWrite float64 `json:"shared_write"`
	Temp        float64 `json:"temp"`      // office: fraction of sessions on temporary files
	Private     int     `json:"private"`   // office: private files per client
	IdleRate    float64 `json:"idle_rate"` // office: an idle client's activity relative to an active one
	Servers     int     `json:"servers"`   // multiserver: storage servers (file namespaces)
}

// DefaultGenConfig returns the defaults.
func DefaultGenConfig() GenConfig {
	return GenConfig{Pattern: GenOffice, Clients: 42, Accesses: 1000000, Seed: 1, Blocks: 4096,
		Files: 2000, ZipfS: 1.0, MaxFile: 256, Active: 0.6, Shared: 0.3, Write: 0.05, Temp: 0.05,
		Private: 300, IdleRate: 0.02, Servers: 8}
}

func (g GenConfig) withDefaults() GenConfig {
	d := DefaultGenConfig()
	set := func(v *int, dv int) {
		if *v == 0 {
			*v = dv
		}
	}
	setf := func(v *float64, dv float64) {
		if *v == 0 {
			*v = dv
		}
	}
	if g.Pattern == "" {
		g.Pattern = d.Pattern
	}
	set(&g.Clients, d.Clients)
	set(&g.Accesses, d.Accesses)
	set(&g.Blocks, d.Blocks)
	set(&g.Files, d.Files)
	set(&g.MaxFile, d.MaxFile)
	set(&g.Private, d.Private)
	set(&g.Servers, d.Servers)
	setf(&g.ZipfS, d.ZipfS)
	setf(&g.Active, d.Active)
	setf(&g.Shared, d.Shared)
	setf(&g.Write, d.Write)
	setf(&g.Temp, d.Temp)
	setf(&g.IdleRate, d.IdleRate)
	return g
}

// Validate reports the first invalid setting (after defaults).
func (g GenConfig) Validate() error {
	g = g.withDefaults()
	known := false
	for _, p := range Patterns() {
		known = known || p == g.Pattern
	}
	switch {
	case !known:
		return fmt.Errorf("unknown pattern %q: want one of %v", g.Pattern, Patterns())
	case g.Clients < 1 || g.Accesses < 1 || g.Blocks < 1 || g.Files < 1 || g.MaxFile < 1 || g.Private < 1 || g.Servers < 1:
		return fmt.Errorf("generator sizes must be positive")
	case g.ZipfS < 0:
		return fmt.Errorf("zipf_s = %v, want >= 0", g.ZipfS)
	case g.Active > 1 || g.Shared > 1 || g.Write > 1 || g.Temp > 1 || g.IdleRate > 1 || g.SharedWrite > 1 ||
		g.Active < 0 || g.Shared < 0 || g.Write < 0 || g.Temp < 0 || g.IdleRate < 0 || g.SharedWrite < 0:
		return fmt.Errorf("fractions (active, shared, write, shared_write, temp, idle_rate) must be in [0,1]")
	}
	return nil
}

// Generate returns the workload cfg describes.
func Generate(cfg GenConfig) (Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Pattern == GenMultiServer {
		return multiServer(cfg), nil
	}
	return &generated{cfg: cfg}, nil
}

type generated struct{ cfg GenConfig }

func (g *generated) Name() string {
	return fmt.Sprintf("gen:%s(clients=%d,accesses=%d,seed=%d)", g.cfg.Pattern, g.cfg.Clients, g.cfg.Accesses, g.cfg.Seed)
}

func (g *generated) Open() (Source, error) {
	c := g.cfg
	s := &genSource{cfg: c, rng: rand.New(rand.NewPCG(uint64(c.Seed), 0x67656e))}
	switch c.Pattern {
	case GenZipf:
		s.zipf = newZipf(c.Files, c.ZipfS)
	case GenOffice:
		s.zipf = newZipf(c.Files, c.ZipfS)
		s.private = newZipf(c.Private, c.ZipfS)
		nActive := max(1, int(math.Round(c.Active*float64(c.Clients))))
		// Active clients are spread over the client ids, deterministically.
		perm := s.rng.Perm(c.Clients)
		s.active = make([]bool, c.Clients)
		for _, cl := range perm[:nActive] {
			s.active[cl] = true
		}
		s.weights = make([]float64, c.Clients)
		total := 0.0
		for i := range c.Clients {
			w := c.IdleRate
			if s.active[i] {
				w = 1
			}
			total += w
			s.weights[i] = total
		}
		s.nextTemp = 1 << 32
	}
	return s, nil
}

type genSource struct {
	cfg      GenConfig
	rng      *rand.Rand
	n        int
	buf      []Access
	now      time.Duration
	zipf     *zipf
	private  *zipf
	active   []bool
	weights  []float64 // cumulative activity weights (office)
	nextTemp uint64
}

const genStep = time.Millisecond

func (s *genSource) Next() (Access, error) {
	if s.n >= s.cfg.Accesses {
		return Access{}, io.EOF
	}
	if len(s.buf) == 0 {
		s.refill()
	}
	a := s.buf[0]
	s.buf = s.buf[1:]
	s.n++
	return a, nil
}

func (s *genSource) emit(a Access) {
	a.Time = s.now
	s.now += genStep
	s.buf = append(s.buf, a)
}

// refill appends the next accesses: one block for the seed 000 patterns, a
// whole file session for zipf and office.
func (s *genSource) refill() {
	c := s.cfg
	s.buf = s.buf[:0]
	switch c.Pattern {
	case GenSequential, GenRandom, GenHotColdLocal, GenHotColdGlobal:
		client := s.n % c.Clients // clients interleave round-robin (concurrent readers)
		s.emit(Access{Client: client, File: 1, Block: s.patternBlock(client, s.n/c.Clients), Op: OpRead})
	case GenZipf:
		f := uint64(s.zipf.draw(s.rng)) + 1
		s.readFile(s.rng.IntN(c.Clients), f, false)
	case GenOffice:
		s.officeSession()
	}
}

func (s *genSource) patternBlock(client, k int) uint64 {
	c := s.cfg
	n := c.Blocks
	switch c.Pattern {
	case GenSequential:
		return uint64(k % n)
	case GenRandom:
		return uint64(s.rng.IntN(n))
	}
	hot := max(1, n/5)
	start := 0
	if c.Pattern == GenHotColdLocal {
		start = client * n / c.Clients
	}
	if s.rng.Float64() < 0.8 {
		return uint64((start + s.rng.IntN(hot)) % n)
	}
	// cold: uniformly among the blocks outside the hot region
	if n == hot {
		return uint64(s.rng.IntN(n))
	}
	return uint64((start + hot + s.rng.IntN(n-hot)) % n)
}

// fileBlocks is a file's length in blocks, a fixed function of its id:
// mostly small files, a few large ones (the Sprite size distribution: most
// files are small, most bytes are in large files).
func fileBlocks(file uint64, maxFile int) uint64 {
	h := file*0x9e3779b97f4a7c15 ^ file>>7
	h ^= h >> 29
	u := float64(h%1000003) / 1000003
	var n float64
	switch {
	case u < 0.75:
		n = 1 + u/0.75*3 // 1..4 blocks
	case u < 0.97:
		n = 4 + (u-0.75)/0.22*28 // 4..32
	default:
		n = 32 + (u-0.97)/0.03*float64(maxFile-32)
	}
	return uint64(max(1, min(float64(maxFile), n)))
}

func (s *genSource) readFile(client int, f uint64, write bool) {
	n := fileBlocks(f, s.cfg.MaxFile)
	s.emit(Access{Client: client, File: f, Block: n, Op: OpOpen})
	for b := range n {
		s.emit(Access{Client: client, File: f, Block: b, Op: OpRead})
	}
	if write {
		for b := range n {
			s.emit(Access{Client: client, File: f, Block: b, Op: OpWrite})
		}
	}
	s.emit(Access{Client: client, File: f, Op: OpClose})
}

// officeSession: a client (active ones a lot, idle ones rarely) opens a file
// and reads it whole; sometimes rewrites it; sometimes creates, reads back
// and deletes a temporary file. Shared files (ids 1..Files) are popular by
// Zipf; each client's private files (ids above 1<<24) too.
func (s *genSource) officeSession() {
	c := s.cfg
	x := s.rng.Float64() * s.weights[len(s.weights)-1]
	client := sort.SearchFloat64s(s.weights, x)
	client = min(client, c.Clients-1)
	s.now += time.Duration(s.rng.ExpFloat64() * float64(20*time.Millisecond))
	u := s.rng.Float64()
	switch {
	case u < c.Temp:
		f := s.nextTemp
		s.nextTemp++
		n := uint64(1 + s.rng.IntN(8))
		s.emit(Access{Client: client, File: f, Block: 0, Op: OpOpen})
		for b := range n {
			s.emit(Access{Client: client, File: f, Block: b, Op: OpWrite})
		}
		for b := range n {
			s.emit(Access{Client: client, File: f, Block: b, Op: OpRead})
		}
		s.emit(Access{Client: client, File: f, Op: OpClose})
		s.emit(Access{Client: client, File: f, Block: n, Op: OpDelete})
	case u < c.Temp+c.Shared:
		f := uint64(s.zipf.draw(s.rng)) + 1
		sw := c.SharedWrite
		if sw == 0 {
			sw = c.Write / 4 // shared files are written rarely
		}
		s.readFile(client, f, s.rng.Float64() < sw)
	default:
		f := uint64(1<<24) + uint64(client)*uint64(c.Private) + uint64(s.private.draw(s.rng))
		s.readFile(client, f, s.rng.Float64() < c.Write)
	}
}

// zipf draws ranks 0..n-1 with P(r) ∝ (r+1)^-s from a precomputed CDF.
type zipf struct{ cdf []float64 }

func newZipf(n int, s float64) *zipf {
	z := &zipf{cdf: make([]float64, n)}
	t := 0.0
	for i := range n {
		t += math.Pow(float64(i+1), -s)
		z.cdf[i] = t
	}
	for i := range z.cdf {
		z.cdf[i] /= t
	}
	return z
}

func (z *zipf) draw(r *rand.Rand) int {
	return min(sort.SearchFloat64s(z.cdf, r.Float64()), len(z.cdf)-1)
}

// multiServer builds seed 004's workload: one Zipf stream per client, each
// over files of one of Servers namespaces (client i's files live mostly on
// server i mod Servers), streams of uneven lengths (1×..4×), lottery-merged.
// A file's server is File>>FileNSShift (the trace namespace) mod Servers.
func multiServer(c GenConfig) Workload {
	var traces []Workload
	per := max(1, c.Accesses/c.Clients)
	lens := make([]int, c.Clients)
	total := 0
	for i := range c.Clients {
		lens[i] = per * (1 + i%4)
		total += lens[i]
	}
	for i := range c.Clients {
		sub := c
		sub.Pattern, sub.Clients, sub.Seed = GenZipf, 1, c.Seed*1000+int64(i)
		sub.Accesses = max(1, int(int64(lens[i])*int64(c.Accesses)/int64(total)))
		traces = append(traces, &renamed{Workload: &generated{cfg: sub}, name: fmt.Sprintf("server%d", i%c.Servers)})
	}
	return &named{Workload: &Merge{Traces: traces, Seed: c.Seed}, name: fmt.Sprintf("gen:multiserver(clients=%d,servers=%d,accesses=%d,seed=%d)", c.Clients, c.Servers, c.Accesses, c.Seed)}
}

// renamed gives a workload another name: Merge shares the file namespace of
// workloads with the same name, so clients on one server share its files.
type renamed struct {
	Workload
	name string
}

func (r *renamed) Name() string { return r.name }

type named = renamed

// ReadAhead implements ReadAheader: a generator does not depend on the run.
func (s *genSource) ReadAhead() bool { return true }
