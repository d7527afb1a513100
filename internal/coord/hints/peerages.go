package hints

import "math"

// peerAges holds a client's oldest-block list as the two scans of
// best-guess replacement want it: one Time per peer position, side by side
// (the peer records hold more), with a failed peer's entry replaced by dead
// so that no branch is needed to skip it, and the smallest entry of each
// group of peerGroup positions beside them. The forward target reads the
// group minima and then one group (the first group holding the smallest
// entry, then its first position holding it: the lowest position on ties,
// as a scan of all of them finds it). A change lowers its group's minimum
// or, when it raises the entry that was the minimum, finds it anew. The
// discard test is one pass over the entries. (A tournament tree answers
// both in O(1) but costs more to keep up: the list changes on every
// forward and its acknowledgement; a scan of every entry on every forward
// cost some 400 instructions at 41 peers.)
type peerAges struct {
	olds []Time
	mins []Time // mins[g]: the smallest of olds[g*peerGroup:][:peerGroup]
}

// peerGroup is how many positions share a minimum in peerAges.mins.
const peerGroup = 8

// dead is the entry of a failed peer: never the oldest, never compared.
const dead = Time(math.MaxInt64)

// resize makes room for peers positions, all dead until set.
func (t *peerAges) resize(peers int) {
	t.olds = make([]Time, peers)
	for i := range t.olds {
		t.olds[i] = dead
	}
	t.mins = make([]Time, (peers+peerGroup-1)/peerGroup)
	for g := range t.mins {
		t.mins[g] = dead
	}
}

// set records peer position i's entry (oldest) and whether it is live.
func (t *peerAges) set(i int, oldest Time, live bool) {
	if !live {
		oldest = dead
	}
	was := t.olds[i]
	t.olds[i] = oldest
	g := i / peerGroup
	if m := t.mins[g]; oldest <= m {
		t.mins[g] = oldest
	} else if was == m { // the group's smallest entry grew: find the next
		t.regroup(g)
	}
}

// regroup finds group g's smallest entry anew (out of set, which is then
// small enough to inline).
func (t *peerAges) regroup(g int) {
	t.mins[g] = minTime(t.olds[g*peerGroup : min(g*peerGroup+peerGroup, len(t.olds))])
}

// oldest returns the live peer position with the oldest entry (the first
// on ties), -1 if none; live is whether position i is live (asked only
// when every entry looks dead).
func (t *peerAges) oldest(live func(i int) bool) int {
	g, low := 0, dead
	for j, m := range t.mins {
		if m < low {
			g, low = j, m
		}
	}
	if low == dead { // no entry below dead: a live peer may still hold that age
		for i := range t.olds {
			if live(i) {
				return i
			}
		}
		return -1
	}
	from := g * peerGroup
	for i, o := range t.olds[from:min(from+peerGroup, len(t.olds))] {
		if o == low {
			return from + i
		}
	}
	return -1
}

// minTime returns the smallest of ts (dead if none), four at a time.
func minTime(ts []Time) Time {
	a, b, c, d := dead, dead, dead, dead
	for len(ts) >= 4 {
		a, b, c, d = min(a, ts[0]), min(b, ts[1]), min(c, ts[2]), min(d, ts[3])
		ts = ts[4:]
	}
	for _, o := range ts {
		a = min(a, o)
	}
	return min(a, b, c, d)
}

// young applies the discard test to age stamp over the live entries that
// are blocks (Free entries are free memory): pessimistic, is some entry
// older; optimistic, is every entry older (and there is one). live is
// asked only of an entry that looks dead.
func (t *peerAges) young(stamp Time, test DiscardTest, live func(i int) bool) bool {
	switch test {
	case DiscardPessimistic:
		for _, o := range t.olds {
			if o != Free && o < stamp {
				return true
			}
		}
	case DiscardOptimistic:
		n := 0
		for i, o := range t.olds {
			if o == Free || o == dead && !live(i) {
				continue
			}
			if o >= stamp {
				return false
			}
			n++
		}
		return n > 0
	}
	return false
}
