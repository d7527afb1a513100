package wholefile

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func newServer(t *testing.T) *Server {
	t.Helper()
	s, err := NewServer(Config{Epoch: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFigure1 plays seed 001's figure 1 on the state machine: c1 and c2
// open, c1 writes and closes (it holds the result: the map is {c1}), c2
// writes and closes (c1 committed since c2's open: the map empties), c3
// opens and is sent to the server.
func TestFigure1(t *testing.T) {
	s := newServer(t)
	const f = 7
	o1 := s.Open(1, f, 10, false)
	o2 := s.Open(2, f, 10, false)
	if o1.Commit != 1000 || o2.Commit != 1000 || len(o1.Holders)+len(o2.Holders) != 0 {
		t.Fatalf("opens: %+v %+v", o1, o2)
	}
	r1 := s.Commit(1, f, o1.Commit, 11, true) // c1 wrote "X": version 11
	if !r1.Valid || r1.Commit != 1001 || !slices.Equal(s.Holders(f), []ClientID{1}) {
		t.Fatalf("c1's commit: %+v, holders %v", r1, s.Holders(f))
	}
	r2 := s.Commit(2, f, o2.Commit, 12, true) // c2 wrote "Y": version 12
	if r2.Valid || r2.Commit != 1002 || len(s.Holders(f)) != 0 {
		t.Fatalf("c2's commit after c1's: %+v, holders %v", r2, s.Holders(f))
	}
	o3 := s.Open(3, f, 12, false)
	if len(o3.Holders) != 0 || o3.Commit != 1002 {
		t.Fatalf("c3 must read from the server: %+v", o3)
	}
}

// TestCommitRace: two writers closing in turn; the second's copy is not
// valid, and one whose copy is not whole never becomes the map.
func TestCommitRace(t *testing.T) {
	s := newServer(t)
	a := s.Open(1, 1, 5, false)
	b := s.Open(2, 1, 5, false)
	if r := s.Commit(2, 1, b.Commit, 6, false); r.Valid {
		t.Fatal("a closer without the whole file became the map")
	}
	if r := s.Commit(1, 1, a.Commit, 7, true); r.Valid {
		t.Fatal("a closer whose open preceded another commit became the map")
	}
	c := s.Open(3, 1, 7, false)
	if r := s.Commit(3, 1, c.Commit, 8, true); !r.Valid {
		t.Fatal("a lone writer holding the file whole did not become the map")
	}
	// A commit whose version the server no longer has (changed since).
	d := s.Open(4, 1, 8, false)
	s.Changed(1, 9)
	if got := s.Holders(1); len(got) != 0 {
		t.Fatalf("holders after a change: %v", got)
	}
	if r := s.Commit(4, 1, d.Commit, 0, true); r.Valid {
		t.Fatal("a commit of an unknown version became the map")
	}
}

// TestReadersJoin: readers that fetched the current version join the map;
// one that fetched an older version does not; a client that leaves is no
// holder.
func TestReadersJoin(t *testing.T) {
	s := newServer(t)
	s.Open(1, 3, 20, false)
	if !s.Have(1, 3, 20) {
		t.Fatal("reader of the current version not taken")
	}
	o := s.Open(2, 3, 20, false)
	if !slices.Equal(o.Holders, []ClientID{1}) {
		t.Fatalf("second opener's holders %v", o.Holders)
	}
	s.Have(2, 3, 20)
	if s.Have(3, 3, 19) {
		t.Fatal("a copy of an older version joined the map")
	}
	o = s.Open(3, 3, 20, true) // a valid copy says so on open
	if !slices.Equal(o.Holders, []ClientID{1, 2}) || !slices.Equal(s.Holders(3), []ClientID{1, 2, 3}) {
		t.Fatalf("holders %v, map %v", o.Holders, s.Holders(3))
	}
	s.Left(2)
	s.Dropped(3, 3)
	if !slices.Equal(s.Holders(3), []ClientID{1}) {
		t.Fatalf("after a leave and a drop: %v", s.Holders(3))
	}
	// The file changed behind the map's back: the next open sees none.
	if o := s.Open(4, 3, 21, false); len(o.Holders) != 0 {
		t.Fatalf("holders of an older version handed out: %v", o.Holders)
	}
	checkIndex(t, s)
}

// TestFetchers: a reader without a current copy is a fetcher until it
// holds the file (Have) or gives up (Dropped); later openers learn of it
// beside the holders; a change, a commit or a leave ends it, and a copy of
// another version never makes one.
func TestFetchers(t *testing.T) {
	s := newServer(t)
	s.Open(1, 4, 30, false)
	if !s.Fetching(1, 4, 30) || s.Fetching(2, 4, 29) {
		t.Fatal("fetchers: the current version's reader not taken, or an older one taken")
	}
	o := s.Open(2, 4, 30, false)
	if len(o.Holders) != 0 || !slices.Equal(o.Fetchers, []ClientID{1}) {
		t.Fatalf("second opener: %+v", o)
	}
	s.Fetching(2, 4, 30)
	if !s.Have(1, 4, 30) || !slices.Equal(s.Fetchers(4), []ClientID{2}) || !slices.Equal(s.Holders(4), []ClientID{1}) {
		t.Fatalf("after a fetcher got the file: fetchers %v, holders %v", s.Fetchers(4), s.Holders(4))
	}
	if s.Fetching(1, 4, 30) {
		t.Fatal("a holder became a fetcher")
	}
	o = s.Open(3, 4, 30, false)
	if !slices.Equal(o.Holders, []ClientID{1}) || !slices.Equal(o.Fetchers, []ClientID{2}) {
		t.Fatalf("third opener: %+v", o)
	}
	s.Fetching(3, 4, 30)
	s.Dropped(2, 4)
	s.Left(3)
	if len(s.Fetchers(4)) != 0 {
		t.Fatalf("fetchers after a drop and a leave: %v", s.Fetchers(4))
	}
	s.Fetching(5, 4, 30)
	s.Changed(4, 31)
	if len(s.Fetchers(4))+len(s.Holders(4)) != 0 {
		t.Fatal("a change left fetchers or holders")
	}
	o5 := s.Open(5, 4, 31, false)
	s.Fetching(5, 4, 31)
	s.Fetching(6, 4, 31)
	if r := s.Commit(5, 4, o5.Commit, 32, true); !r.Valid || len(s.Fetchers(4)) != 0 {
		t.Fatalf("a commit: %+v, fetchers %v", r, s.Fetchers(4))
	}
	checkIndex(t, s)
}

// TestRestartEpoch: a restarted server (a later epoch) never matches a
// counter handed out before.
func TestRestartEpoch(t *testing.T) {
	s := newServer(t)
	o := s.Open(1, 1, 5, false)
	s2, _ := NewServer(Config{Epoch: 2000})
	if r := s2.Commit(1, 1, o.Commit, 5, true); r.Valid {
		t.Fatal("a counter from the previous life matched")
	}
}

func TestBound(t *testing.T) {
	s, _ := NewServer(Config{MaxFiles: 4})
	for f := uint64(1); f <= 10; f++ {
		s.Open(ClientID(f%3), f, 1, true)
	}
	if s.Len() > 4 {
		t.Fatalf("tracking %d files, bound 4", s.Len())
	}
	checkIndex(t, s)
}

// checkIndex checks the INVARIANT of Server.
func checkIndex(t *testing.T, s *Server) {
	t.Helper()
	n := 0
	for file, st := range s.files {
		seen := map[ClientID]bool{}
		for _, c := range append(slices.Clone(st.valid), st.fetching...) {
			if seen[c] {
				t.Fatalf("client %d twice in file %d's sets", c, file)
			}
			seen[c] = true
			if _, ok := s.byClient[c][file]; !ok {
				t.Fatalf("client %d in file %d's sets but not indexed", c, file)
			}
			n++
		}
	}
	m := 0
	for _, fs := range s.byClient {
		m += len(fs)
	}
	if n != m {
		t.Fatalf("%d map entries, %d index entries", n, m)
	}
}

func TestFetchSplit(t *testing.T) {
	f := NewFetch(10, 3, 2)
	want := []Range{{0, 4}, {4, 3}, {7, 3}}
	if got := f.Segments(); !slices.Equal(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	// Holder 2 is fast: it finishes its segment, then takes half of the
	// largest one left.
	f.Next(0)
	f.Next(2)
	f.Next(2)
	r, ok := f.Next(2)
	if !ok || f.Resplits() != 1 || r.First < 2 || r.First >= 7 {
		t.Fatalf("steal gave %v %v, resplits %d", r, ok, f.Resplits())
	}
}

func TestFetchFailure(t *testing.T) {
	f := NewFetch(8, 2, 2)
	r0, _ := f.Next(0) // [0,2)
	f.Failed(0, r0)    // holder 0 dies mid-segment
	if _, ok := f.Next(0); ok {
		t.Fatal("a failed holder got work")
	}
	var got []uint64
	for {
		r, ok := f.Next(1)
		if !ok {
			break
		}
		for b := r.First; b < r.end(); b++ {
			got = append(got, b)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []uint64{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("survivor fetched %v", got)
	}
	// Every holder dead: the rest is the server's.
	g := NewFetch(5, 1, 2)
	r, _ := g.Next(0)
	g.Failed(0, r)
	if rem := g.Remaining(); len(rem) != 2 || rem[0] != (Range{0, 2}) || rem[1] != (Range{2, 3}) {
		t.Fatalf("remaining %v", rem)
	}
	if rem := NewFetch(3, 0, 1).Remaining(); len(rem) != 1 || rem[0] != (Range{0, 3}) {
		t.Fatalf("no holders: remaining %v", rem)
	}
}

// TestFetchSequential: holders whose copies are still arriving take the
// lowest chunk left, whatever holder asks; what one sent only part of goes
// back first in line.
func TestFetchSequential(t *testing.T) {
	f := NewSequentialFetch(10, 2, 3)
	a, _ := f.Next(1)
	b, _ := f.Next(0)
	if a != (Range{0, 3}) || b != (Range{3, 3}) {
		t.Fatalf("first chunks %v %v", a, b)
	}
	f.Returned(Range{1, 2}) // holder 1 had block 0 only
	if r, _ := f.Next(0); r != (Range{1, 2}) {
		t.Fatalf("after a short answer: %v, want the rest first", r)
	}
	if r, _ := f.Next(1); r != (Range{6, 3}) {
		t.Fatalf("next: %v", r)
	}
	f.Failed(1, Range{6, 3})
	var got []Range
	for r, ok := f.Next(0); ok; r, ok = f.Next(0) {
		got = append(got, r)
	}
	if !slices.Equal(got, []Range{{6, 3}, {9, 1}}) || len(f.Remaining()) != 0 {
		t.Fatalf("survivor took %v, remaining %v", got, f.Remaining())
	}
}

// TestFetchProperty: under any schedule of chunk completions and failures,
// every block is fetched exactly once, by a live holder or (Remaining)
// the server.
func TestFetchProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		blocks := uint64(rng.IntN(50))
		n := rng.IntN(5)
		f := NewFetch(blocks, n, uint64(1+rng.IntN(4)))
		if trial%2 == 1 {
			f = NewSequentialFetch(blocks, n, uint64(1+rng.IntN(4)))
		}
		count := make([]int, blocks)
		alive := make([]bool, n)
		for i := range alive {
			alive[i] = true
		}
		for steps := 0; steps < 1000; steps++ {
			h := -1
			if n > 0 {
				h = rng.IntN(n)
			}
			if h < 0 || !alive[h] {
				break
			}
			r, ok := f.Next(h)
			if !ok {
				if !anyWork(f, alive) {
					break
				}
				continue
			}
			if rng.IntN(10) == 0 {
				f.Failed(h, r)
				alive[h] = false
				continue
			}
			if rng.IntN(5) == 0 && r.Count > 1 { // a partial holder sent part of it
				got := uint64(rng.IntN(int(r.Count)))
				f.Returned(Range{r.First + got, r.Count - got})
				r.Count = got
			}
			for b := r.First; b < r.end(); b++ {
				count[b]++
			}
		}
		for _, r := range f.Remaining() {
			for b := r.First; b < r.end(); b++ {
				count[b]++
			}
		}
		for b, c := range count {
			if c != 1 {
				t.Fatalf("trial %d (%d blocks, %d holders): block %d fetched %d times", trial, blocks, n, b, c)
			}
		}
	}
}

// anyWork drains the plan for the live holders (a holder that got nothing
// may find work once another's segment is split).
func anyWork(f *Fetch, alive []bool) bool {
	for h, a := range alive {
		if a {
			if r, ok := f.Next(h); ok {
				f.Failed(h, r) // hand it back for the property's accounting
				alive[h] = false
				return true
			}
		}
	}
	return false
}
