package directory

import (
	"math"
	"time"

	"github.com/coopfs/coopfs/internal/block"
)

// Swarm forwarding (Config.Swarm) tells the holders that have a block from
// the ones still receiving it. A requester is recorded as a holder the
// moment it asks (the optimistic update), and a forward to it waits until
// its own copy arrives. When many clients read one file at once, the
// least-loaded holder of a block is nearly always the one that asked last,
// still waiting itself: the forwards form one chain per block, each hop
// waiting for the hop before it, as deep as the number of readers. With a
// read-ahead of W blocks a reader then gets about W/depth of its link,
// and the deepest waits run into the forward timeout and back to the
// server.
//
// So each optimistic record carries its depth: 1 for a requester the
// server serves, the holder's depth + 1 for one forwarded to a holder. A
// holder's Held (Confirm) clears it to 0: it has the block. A forward goes
// to the holder with the least recent load plus depth, never to one whose
// depth reaches MaxDepth while a shallower one exists: the waits form
// trees at most MaxDepth deep instead of chains.

// Swarm defaults.
const (
	DefaultMaxDepth = 3
	// DefaultPendingTTL is how long an unconfirmed record keeps its depth:
	// past it the forward to it has been served or has timed out (the live
	// forward timeout is 5 s), and a client that never confirms counts as
	// a plain holder.
	DefaultPendingTTL = 10 * time.Second
)

// pendRec is an unconfirmed holder record: its depth, and when it was made.
type pendRec struct {
	depth uint8
	at    time.Duration
}

// Confirm records that client c has blocks ids (they arrived and are in its
// cache): where it is a holder it counts as one that has them from now on,
// and the forward that brought one, if any, is no longer outstanding at its
// holder. It records no holder: a block c never asked for stays
// unrecorded.
func (d *Directory) Confirm(now time.Duration, c ClientID, ids []block.ID) {
	if !d.cfg.Swarm {
		return
	}
	d.stats.Confirmed += uint64(len(ids))
	for _, id := range ids {
		delete(d.pend, fwdKey{c, id})
		d.recall(now, c, id)
	}
}

// Outstanding returns c's outstanding forwards (Swarm): the copies it has
// been asked to send whose requesters have not confirmed them.
func (d *Directory) Outstanding(c ClientID) int {
	if cl := d.clients.get(c); cl != nil {
		return cl.out
	}
	return 0
}

// forwardDone ends an outstanding forward to holder (Swarm).
func (d *Directory) forwardDone(holder ClientID) {
	if !d.cfg.Swarm {
		return
	}
	if cl := d.clients.get(holder); cl != nil && cl.out > 0 {
		cl.out--
	}
}

// Depth returns the depth of c's record for id at now: 0 when c has the
// block (confirmed, expired or not swarm), else the length of the chain of
// waits to a copy that exists.
func (d *Directory) Depth(now time.Duration, c ClientID, id block.ID) int {
	r, ok := d.pend[fwdKey{c, id}]
	if !ok || now-r.at > d.cfg.PendingTTL {
		return 0
	}
	return int(r.depth)
}

// pending records c's new holder record for id at depth (Swarm). The map
// is bounded by Config.Entries: when full, the expired records go; when
// still full, the record is not kept (c counts as having the block).
func (d *Directory) pending(now time.Duration, c ClientID, id block.ID, depth int) {
	k := fwdKey{c, id}
	if _, ok := d.pend[k]; !ok && len(d.pend) >= d.cfg.Entries {
		for k, r := range d.pend {
			if now-r.at > d.cfg.PendingTTL {
				delete(d.pend, k)
			}
		}
		if len(d.pend) >= d.cfg.Entries {
			return
		}
	}
	d.pend[k] = pendRec{depth: uint8(min(depth, math.MaxUint8)), at: now}
}

// pickSwarm chooses by the queue a forward would join: the holder with the
// fewest outstanding forwards plus depth among those shallower than
// MaxDepth (ties go to the least recent load, then to the next in the
// rotation after e.last), else the shallowest. A holder's uplink carries
// its outstanding copies at once: the recent load counts the rate of
// forwards, not whether a slow holder has fallen behind. It
// returns the holder and its depth; NoClient (or Server when the server
// holds the block in memory) when no holder can serve.
func (d *Directory) pickSwarm(now time.Duration, e int32, requester ClientID) (ClientID, int) {
	ent := &d.tab.ents[e]
	best, bestScore, bestLoad, bestAfter, bestDepth := NoClient, math.MaxInt, math.Inf(1), false, 0
	shallow, shallowDepth := NoClient, math.MaxInt
	for c := range d.tab.holders(e) {
		cl := d.clients.get(c)
		if c == requester || cl.Pinging {
			continue
		}
		depth := d.Depth(now, c, ent.id)
		if depth < shallowDepth {
			shallow, shallowDepth = c, depth
		}
		if depth >= d.cfg.MaxDepth {
			continue
		}
		score, load := cl.out+depth, d.recentLoad(cl, now)
		after := ent.last == NoClient || c > ent.last
		if score < bestScore || score == bestScore && (load < bestLoad || load == bestLoad && after && !bestAfter) {
			best, bestScore, bestLoad, bestAfter, bestDepth = c, score, load, after, depth
		}
	}
	if best == NoClient && shallow != NoClient {
		return shallow, shallowDepth
	}
	if best == NoClient && d.tab.memHas(ent.id) {
		return Server, 0
	}
	return best, bestDepth
}
