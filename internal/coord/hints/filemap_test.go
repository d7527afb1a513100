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

// TestFileSlabAgainstMap checks the slab against a Go map under churn: a
// record is found while its file holds it and never after (the remembered
// last file included), released records are reused, and no two files
// share one.
func TestFileSlabAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	var s fileSlab[uint64] // each record holds its file's id
	ref := map[uint64]int32{}
	owner := map[int32]uint64{}
	for step := range 100000 {
		f := uint64(rng.IntN(3000))
		r, had := ref[f]
		if got := s.find(f); got != r {
			t.Fatalf("step %d: find %d = %d, want %d", step, f, got, r)
		}
		switch {
		case !had && rng.IntN(2) == 0:
			r = s.add(f)
			if o, taken := owner[r]; taken || r <= 0 {
				t.Fatalf("step %d: %d got record %d, held by %d", step, f, r, o)
			}
			*s.rec(r) = f
			ref[f], owner[r] = r, f
		case had && rng.IntN(3) == 0:
			if *s.rec(r) != f {
				t.Fatalf("step %d: record %d holds %d, want %d", step, r, *s.rec(r), f)
			}
			s.release(f, r)
			delete(ref, f)
			delete(owner, r)
			if got := s.find(f); got != 0 {
				t.Fatalf("step %d: %d released, still found at %d", step, f, got)
			}
		}
		if s.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, s.len(), len(ref))
		}
	}
	if s.n > 3000+1 {
		t.Fatalf("%d records for at most 3000 files: released ones are not reused", s.n)
	}
}
