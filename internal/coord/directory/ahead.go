package directory

import "github.com/coopfs/coopfs/internal/block"

// Slot is one block's place in a Dense directory's index (by the block's
// number): the handle of its entry, and User, words the caller keeps
// beside it (the simulator keeps its caches' handles of the block there),
// so that one load finds both. The directory never reads or writes User.
type Slot struct {
	entry int32 // the entry's handle (slotEntry), and slotMem
	User  [2]int32
}

// A slot's entry word: the entry's handle in its low bits, and the block's
// membership of the server's memory (table.memHas) in its top bit.
const (
	slotMem   = -1 << 31
	slotEntry = 1<<31 - 1
)

// Slots returns a Dense directory's index: block number i's slot is
// Slots()[i] when i < len(Slots()), zero beyond (nil when not Dense). The
// slice is valid until the next call that may grow it: SlotOf,
// ServerCached, and any that records a holder (Request,
// RequestPeersFirst, Retry).
func (d *Directory) Slots() []Slot { return d.tab.slot }

// SlotOf returns block number i's slot in a Dense directory's index,
// growing the index to hold it.
func (d *Directory) SlotOf(i uint64) *Slot { return d.tab.slotOf(i) }

// Ahead and AheadHolder let a caller that knows its next requests (the
// simulator, sim.Toucher) load what they will use, in stages across many
// requests, so that the processor fetches those random places in memory
// many at a time instead of one after the other. Both only read: nothing
// the directory decides depends on whether they were called.

// Ahead loads id's place in the index and returns its entry, 0 if none:
// a token for AheadHolder, valid until the directory next changes.
func (d *Directory) Ahead(id block.ID) int32 { return d.tab.get(id) }

// AheadHolder loads entry e (from Ahead; 0 for none) and returns the
// holder a request from requester would most likely be forwarded to: the
// next client below 64 in the rotation, without pick's other checks (the
// server's turn, clients being pinged), NoClient if there is none.
func (d *Directory) AheadHolder(e int32, requester ClientID) ClientID {
	if e <= 0 || int(e) >= len(d.tab.ents) {
		return NoClient
	}
	ent := &d.tab.ents[e]
	return ent.nextHolder(ent.last, requester)
}
