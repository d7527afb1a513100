package hints

import (
	"math/rand/v2"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
)

// TestIDTable checks the table against a Go map under insert/delete churn.
func TestIDTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tb idTable
	ref := map[block.ID]*entry{}
	for i := range 100000 {
		id := block.ID{File: rng.Uint64N(4), Index: rng.Uint64N(300)}
		if rng.IntN(3) < 2 {
			e := &entry{id: id}
			tb.put(id, e)
			ref[id] = e
		} else {
			tb.del(id)
			delete(ref, id)
		}
		if tb.len() != len(ref) {
			t.Fatalf("len %d, want %d", tb.len(), len(ref))
		}
		if i%500 == 0 {
			for id, e := range ref {
				if tb.get(id) != e {
					t.Fatalf("get %v", id)
				}
			}
			if tb.get(block.ID{File: 99}) != nil {
				t.Fatal("absent key found")
			}
		}
	}
}
