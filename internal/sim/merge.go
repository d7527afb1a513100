package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"
)

// Merge is the lottery merge of seed 004 (section 3): several traces become
// one multi-client workload. Trace i's clients become clients base_i +
// client (base_i is the number of clients of the traces before it; a LIRS
// trace has one client), so each single-client trace is one client. At each
// step the next record is drawn from trace i with probability proportional
// to its remaining records (its tickets), so every trace spans the whole
// merged period. Each distinct trace (by Name) gets its own file namespace:
// file ids become namespace<<FileNSShift | file, so a trace merged twice is
// shared by its two clients and different traces never share blocks. The
// merge is seeded and deterministic. Times are renumbered: access k of the
// merged trace happens at k × Interval.
type Merge struct {
	Traces   []Workload
	Seed     int64
	Interval time.Duration // 0 means LIRSInterval

	counts  []int64 // records per trace, from a first pass
	clients []int   // clients per trace
}

// FileNSShift is where Merge puts a trace's namespace in file ids.
const FileNSShift = 40

// Name implements Workload.
func (m *Merge) Name() string {
	names := make([]string, len(m.Traces))
	for i, t := range m.Traces {
		names[i] = t.Name()
	}
	return "merge(" + strings.Join(names, ",") + ")"
}

// Clients returns the number of clients of the merged workload (it scans the
// traces once if needed).
func (m *Merge) Clients() (int, error) {
	if err := m.scan(); err != nil {
		return 0, err
	}
	n := 0
	for _, c := range m.clients {
		n += c
	}
	return n, nil
}

func (m *Merge) scan() error {
	if m.counts != nil {
		return nil
	}
	if len(m.Traces) == 0 {
		return fmt.Errorf("merge: no traces")
	}
	counts, clients := make([]int64, len(m.Traces)), make([]int, len(m.Traces))
	for i, t := range m.Traces {
		maxc := 0
		err := ForEach(t, func(a Access) {
			counts[i]++
			maxc = max(maxc, a.Client)
		})
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		clients[i] = maxc + 1
	}
	m.counts, m.clients = counts, clients
	return nil
}

// Open implements Workload.
func (m *Merge) Open() (Source, error) {
	if err := m.scan(); err != nil {
		return nil, err
	}
	s := &mergeSource{rng: rand.New(rand.NewPCG(uint64(m.Seed), 0x6d65726765)), interval: m.Interval}
	if s.interval == 0 {
		s.interval = LIRSInterval
	}
	ns := map[string]uint64{}
	base := 0
	for i, t := range m.Traces {
		src, err := t.Open()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("merge: %w", err)
		}
		id, ok := ns[t.Name()]
		if !ok {
			id = uint64(len(ns))
			ns[t.Name()] = id
		}
		s.srcs = append(s.srcs, src)
		s.left = append(s.left, m.counts[i])
		s.base = append(s.base, base)
		s.ns = append(s.ns, id<<FileNSShift)
		s.total += m.counts[i]
		base += m.clients[i]
	}
	return s, nil
}

type mergeSource struct {
	srcs     []Source
	left     []int64
	base     []int
	ns       []uint64
	total    int64
	rng      *rand.Rand
	n        int64
	interval time.Duration
}

func (s *mergeSource) Next() (Access, error) {
	if s.total == 0 {
		return Access{}, io.EOF
	}
	t := s.rng.Int64N(s.total)
	i := 0
	for ; t >= s.left[i]; i++ {
		t -= s.left[i]
	}
	a, err := s.srcs[i].Next()
	if err == io.EOF {
		return Access{}, fmt.Errorf("merge: trace %d ended early (changed since it was counted?)", i)
	}
	if err != nil {
		return Access{}, err
	}
	s.left[i]--
	s.total--
	a.Client += s.base[i]
	a.File = s.ns[i] | a.File&(1<<FileNSShift-1)
	a.Time = time.Duration(s.n) * s.interval
	a.Next = 0 // positions in one trace, not in the merge
	s.n++
	return a, nil
}

// ReadAhead implements ReadAheader when every merged source allows it.
func (s *mergeSource) ReadAhead() bool {
	for _, src := range s.srcs {
		if !canReadAhead(src) {
			return false
		}
	}
	return true
}

func (s *mergeSource) Close() error {
	for _, src := range s.srcs {
		CloseSource(src)
	}
	return nil
}
