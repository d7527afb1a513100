package classic

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// TestHolderRuns grows and shrinks blocks' runs past several capacities,
// inline and in the arena, and checks each run against a plain slice
// after every step: a block packs its run's place, length and capacity in
// 16 bytes.
func TestHolderRuns(t *testing.T) {
	if s := unsafe.Sizeof(block{}); s != 16 {
		t.Fatalf("block is %d bytes, want 16", s)
	}
	var a holderArena
	bl := make([]block, 3)
	want := make([][]holder, len(bl))
	rng := rand.New(rand.NewPCG(1, 2))
	next := int32(1)
	for step := range 20000 {
		i := rng.IntN(len(bl))
		b := &bl[i]
		if grow := step%4000 < 2000; grow && len(want[i]) < maxClients || len(want[i]) == 0 {
			x := holder{h: next, node: int32(rng.IntN(maxClients))}
			next++
			a.push(b, x)
			want[i] = append(want[i], x)
		} else {
			j := rng.IntN(len(want[i]))
			a.remove(b, want[i][j].h)
			want[i] = slices.Delete(want[i], j, j+1)
		}
		if got := a.run(b); !slices.Equal(got, want[i]) || int(b.count()) != len(want[i]) {
			t.Fatalf("step %d block %d: run %v (count %d), want %v", step, i, got, b.count(), want[i])
		}
		if n := b.count(); b.inline() != (n <= 1) || !b.inline() && (n > b.capacity() || b.capacity() > 4*capFor(n)) {
			t.Fatalf("step %d block %d: %d holders, inline %v, capacity %d", step, i, n, b.inline(), b.capacity())
		}
	}
}
