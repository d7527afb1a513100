package proxy

import "testing"

// TestRecallSparesExactlyItsCause: the upstream's recall of a file from
// the proxy goes on to every client holding it but the one whose request
// caused it (the break's Cause, the upstream's id of that client's own
// connection); a recall with no cause, or caused by a client holding
// nothing, goes to all. Sparing by the paths a client had in flight (the
// proxy's guess before Cause) spared a holder whose unrelated request was
// in flight, and another client's open read stale data.
func TestRecallSparesExactlyItsCause(t *testing.T) {
	d := newDelegs(&writeBack{})
	a, b := &client{name: "a", id: 7}, &client{name: "b", id: 9}
	f := d.fileLocked(42)
	f.holders[a] = holding{seq: 1}
	f.holders[b] = holding{seq: 2}
	for _, c := range []struct {
		cause uint32
		want  []*client
	}{{7, []*client{b}}, {9, []*client{a}}, {0, []*client{a, b}}, {3, []*client{a, b}}} {
		got := d.holdersOf(42, c.cause)
		if len(got) != len(c.want) {
			t.Fatalf("cause %d: %d clients recalled, want %d", c.cause, len(got), len(c.want))
		}
		for _, cl := range c.want {
			if _, ok := got[cl]; !ok {
				t.Errorf("cause %d: client %s (id %d) not recalled", c.cause, cl.name, cl.id)
			}
		}
	}
	if got := d.holdersOf(43, 7); len(got) != 0 {
		t.Errorf("a file nobody holds: %d clients recalled", len(got))
	}
}
