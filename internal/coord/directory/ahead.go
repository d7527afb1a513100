package directory

import "github.com/coopfs/coopfs/internal/block"

// Ahead and AheadHolder let a caller that knows its next requests (the
// simulator, sim.Toucher) load what they will use, in stages across many
// requests, so that the processor fetches those random places in memory
// many at a time instead of one after the other. Both only read: nothing
// the directory decides depends on whether they were called.

// Ahead loads id's place in the index and returns its entry, 0 if none:
// a token for AheadHolder, valid until the directory next changes.
func (d *Directory) Ahead(id block.ID) int32 { return d.tab.get(id) }

// AheadHolder loads entry e (from Ahead; 0 for none) and returns the
// holder a request from requester would most likely be forwarded to, in
// the rotation and leaving out the clients being pinged and the server
// (NoClient if none or if it cannot tell).
func (d *Directory) AheadHolder(e int32, requester ClientID) ClientID {
	if e <= 0 || int(e) >= len(d.tab.ents) {
		return NoClient
	}
	ent := &d.tab.ents[e]
	return ent.nextHolder(ent.last, requester)
}
