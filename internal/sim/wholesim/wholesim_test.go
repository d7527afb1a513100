package wholesim

import (
	"context"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

func params(clients, cache int) sim.Params {
	p := sim.DefaultParams()
	p.Clients, p.ClientCacheBlocks, p.ServerCacheBlocks, p.WarmUp = clients, cache, 64, 0
	return p
}

// readFile is one open, a read of every block and a close by client c.
func readFile(c int, f, blocks uint64) []sim.Access {
	out := []sim.Access{{Client: c, File: f, Block: blocks, Op: sim.OpOpen}}
	for b := uint64(0); b < blocks; b++ {
		out = append(out, sim.Access{Client: c, File: f, Block: b, Op: sim.OpRead})
	}
	return append(out, sim.Access{Client: c, File: f, Op: sim.OpClose})
}

func run(t *testing.T, s *Sim, acc []sim.Access) []sim.Layer {
	t.Helper()
	c := sim.NewCounters(s.p)
	var layers []sim.Layer
	for _, a := range acc {
		o := s.Access(a, c)
		if a.Op == sim.OpRead {
			layers = append(layers, o.Layer)
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
	}
	return layers
}

func count(ls []sim.Layer, l sim.Layer) int {
	n := 0
	for _, x := range ls {
		if x == l {
			n++
		}
	}
	return n
}

// TestStaggered: the first reader reads from the server, the next from it,
// a reopen locally; a write sends the next reader to the server again.
func TestStaggered(t *testing.T) {
	s, err := New(params(3, 32))
	if err != nil {
		t.Fatal(err)
	}
	if l := run(t, s, readFile(0, 1, 8)); count(l, sim.LayerDisk)+count(l, sim.LayerServer) != 8 {
		t.Fatalf("first reader: %v", l)
	}
	if l := run(t, s, readFile(1, 1, 8)); count(l, sim.LayerRemote) != 8 {
		t.Fatalf("second reader: %v", l)
	}
	if l := run(t, s, readFile(0, 1, 8)); count(l, sim.LayerLocal) != 8 {
		t.Fatalf("reopen: %v", l)
	}
	// Client 2 writes block 3 and closes: its copy is not whole (it never
	// read the file), the map empties, the others' copies are stale.
	run(t, s, []sim.Access{{Client: 2, File: 1, Block: 8, Op: sim.OpOpen}, {Client: 2, File: 1, Block: 3, Op: sim.OpWrite}, {Client: 2, File: 1, Op: sim.OpClose}})
	if l := run(t, s, readFile(1, 1, 8)); count(l, sim.LayerRemote) != 0 || count(l, sim.LayerLocal) != 0 {
		t.Fatalf("reader after a commit: %v", l)
	}
	if l := run(t, s, readFile(0, 1, 8)); count(l, sim.LayerRemote) != 8 {
		t.Fatalf("next reader after the commit: %v", l)
	}
}

// TestWorkload runs a generated Zipf workload with the invariants checked.
func TestWorkload(t *testing.T) {
	w, err := sim.Generate(sim.GenConfig{Pattern: sim.GenZipf, Clients: 4, Accesses: 20000, Files: 200, MaxFile: 16, ZipfS: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	p := params(4, 128)
	s, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.Run(context.Background(), w, s, p, sim.RunOptions{Algorithm: Name})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if m.Hits.Remote == 0 || m.Hits.Local == 0 {
		t.Errorf("hits %+v: want local and remote hits", m.Hits)
	}
}
