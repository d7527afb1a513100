package hints

import (
	"math/rand/v2"
	"testing"
)

// TestFileMapAgainstMap checks the file map against a Go map under churn,
// with small ids (which move into the slice as it grows) and large ones
// (which stay in the table).
func TestFileMapAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	var m fileMap
	ref := map[uint64]int32{}
	for step := range 200000 {
		f := uint64(rng.IntN(20000))
		if rng.IntN(10) == 0 {
			f = rng.Uint64() // sparse ids
		}
		_, had := ref[f]
		switch v := int32(step + 1); {
		case rng.IntN(3) > 0 && !had:
			m.put(f, v)
			ref[f] = v
		case had:
			m.del(f)
			delete(ref, f)
		}
		if got := m.get(f); got != ref[f] {
			t.Fatalf("step %d: get %d = %d, want %d", step, f, got, ref[f])
		}
	}
	n := 0
	m.each(func(id uint64, v int32) bool {
		if ref[id] != v {
			t.Fatalf("each: %d = %d, want %d", id, v, ref[id])
		}
		n++
		return true
	})
	if n != len(ref) {
		t.Fatalf("each saw %d ids, want %d", n, len(ref))
	}
	if len(m.direct) == 0 || len(m.direct) > 4*m.peak+directSlack || m.n != len(ref) {
		t.Fatalf("slice of %d for a peak of %d ids, %d held (want %d)", len(m.direct), m.peak, m.n, len(ref))
	}
}
