package hints

import (
	"math/rand/v2"
	"testing"
)

// TestPeerAgesAgainstScan checks the oldest-block list's two questions
// against a plain scan over the peer records (what target and young were
// before), failed peers and the extreme ages included, for peer counts on
// both sides of the group size (the group minima are kept as ages change).
func TestPeerAgesAgainstScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	ages := []Time{Free, dead, 0, 1, 2, 3, 5, 8}
	for _, peers := range []int{1, 2, 3, 7, peerGroup, peerGroup + 1, 2*peerGroup - 1, 41, 64} {
		var a peerAges
		a.resize(peers)
		oldest := make([]Time, peers)
		live := make([]bool, peers)
		isLive := func(i int) bool { return live[i] }
		for i := range oldest {
			oldest[i], live[i] = Free, true
			a.set(i, Free, true)
		}
		for step := range 5000 {
			i := rng.IntN(peers)
			if rng.IntN(4) == 0 {
				live[i] = !live[i]
			} else {
				oldest[i] = ages[rng.IntN(len(ages))]
			}
			a.set(i, oldest[i], live[i])
			stamp := ages[2+rng.IntN(len(ages)-2)]
			best, n, older := -1, 0, 0
			for j := range oldest {
				if !live[j] {
					continue
				}
				if best < 0 || oldest[j] < oldest[best] {
					best = j
				}
				if oldest[j] != Free {
					n++
					if oldest[j] < stamp {
						older++
					}
				}
			}
			if got := a.oldest(isLive); got != best {
				t.Fatalf("%d peers, step %d: oldest %d, want %d", peers, step, got, best)
			}
			if got := a.young(stamp, DiscardPessimistic, isLive); got != (older > 0) {
				t.Fatalf("%d peers, step %d: pessimistic %v at %d", peers, step, got, stamp)
			}
			if got := a.young(stamp, DiscardOptimistic, isLive); got != (n > 0 && older == n) {
				t.Fatalf("%d peers, step %d: optimistic %v at %d", peers, step, got, stamp)
			}
		}
	}
}
