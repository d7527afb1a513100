package directory

import (
	"testing"

	"github.com/coopfs/coopfs/internal/block"
)

// AheadHolder names the next holder in the rotation after the one that
// served last, leaving out the requester, and wraps around.
func TestAheadHolder(t *testing.T) {
	d, err := New(Config{Dense: true, ForwardMemory: NoForwardMemory})
	if err != nil {
		t.Fatal(err)
	}
	id := block.ID{File: 1, Index: 9}
	if e := d.Ahead(id); e != 0 || d.AheadHolder(e, 1) != NoClient {
		t.Fatalf("no entry yet: Ahead = %d", e)
	}
	for _, c := range []ClientID{1, 3, 5} {
		d.Request(0, c, id, 1)
	}
	e := d.Ahead(id)
	if e == 0 {
		t.Fatal("no entry after three requests")
	}
	// the requests went 1 (served), 3 (forwarded to 1), 5 (forwarded to 3):
	// last is 3, the holders 1, 3 and 5
	for _, tc := range []struct{ req, want ClientID }{{7, 5}, {5, 7}, {1, 3}, {3, 5}} {
		if got := d.AheadHolder(e, tc.req); got != tc.want {
			t.Errorf("requester %d: AheadHolder = %d, want %d", tc.req, got, tc.want)
		}
		if act := d.Request(0, tc.req, id, 1); act.Kind != ActForward || act.To != tc.want {
			t.Errorf("requester %d: Request = %+v, want a forward to %d", tc.req, act, tc.want)
		}
	}
}

// The caller's words in a dense directory's slots stay as it wrote them
// while entries come and go and the index grows.
func TestSlotUserWords(t *testing.T) {
	d, err := New(Config{Dense: true, Entries: 4, ForwardMemory: NoForwardMemory})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 50; i++ {
		d.SlotOf(i).User = [2]int32{int32(i), -int32(i)}
	}
	for i := uint64(1); i <= 200; i++ { // recycles entries, grows the index past 50
		d.Request(0, ClientID(1+i%3), block.ID{File: i % 7, Index: i}, 1)
	}
	d.Discarded(1, []block.ID{{File: 3, Index: 3}})
	d.FileChanged(2)
	s := d.Slots()
	if len(s) <= 200 {
		t.Fatalf("index holds %d slots, want more than 200", len(s))
	}
	for i := uint64(1); i <= 50; i++ {
		if s[i].User != [2]int32{int32(i), -int32(i)} {
			t.Fatalf("slot %d: User = %v", i, s[i].User)
		}
	}
	if s[199].entry == 0 || s[5].entry != 0 {
		t.Fatalf("entries: slot 199 has %d (want one), slot 5 has %d (want none)", s[199].entry, s[5].entry)
	}
}
