package lru

import (
	"math/rand/v2"
	"testing"
)

// TestIDTable checks the id table against a Go map under churn.
func TestIDTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var tb IDTable
	ref := map[uint32]int32{}
	for i := range 300000 {
		id := uint32(1 + rng.IntN(700))
		switch rng.IntN(3) {
		case 0, 1:
			tb.Put(id, int32(i))
			ref[id] = int32(i)
		default:
			if got, want := tb.Delete(id), ref[id]; got != want {
				t.Fatalf("delete %d: %d, want %d", id, got, want)
			}
			delete(ref, id)
		}
		if got, want := tb.Get(id), ref[id]; got != want {
			t.Fatalf("get %d: %d, want %d", id, got, want)
		}
		if tb.Len() != len(ref) {
			t.Fatalf("len %d, want %d", tb.Len(), len(ref))
		}
	}
	n := 0
	tb.Range(func(id uint32, h int32) bool {
		if ref[id] != h {
			t.Fatalf("range %d: %d, want %d", id, h, ref[id])
		}
		n++
		return true
	})
	if n != len(ref) {
		t.Fatalf("range saw %d, want %d", n, len(ref))
	}
}
