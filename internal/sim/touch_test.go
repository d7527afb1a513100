package sim

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// aheadSlice is a Slice whose source may be read ahead, as trace files are.
type aheadSlice struct{ Slice }

type aheadSource struct{ sliceSource }

func (s *aheadSlice) Open() (Source, error) { return &aheadSource{sliceSource{a: s.Accesses}}, nil }
func (*aheadSource) ReadAhead() bool        { return true }

// toucher is everyOther that records what it was handed: every access it
// simulated and, for each, how many accesses were simulated between Touch
// being handed it and its own turn (-1 if never touched).
type toucher struct {
	everyOther
	window  int
	seen    int64
	touched map[int64]int64 // access time → seen when touched
	early   []int64
}

func (t *toucher) TouchWindow() int { return t.window }

func (t *toucher) Touch(ahead []Access) {
	for _, a := range ahead {
		t.touched[int64(a.Time)] = t.seen
	}
}

func (t *toucher) Access(a Access, c *Counters) Outcome {
	at, ok := t.touched[int64(a.Time)]
	if !ok {
		at = -1
	} else {
		at = t.seen - at
	}
	t.early = append(t.early, at)
	t.seen++
	return t.everyOther.Access(a, c)
}

// TestTouchAhead checks that Run hands a Toucher each window of a batch
// before the window in front of it is simulated, and that the results are
// the same as without touching.
func TestTouchAhead(t *testing.T) {
	p := DefaultParams()
	p.Clients, p.WarmUp = 2, 100
	n := prefetchBatch + 1000 // two batches
	acc := make([]Access, n)
	for i := range acc {
		acc[i] = Access{Time: time.Duration(i), Client: i % 2, Block: uint64(i * 7 % 13)}
	}
	w := &aheadSlice{Slice{Label: "t", Accesses: acc}}
	want, err := Run(context.Background(), w, everyOther{}, p, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const window = 16
	tc := &toucher{window: window, touched: map[int64]int64{}}
	got, err := Run(context.Background(), w, tc, p, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("touched run: %+v, want %+v", got, want)
	}
	if len(tc.early) != n {
		t.Fatalf("simulated %d accesses, want %d", len(tc.early), n)
	}
	for i, e := range tc.early {
		first := i%prefetchBatch < window // a batch's first window
		switch {
		case first && e != -1:
			t.Fatalf("access %d (first window of its batch) touched %d accesses before", i, e)
		case !first && e != int64(window+i%prefetchBatch%window):
			// Touched as the window before its own began.
			t.Fatalf("access %d touched %d accesses before it ran, want %d", i, e, window+i%prefetchBatch%window)
		}
	}
}
