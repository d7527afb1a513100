package lru

import (
	"math/rand/v2"
	"testing"
)

type key struct{ File, Block uint64 }

func (k key) Hash() uint64 { return Mix(k.File*0x9e3779b97f4a7c15 ^ k.Block) }

// TestTable checks the table against a Go map under insert/delete churn
// with colliding keys.
func TestTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb Table[key, int]
	ref := map[key]int{}
	for i := range 200000 {
		k := key{File: rng.Uint64N(3), Block: rng.Uint64N(500)}
		switch rng.IntN(3) {
		case 0, 1:
			tb.Put(k, i)
			ref[k] = i
		case 2:
			v, ok := tb.Delete(k)
			w, wok := ref[k]
			if ok != wok || v != w {
				t.Fatalf("delete %v: %d %v, want %d %v", k, v, ok, w, wok)
			}
			delete(ref, k)
		}
		if tb.Len() != len(ref) {
			t.Fatalf("len %d, want %d", tb.Len(), len(ref))
		}
		if i%1000 == 0 {
			for k, w := range ref {
				if v, ok := tb.Get(k); !ok || v != w {
					t.Fatalf("get %v: %d %v, want %d", k, v, ok, w)
				}
			}
			n := 0
			tb.Range(func(k key, v int) bool { n++; return ref[k] == v })
			if n != len(ref) {
				t.Fatalf("range saw %d keys, want %d", n, len(ref))
			}
		}
	}
	tb.Clear()
	if _, ok := tb.Get(key{}); ok || tb.Len() != 0 {
		t.Fatal("clear")
	}
}

// Bytes follows the slots' capacity: nothing for the zero table, a slot's
// size times the slots once keys are in, and it never shrinks.
func TestTableBytes(t *testing.T) {
	var tb Table[key, int32]
	if tb.Bytes() != 0 {
		t.Fatalf("empty table: %d bytes", tb.Bytes())
	}
	for i := range 1000 {
		tb.Put(key{1, uint64(i)}, int32(i))
	}
	const slot = 8 + 16 + 8 // hash, key, value padded
	if b := tb.Bytes(); b < 1000*slot || b%slot != 0 {
		t.Fatalf("1000 keys: %d bytes", b)
	}
	full := tb.Bytes()
	for i := range 1000 {
		tb.Delete(key{1, uint64(i)})
	}
	if tb.Bytes() != full {
		t.Fatalf("after deletes: %d bytes, was %d", tb.Bytes(), full)
	}
}
