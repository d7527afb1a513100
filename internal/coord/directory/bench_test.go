package directory

import (
	"math/rand/v2"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
)

// BenchmarkDiscarded measures a discard notification of 400 blocks
// against a dense directory of 100 000 entries among 800 000 numbered
// blocks (the simulator's pattern with one client: each notified block's
// slot and entry are a random place in memory), the 400 blocks requested
// again after each.
func BenchmarkDiscarded(b *testing.B) {
	const blocks, live, batch = 800000, 100000, 400
	d, err := New(Config{Dense: true, ForwardMemory: NoForwardMemory})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	perm := rng.Perm(blocks)
	held := make([]block.ID, live)
	for i := range held {
		held[i] = block.ID{File: 1, Index: 1 + uint64(perm[i])}
		d.Request(0, 1, held[i], 1)
	}
	ids := make([]block.ID, batch)
	for b.Loop() {
		for i := range ids {
			ids[i] = held[rng.IntN(live)]
		}
		d.Discarded(1, ids)
		b.StopTimer()
		for _, id := range ids {
			d.Request(0, 1, id, 1)
		}
		b.StartTimer()
	}
}
