package classic

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// withNext returns w's accesses with the next uses a trace would carry:
// the position of the block's next read or write, counted from 1 over
// every access, -1 if none.
func withNext(t *testing.T, w sim.Workload) []sim.Access {
	t.Helper()
	acc, err := sim.Collect(w)
	if err != nil {
		t.Fatal(err)
	}
	last := map[sim.Key]int{}
	for i := range acc {
		a := &acc[i]
		a.Next = 0
		if a.Op != sim.OpRead && a.Op != sim.OpWrite {
			continue
		}
		a.Next = -1
		if j, ok := last[a.Key()]; ok {
			acc[j].Next = int64(i + 1)
		}
		last[a.Key()] = i
	}
	return acc
}

// noNext hides the next uses of a workload's accesses.
type noNext struct{ sim.Workload }

func (w noNext) Open() (sim.Source, error) {
	src, err := w.Workload.Open()
	return &noNextSource{src}, err
}

type noNextSource struct{ sim.Source }

func (s *noNextSource) Next() (sim.Access, error) {
	a, err := s.Source.Next()
	a.Next = 0
	return a, err
}

// runOptimal runs Optimal on w and reports whether the run took the next
// uses from the accesses (rather than a prescan).
func runOptimal(t *testing.T, w sim.Workload, p sim.Params) (sim.Metrics, bool) {
	t.Helper()
	o, err := NewOptimal(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.Run(context.Background(), w, o, p, sim.RunOptions{Algorithm: "optimal"})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	return m, o.take
}

func genWorkload(t *testing.T, pattern string, clients int) sim.Workload {
	t.Helper()
	c := sim.DefaultGenConfig()
	c.Pattern, c.Clients, c.Accesses, c.Files = pattern, clients, 30000, 500
	w, err := sim.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestTakeNextSameAsPrescan: with the trace's next uses Optimal skips its
// prescan and gives the prescan's results, with one client (the set of
// next uses) and several (the heaps), with and without server memory.
func TestTakeNextSameAsPrescan(t *testing.T) {
	for _, clients := range []int{1, 4} {
		for _, pattern := range []string{"zipf", "hotcold-global"} {
			w := &sim.Slice{Label: pattern, Accesses: withNext(t, genWorkload(t, pattern, clients))}
			for _, server := range []int{0, 300} {
				p := params(clients, 200, server)
				name := fmt.Sprintf("%s/%d clients/server %d", pattern, clients, server)
				got, took := runOptimal(t, w, p)
				want, tookPrescanned := runOptimal(t, noNext{w}, p)
				if !took || tookPrescanned {
					t.Fatalf("%s: took the next uses %v and without them %v, want true and false", name, took, tookPrescanned)
				}
				if got != want {
					t.Errorf("%s: with the trace's next uses %+v, prescanned %+v", name, got, want)
				}
				if got.Hits.Local == 0 {
					t.Errorf("%s: no local hits: the test proves nothing", name)
				}
			}
		}
	}
}

// TestTakeNextWrongFallsBack: any next use that does not hold, wherever it
// is, sends the run back to the prescan, with the prescan's results.
func TestTakeNextWrongFallsBack(t *testing.T) {
	for _, clients := range []int{1, 4} {
		good := withNext(t, genWorkload(t, "zipf", clients))
		p := params(clients, 200, 100)
		want, _ := runOptimal(t, noNext{&sim.Slice{Label: "zipf", Accesses: good}}, p)
		// A block accessed at least three times: at i, j and next(j).
		next := func(i int) int { return int(good[i].Next - 1) }
		i := 0
		for good[i].Next <= 0 || good[next(i)].Next <= 0 {
			i++
		}
		j := next(i)
		other := i + 1 // a later access to another block
		for good[other].Next == 0 || good[other].Key() == good[i].Key() {
			other++
		}
		last := len(good) - 1 // the last read or write
		for good[last].Next == 0 {
			last--
		}
		deleteAt := len(good) / 2
		for name, edit := range map[string]func(a []sim.Access){
			"one too far":    func(a []sim.Access) { a[i].Next++ },
			"none, but used": func(a []sim.Access) { a[j].Next = -1 },
			"skips one":      func(a []sim.Access) { a[i].Next = a[j].Next },
			"another block":  func(a []sim.Access) { a[i].Next = int64(other + 1) },
			"past the end":   func(a []sim.Access) { a[last].Next = int64(len(a) + 5) },
			"itself":         func(a []sim.Access) { a[last].Next = int64(last + 1) },
			"behind":         func(a []sim.Access) { a[j].Next = int64(i + 1) },
			"not given":      func(a []sim.Access) { a[last].Next = 0 },
			"swapped":        func(a []sim.Access) { a[i].Next, a[other].Next = a[other].Next, a[i].Next },
			"a delete": func(a []sim.Access) {
				a[deleteAt] = sim.Access{Client: a[deleteAt].Client, File: a[deleteAt].File, Block: 1, Op: sim.OpDelete, Next: -1}
			},
		} {
			acc := append([]sim.Access(nil), good...)
			edit(acc)
			w := &sim.Slice{Label: "zipf", Accesses: acc}
			got, took := runOptimal(t, w, p)
			ref, _ := runOptimal(t, noNext{w}, p)
			if took {
				t.Errorf("%d clients, %s: the run kept the wrong next uses", clients, name)
			}
			if got != ref {
				t.Errorf("%d clients, %s: hits %+v, prescanned %+v", clients, name, got.Hits, ref.Hits)
			}
			if name != "a delete" && got != want {
				t.Errorf("%d clients, %s: hits %+v, want %+v", clients, name, got.Hits, want.Hits)
			}
		}
	}
}

// TestTakeNextFromOracleFile: the next uses of an oracleGeneralOpNS file
// written by the converter hold (libCacheSim's convention), and a merge
// or a reader that makes several blocks of an object hides them.
func TestTakeNextFromOracleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "z.oracleGeneralOpNS")
	var buf bytes.Buffer
	if err := sim.Convert(&buf, genWorkload(t, "zipf", 4), sim.FormatOracleNS, 4096); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := params(4, 200, 100)
	ignore := sim.ReadOptions{Sizes: sim.SizesIgnore}
	f := &sim.File{Path: path, Format: sim.FormatOracleNS, Options: ignore}
	got, took := runOptimal(t, f, p)
	want, _ := runOptimal(t, noNext{f}, p)
	if !took || got != want {
		t.Errorf("took %v: %+v, prescanned %+v", took, got, want)
	}
	blocks := &sim.File{Path: path, Format: sim.FormatOracleNS, Options: sim.ReadOptions{Sizes: sim.SizesBlocks, BlockSize: 1024}}
	merged := &sim.Merge{Traces: []sim.Workload{f, f}, Seed: 1}
	for name, w := range map[string]sim.Workload{"blocks": blocks, "merge": merged} {
		p := params(8, 200, 100)
		got, took := runOptimal(t, w, p)
		want, _ := runOptimal(t, noNext{w}, p)
		if took || got != want {
			t.Errorf("%s: took %v: %+v, prescanned %+v", name, took, got, want)
		}
	}
}
