package classic

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// TestHolderRuns grows and shrinks blocks' runs past several capacities,
// inline and in the arena, and checks each run against a plain slice
// after every step, and the run's mask against its holders: a block packs
// its run's place, length and capacity in 8 bytes.
func TestHolderRuns(t *testing.T) {
	if s := unsafe.Sizeof(block{}); s != 8 {
		t.Fatalf("block is %d bytes, want 8", s)
	}
	var a holderArena
	bl := make([]block, 3)
	want := make([][]holder, len(bl))
	rng := rand.New(rand.NewPCG(1, 2))
	next := int32(1)
	for step := range 20000 {
		i := rng.IntN(len(bl))
		b := &bl[i]
		switch grow := step%4000 < 2000; {
		case grow && len(want[i]) < maxClients || len(want[i]) == 0:
			x := holder{h: next, node: freshNode(rng, want[i], maxClients)}
			if step%2 == 0 && len(want[i]) < 64 {
				x.node = freshNode(rng, want[i], 64) // a client with a bit in the mask
			}
			next++
			a.push(b, x)
			want[i] = append(want[i], x)
		case step%3 == 0:
			j := rng.IntN(len(want[i]))
			t := want[i][j].node
			if len(want[i]) < 64 {
				t = freshNode(rng, want[i], 64)
			}
			a.moveTo(b, want[i][j].h, t)
			want[i][j].node = t
		default:
			j := rng.IntN(len(want[i]))
			a.remove(b, want[i][j].h)
			want[i] = slices.Delete(want[i], j, j+1)
		}
		if got := a.run(b); !slices.Equal(got, want[i]) || int(b.count()) != len(want[i]) {
			t.Fatalf("step %d block %d: run %v (count %d), want %v", step, i, got, b.count(), want[i])
		}
		var mask uint64
		for _, x := range want[i] {
			mask |= bit(x.node)
		}
		if !b.inline() && a.mask(b) != mask {
			t.Fatalf("step %d block %d: mask %#x, holders %#x", step, i, a.mask(b), mask)
		}
		if n := b.count(); b.inline() != (n <= 1) || !b.inline() && (n > b.capacity() || b.capacity() > 4*capFor(n)) {
			t.Fatalf("step %d block %d: %d holders, inline %v, capacity %d", step, i, n, b.inline(), b.capacity())
		}
	}
}

// freshNode returns a client below n that holds none of hs (a client holds
// a block at most once).
func freshNode(rng *rand.Rand, hs []holder, n int) int32 {
	for {
		x := int32(rng.IntN(n))
		if !slices.ContainsFunc(hs, func(h holder) bool { return h.node == x }) {
			return x
		}
	}
}
