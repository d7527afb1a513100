package sim

import (
	"math"
	"testing"
)

// TestSpritePeriods checks that each generated period has the statistics
// of seed 002 tables 5.1 and 5.5 within 10 %.
func TestSpritePeriods(t *testing.T) {
	for _, p := range SpritePeriods() {
		if testing.Short() && p.Gen.Accesses > 1000000 {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			w, err := Generate(p.Gen)
			if err != nil {
				t.Fatal(err)
			}
			got, err := MeasureWorkload(w)
			if err != nil {
				t.Fatal(err)
			}
			want := p.Thesis
			t.Logf("reads %d, unique %d, active %d, sharing %.3f, invalidations/access %.4f", got.BlockReads, got.UniqueBlocks,
				got.ActiveClients, got.Sharing, got.InvalidationRate)
			for _, c := range []struct {
				name      string
				got, want float64
			}{
				{"block reads", float64(got.BlockReads), float64(want.BlockReads)},
				{"unique blocks", float64(got.UniqueBlocks), float64(want.UniqueBlocks)},
				{"active clients", float64(got.ActiveClients), float64(want.ActiveClients)},
				{"degree of sharing", got.Sharing, want.Sharing},
				{"invalidation rate", got.InvalidationRate, want.InvalidationRate},
			} {
				if math.Abs(c.got-c.want) > 0.1*c.want {
					t.Errorf("%s: %.4g, thesis %.4g (more than 10 %% off)", c.name, c.got, c.want)
				}
			}
		})
	}
}

// TestMeasureWorkload pins the statistics on a hand-made trace.
func TestMeasureWorkload(t *testing.T) {
	acc := []Access{
		{Client: 0, File: 1, Block: 0, Op: OpRead},
		{Client: 1, File: 1, Block: 0, Op: OpRead},
		{Client: 1, File: 1, Block: 1, Op: OpRead},
		{Client: 2, File: 1, Block: 1, Op: OpWrite}, // invalidates 0's one block and 1's two
		{Client: 0, File: 2, Block: 0, Op: OpRead},
		{Client: 3, File: 2, Block: 0, Op: OpDelete}, // invalidates 0's block of file 2
	}
	st, err := MeasureWorkload(&Slice{Accesses: acc})
	if err != nil {
		t.Fatal(err)
	}
	want := WorkloadStats{BlockReads: 4, BlockWrites: 1, UniqueBlocks: 3, ActiveClients: 2, Sharing: 4.0 / 3, InvalidationRate: 4.0 / 5}
	if st != want {
		t.Errorf("got %+v, want %+v", st, want)
	}
}
