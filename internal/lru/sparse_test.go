package lru

import (
	"math/rand/v2"
	"testing"
)

// TestSparse checks the sparse array against a map, with indexes near
// zero (slice pages) and far (table pages), and Reset.
func TestSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	var s Sparse[int]
	ref := map[uint64]int{}
	for round := range 3 {
		for step := range 50000 {
			i := uint64(rng.IntN(5000))
			if rng.IntN(4) == 0 {
				i = rng.Uint64() >> rng.IntN(64) // far pages, some huge
			}
			if rng.IntN(2) == 0 {
				*s.Make(i) = step + 1
				ref[i] = step + 1
			}
			if p := s.At(i); (p == nil && ref[i] != 0) || (p != nil && *p != ref[i]) {
				t.Fatalf("round %d step %d: element %d = %v, want %d", round, step, i, p, ref[i])
			}
		}
		n := 0
		s.Each(func(i uint64, v *int) bool {
			if *v != ref[i] {
				t.Fatalf("each: element %d = %d, want %d", i, *v, ref[i])
			}
			if *v != 0 {
				n++
			}
			return true
		})
		if n != len(ref) {
			t.Fatalf("each saw %d elements set, want %d", n, len(ref))
		}
		s.Reset()
		clear(ref)
		if p := s.At(7); p != nil {
			t.Fatalf("element 7 after Reset: %d", *p)
		}
	}
}
