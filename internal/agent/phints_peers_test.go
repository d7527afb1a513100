package agent

import (
	"slices"
	"testing"

	"github.com/coopfs/coopfs/internal/wire"
)

// The client list's changes are numbered: a whole list that an answer
// brings after later deltas were applied is older than what the client
// knows, and must not undo them; a delta applied already changes nothing.
func TestSetPeersKeepsTheNewestList(t *testing.T) {
	h := &hintsClient{boot: 1, blocks: 4, members: make(map[uint32]wire.HintsMember), last: make(map[uint64]uint64)}
	member := func(id uint32) wire.HintsMember {
		return wire.HintsMember{ID: id, Boot: 1, Listen: "peer" + string(rune('0'+id))}
	}
	known := func() []uint32 {
		var ids []uint32
		for id := range h.members {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}
	h.setPeers(&wire.HintsPeers{You: 1, Members: []wire.HintsMember{member(1), member(2)}, Seq: 10}, true)
	h.setPeers(&wire.HintsPeers{You: 1, Delta: true, Members: []wire.HintsMember{member(3)}, Seq: 11}, true)
	h.setPeers(&wire.HintsPeers{You: 1, Members: []wire.HintsMember{member(1), member(2)}, Seq: 10}, false) // overtaken
	if got := known(); !slices.Equal(got, []uint32{2, 3}) {
		t.Fatalf("after a whole list older than a delta: members %v, want [2 3]", got)
	}
	h.setPeers(&wire.HintsPeers{You: 1, Delta: true, Gone: []uint32{3}, Seq: 12}, true)
	h.setPeers(&wire.HintsPeers{You: 1, Delta: true, Members: []wire.HintsMember{member(3)}, Seq: 11}, true) // again
	if got := known(); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("after a delta applied twice: members %v, want [2]", got)
	}
	h.setPeers(&wire.HintsPeers{You: 1, Members: []wire.HintsMember{member(1), member(4)}, Seq: 20}, false)
	if got := known(); !slices.Equal(got, []uint32{4}) || h.seq != 20 {
		t.Fatalf("after a newer whole list: members %v (seq %d), want [4] (20)", got, h.seq)
	}
}
