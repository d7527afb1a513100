package dirsim

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// withoutRows gives every client of a new s its own lru.IDTable, as a
// simulation whose rows would be too large does.
func withoutRows(s *Sim) {
	for i := range s.caches {
		s.caches[i] = newLRU(s.p.ClientCacheBlocks, kindTable, nil, nil, i)
	}
}

// The clients' shared rows find exactly what per-client tables find: the
// same metrics, directory and holder counters on workloads with sharing,
// writes, file changes and evictions, with handles of every width the rows
// pack (4, 8, 12 and 16 bits) and the count of 256 clients or more.
func TestRowsChangeNothing(t *testing.T) {
	for _, c := range []struct {
		g        sim.GenConfig
		capacity int
		width    uint8
	}{
		{sim.GenConfig{Pattern: sim.GenOffice, Clients: 8, Accesses: 60000, Seed: 3}, 300, 12},
		{sim.GenConfig{Pattern: sim.GenHotColdGlobal, Clients: 6, Accesses: 40000, Blocks: 3000, Seed: 4}, 300, 12},
		{sim.GenConfig{Pattern: sim.GenZipf, Clients: 5, Accesses: 40000, Files: 500, Seed: 5}, 300, 12},
		{sim.GenConfig{Pattern: sim.GenZipf, Clients: 7, Accesses: 40000, Files: 500, Seed: 6}, 9, 4},
		{sim.GenConfig{Pattern: sim.GenOffice, Clients: 9, Accesses: 60000, Seed: 7}, 200, 8},
		{sim.GenConfig{Pattern: sim.GenHotColdGlobal, Clients: 3, Accesses: 60000, Blocks: 9000, Seed: 8}, 2500, 12},
		{sim.GenConfig{Pattern: sim.GenHotColdGlobal, Clients: 3, Accesses: 60000, Blocks: 30000, Seed: 9}, 5000, 16},
		{sim.GenConfig{Pattern: sim.GenZipf, Clients: 300, Accesses: 60000, Files: 500, Seed: 10}, 20, 8},
	} {
		t.Run(fmt.Sprintf("%s-%d-%d", c.g.Pattern, c.g.Clients, c.capacity), func(t *testing.T) {
			w, err := sim.Generate(c.g)
			if err != nil {
				t.Fatal(err)
			}
			p := sim.DefaultParams()
			p.Clients, p.WarmUp = c.g.Clients, 0
			p.ClientCacheBlocks, p.ServerCacheBlocks = c.capacity, 500
			p = p.WithOption(OptQueueLen, "20").WithOption(OptKeepOwn, "on")
			run := func(rows bool) string {
				s := newSim(t, p)
				if rs := s.caches[0].rows; rs == nil || rs.width != c.width || rs.wide != (c.g.Clients >= 256) {
					t.Fatalf("rows %+v, want %d-bit handles", rs, c.width)
				}
				if !rows {
					withoutRows(s)
				}
				m, err := sim.Run(context.Background(), w, s, p, sim.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if ds := s.dir.Stats(); ds.Forwards == 0 || ds.NotifiedBlocks == 0 {
					t.Fatalf("no forwards or no evictions: %+v", ds)
				}
				return s.summary(t, m)
			}
			with, without := run(true), run(false)
			if !reflect.DeepEqual(with, without) {
				t.Fatalf("rows change the results:\nwith    %s\nwithout %s", with, without)
			}
		})
	}
}

// summary checks s (Check, checkIndex) after a run and returns its
// results: the metrics m, the directory's and the holders' counters and
// the clients' rows.
func (s *Sim) summary(t *testing.T, m sim.Metrics) string {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if err := s.checkIndex(); err != nil {
		t.Fatal(err)
	}
	hs := make([]any, len(s.holders))
	for i, h := range s.holders {
		hs[i] = h.Stats()
	}
	return fmt.Sprintf("%+v\n%+v\n%+v\n%+v", m, s.dir.Stats(), s.Clients(), hs)
}

// checkIndex checks every cache's index against its list: each block on
// the list is found at its handle, its node names its row, and the rows
// hold no other block.
func (s *Sim) checkIndex() error {
	copies := 0
	for i, l := range append(append([]*cache(nil), s.caches...), s.server) {
		for h := l.list.Front(); h != 0; h = l.links[h].Next {
			if got := l.find(l.nodes[h].id); got != h {
				return fmt.Errorf("cache %d: block %d at handle %d is found at %d", i, l.nodes[h].id, h, got)
			}
			if n := l.nodes[h]; l.kind == kindRows && n.row != l.ix.of()[n.id].User[uCli] {
				return fmt.Errorf("cache %d: block %d's node names row %d, its slot %d", i, n.id, n.row, l.ix.of()[n.id].User[uCli])
			}
		}
		if l.rows != nil {
			copies += l.len()
		}
	}
	if rs := s.caches[0].rows; rs != nil {
		n := 0
		for i, b := range s.caches[0].ix.of() {
			if r := int(b.User[uCli]); r != 0 {
				c := rs.count(int32(r))
				n += c
				if c == 0 {
					return fmt.Errorf("block %d has row %d with no copy", i, r)
				}
			}
		}
		if n != copies {
			return fmt.Errorf("rows count %d copies, the caches hold %d", n, copies)
		}
	}
	return nil
}
