package directory

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// ClientID names a client of one export. The live server assigns ids at
// mount time; ids are small integers starting at 1.
type ClientID uint32

const (
	// Server is the server itself: a rotation member while it holds the
	// block in memory. It is never a client id.
	Server ClientID = 0
	// NoClient means "none" or "unknown" (e.g. Retry's holder after a
	// timeout).
	NoClient ClientID = ^ClientID(0)
)

// Kind is what an Action asks the server to do.
type Kind uint8

const (
	// ActServe: the server sends the block to Action.Client itself (from
	// memory or disk).
	ActServe Kind = iota + 1
	// ActForward: the server forwards the request to Action.To, with
	// Action.Version; To sends the block directly to Action.Client.
	ActForward
)

func (k Kind) String() string {
	switch k {
	case ActServe:
		return "serve"
	case ActForward:
		return "forward"
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Action is the directory's answer to a Request or Retry.
type Action struct {
	Kind    Kind
	Client  ClientID      // the requester
	To      ClientID      // ActForward: the holder that must send the block
	Block   block.ID      //
	Version block.Version // the file's current version; a forward carries it to the holder
	// FromMemory is set on ActServe when the server chose itself in the
	// rotation (it reported the block in memory with ServerCached).
	FromMemory bool
	// Ping, when not Server (zero), is a client the server must ping now:
	// it missed MissThreshold forwards in a row. Report the outcome with
	// PingOK or PingFailed (or let Tick time it out).
	Ping ClientID
}

// Stats are the server-side counters.
type Stats struct {
	Requests         uint64 // Request events (first asks for a block)
	Retries          uint64 // Retry events (asks again after a failed forward)
	ServedByServer   uint64 // ActServe actions, from requests and retries
	ServedFromMemory uint64 // ... of which the server chose itself in the rotation
	Forwards         uint64 // ActForward actions
	ForwardMisses    uint64 // retries blamed on a holder (forward misses)
	Notifications    uint64 // discard notifications received
	NotifiedBlocks   uint64 // block ids in them
	Entries          int    // directory size now
	Recycled         uint64 // entries recycled in LRU order to make room
	VersionDrops     uint64 // entries reset because a request carried another version
	FileChanges      uint64 // FileChanged events
	FileDrops        uint64 // entries dropped by them
	Pings            uint64 // pings asked for
	Failures         uint64 // clients marked failed
	Joins            uint64 // ClientJoined events
	Distrusted       uint64 // clients distrusted (Distrust events)
	Confirmed        uint64 // block ids in Confirm events (Swarm)
}

// ClientStats are the counters the server keeps per client: the miss table
// and more.
type ClientStats struct {
	Requests      uint64 // requests from the client
	Retries       uint64 // retries from the client
	Served        uint64 // blocks the server served to it
	Forwards      uint64 // forwards sent to it (requests it had to serve)
	Misses        uint64 // forwards it did not serve (forward misses)
	Notifications uint64 // discard notifications from it
	MissRun       int    // consecutive misses: the miss table's counter
	Failed        bool   // marked failed: never forwarded to
	Pinging       bool   // a ping is outstanding: not forwarded to meanwhile
	Distrusted    bool   // sent blocks that failed their digest: never a holder again
}

type clientState struct {
	ClientStats
	pingDeadline time.Duration
	// load is the client's recent forwards, decayed with Config.LoadHalfLife
	// (Balanced forwarding); loadAt is when it was last brought up to date.
	load   float64
	loadAt time.Duration
	// out is the client's outstanding forwards (Swarm): sent, not yet
	// confirmed by the requester's Held or ended by its Retry.
	out int
}

// recentLoad returns cl's decayed forward count at now.
func (d *Directory) recentLoad(cl *clientState, now time.Duration) float64 {
	if cl.load == 0 {
		return 0
	}
	return cl.load * math.Exp2(-float64(now-cl.loadAt)/float64(d.cfg.LoadHalfLife))
}

type fwdKey struct {
	client ClientID
	id     block.ID
}

// Hash implements lru.Hasher.
func (k fwdKey) Hash() uint64 {
	return lru.Mix((k.id.File*0x9e3779b97f4a7c15 ^ k.id.Index) + uint64(k.client)*0xbf58476d1ce4e5b9)
}

type fwdRec struct {
	key    fwdKey
	holder ClientID
	at     time.Duration
	live   bool
}

// Directory is the server-side state machine of one export. Not safe for
// concurrent use. A restarted server starts with a new Directory.
type Directory struct {
	cfg      Config
	tab      *table
	discards []int32 // Discarded's handles, kept for the next
	clients  clientMap
	stats    Stats
	// pinging has bit c set while client c (below maskClients) is being
	// pinged. INVARIANT: it is the clients' Pinging, set only through
	// setPinging.
	pinging uint64

	// the recent forwards (the seed's request cache), a ring
	ring    []fwdRec
	ringPos int
	ringIdx lru.Table[fwdKey, int]

	// pend holds the unconfirmed holder records' depths (Config.Swarm).
	pend map[fwdKey]pendRec
}

// New returns an empty directory.
func New(cfg Config) (*Directory, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Directory{
		cfg:  cfg,
		tab:  newTable(cfg.Entries, cfg.Dense),
		ring: make([]fwdRec, max(cfg.ForwardMemory, 0)),
	}
	if cfg.Swarm {
		d.pend = make(map[fwdKey]pendRec)
	}
	return d, nil
}

// Config returns the configuration in use (defaults filled in).
func (d *Directory) Config() Config { return d.cfg }

// Request handles client c's miss on block id of a file whose current
// version is v (the server's). It returns ActServe when no usable holder
// exists (or the server's own turn came) and ActForward otherwise; either
// way c is recorded as a holder of id at once (the optimistic update). A
// request from a failed client proves it alive: it is forwarded to again
// (its entries were purged when it failed, so the directory is consistent).
func (d *Directory) Request(now time.Duration, c ClientID, id block.ID, v block.Version) Action {
	return d.request(now, c, id, v, d.cfg.ServerLast)
}

// RequestPeersFirst is Request with the server out of the rotation for
// this request (as Config.ServerLast does for all): the server serves only
// when no holder can. A cluster warm-up asks so, so that its blocks cross
// the server's link once.
func (d *Directory) RequestPeersFirst(now time.Duration, c ClientID, id block.ID, v block.Version) Action {
	return d.request(now, c, id, v, true)
}

func (d *Directory) request(now time.Duration, c ClientID, id block.ID, v block.Version, serverLast bool) Action {
	cl := d.heard(c)
	cl.Requests++
	d.stats.Requests++
	e := d.current(id, v)
	to, depth := NoClient, 0
	if e != 0 {
		d.tab.touch(e)
		if d.cfg.Swarm && d.cfg.Balanced {
			to, depth = d.pickSwarm(now, e, c)
		} else if d.cfg.Balanced {
			to = d.pickBalanced(now, e, c)
		} else {
			to = d.pick(e, c, serverLast)
		}
	} else if d.tab.memHas(id) {
		to = Server
	}
	act := Action{Client: c, Block: id, Version: v}
	if to == NoClient || to == Server {
		act.Kind = ActServe
		act.FromMemory = to == Server
		d.served(cl, act.FromMemory)
	} else {
		act.Kind, act.To = ActForward, to
		d.tab.ents[e].last = to
		d.stats.Forwards++
		d.clients.get(to).Forwards++
		if d.cfg.Balanced {
			h := d.clients.get(to)
			h.load, h.loadAt = d.recentLoad(h, now)+1, now
			if d.cfg.Swarm && len(d.ring) > 0 {
				h.out++ // until remember's record of it is consumed or overwritten
			}
		}
		d.remember(now, c, id, to)
	}
	e = d.record(e, id, v, c, cl)
	if act.FromMemory && e != 0 {
		d.tab.ents[e].last = Server
	}
	if d.cfg.Swarm {
		d.pending(now, c, id, depth+1)
	}
	return act
}

// Retry handles client c asking again for id after its forward failed: a
// negative reply from holder, or a timeout (holder = NoClient: the
// directory blames the client it last forwarded c's request for id to, if it
// remembers). The server serves the block; the stale holder is dropped from
// the entry and counted in the miss table, and Action.Ping names it when its
// run of misses reaches Config.MissThreshold.
func (d *Directory) Retry(now time.Duration, c ClientID, id block.ID, v block.Version, holder ClientID) Action {
	cl := d.heard(c)
	cl.Retries++
	d.stats.Retries++
	if remembered := d.recall(now, c, id); holder == NoClient {
		holder = remembered
	}
	act := Action{Kind: ActServe, Client: c, Block: id, Version: v}
	e := d.current(id, v)
	if h := d.clients.get(holder); h != nil && holder != Server && holder != c {
		h.Misses++
		h.MissRun++
		d.stats.ForwardMisses++
		if e != 0 && d.tab.del(e, holder) && d.tab.ents[e].empty() {
			d.tab.remove(e)
			e = 0
		}
		if h.MissRun >= d.cfg.MissThreshold && !h.Pinging && !h.Failed {
			d.setPinging(holder, h, true)
			h.pingDeadline = now + d.cfg.PingTimeout
			d.stats.Pings++
			act.Ping = holder
		}
	}
	if e != 0 {
		d.tab.touch(e)
	}
	d.served(cl, false)
	d.record(e, id, v, c, cl)
	if d.cfg.Swarm {
		d.pending(now, c, id, 1)
	}
	return act
}

// Discarded applies a discard notification: client c no longer caches ids.
func (d *Directory) Discarded(c ClientID, ids []block.ID) {
	cl := d.heard(c)
	cl.Notifications++
	d.stats.Notifications++
	d.stats.NotifiedBlocks += uint64(len(ids))
	// The handles first, then the entries, then the changes: each pass's
	// loads are independent of each other, so that the processor fetches
	// the notified blocks' slots (and then entries), random places in
	// memory, many at a time instead of one after the other. A block
	// notified twice finds its entry emptied of c, or freed and zeroed
	// (nothing is created meanwhile), the second time: del is false.
	hs := d.tab.handles(ids, d.discards[:0])
	d.tab.fetch(hs)
	for _, e := range hs {
		if e != 0 && d.tab.del(e, c) && d.tab.ents[e].empty() {
			d.tab.remove(e)
		}
	}
	d.discards = hs[:0]
	d.stats.Entries = d.tab.len()
}

// ServerCached tells the directory that the server now holds id in memory:
// the server joins the block's rotation.
func (d *Directory) ServerCached(id block.ID) { d.tab.memPut(id) }

// ServerEvicted tells the directory that the server dropped id from memory:
// it leaves the rotation, so that a forward never costs a disk read.
func (d *Directory) ServerEvicted(id block.ID) { d.tab.memDel(id) }

// FileChanged drops every entry of file: its content changed on the server.
// (Requests carrying a new version reset a stale entry anyway; this frees
// them at once.)
func (d *Directory) FileChanged(file uint64) {
	d.stats.FileChanges++
	d.stats.FileDrops += uint64(d.tab.dropFile(file))
	d.stats.Entries = d.tab.len()
}

// ClientJoined handles a fresh mount by c: whatever the directory believed
// c cached is purged before c takes part again.
func (d *Directory) ClientJoined(c ClientID) {
	cl := d.client(c)
	d.purge(c)
	cl.Failed, cl.MissRun = false, 0
	d.setPinging(c, cl, false)
	d.stats.Joins++
}

// ClientFailed marks c failed (unresponsive, disconnected): it is no longer
// forwarded to and its entries are purged.
func (d *Directory) ClientFailed(c ClientID) {
	cl := d.client(c)
	if !cl.Failed {
		d.stats.Failures++
	}
	cl.Failed = true
	d.setPinging(c, cl, false)
	d.purge(c)
}

// Distrust handles client c having sent blocks that failed their digest
// (the server decides how many make it so): c is purged from every entry
// and never recorded as a holder again, so no request is forwarded to it;
// it is still served. Unlike Failed, nothing c does clears it; a new
// connection is a new ClientID.
func (d *Directory) Distrust(c ClientID) {
	cl := d.client(c)
	if !cl.Distrusted {
		d.stats.Distrusted++
	}
	cl.Distrusted = true
	d.purge(c)
}

// Forget drops what the directory keeps of a failed client (its counters):
// the server forgets departed clients so that its tables and per-client
// metric series stay bounded. A client that is not failed is kept.
func (d *Directory) Forget(c ClientID) {
	if cl := d.clients.get(c); cl != nil && cl.Failed {
		d.purge(c)
		d.clients.del(c)
	}
}

// PingFailed is ClientFailed for a ping that got no answer.
func (d *Directory) PingFailed(c ClientID) { d.ClientFailed(c) }

// PingOK records c's answer to a ping: its miss run clears.
func (d *Directory) PingOK(c ClientID) {
	cl := d.client(c)
	cl.MissRun = 0
	d.setPinging(c, cl, false)
}

// Tick marks failed every client whose ping has been outstanding for
// Config.PingTimeout at now, and returns them in increasing order (nil if
// none).
func (d *Directory) Tick(now time.Duration) []ClientID {
	var failed []ClientID
	d.clients.each(func(c ClientID, cl *clientState) {
		if cl.Pinging && now >= cl.pingDeadline {
			failed = append(failed, c)
		}
	})
	slices.Sort(failed)
	for _, c := range failed {
		d.ClientFailed(c)
	}
	return failed
}

// Stats returns the server-side counters.
func (d *Directory) Stats() Stats {
	s := d.stats
	s.Entries = d.tab.len()
	return s
}

// Len is the number of directory entries.
func (d *Directory) Len() int { return d.tab.len() }

// ClientStats returns c's counters, and false if c was never heard of.
func (d *Directory) ClientStats(c ClientID) (ClientStats, bool) {
	cl := d.clients.get(c)
	if cl == nil {
		return ClientStats{}, false
	}
	return cl.ClientStats, true
}

// Clients returns the ids of every client heard of, in increasing order.
func (d *Directory) Clients() []ClientID {
	ids := make([]ClientID, 0, d.clients.len())
	d.clients.each(func(c ClientID, _ *clientState) { ids = append(ids, c) })
	slices.Sort(ids)
	return ids
}

// Holders returns the clients the directory believes cache id (a copy, in
// increasing order), nil if none.
func (d *Directory) Holders(id block.ID) []ClientID {
	if e := d.tab.get(id); e != 0 {
		return slices.Collect(d.tab.holders(e))
	}
	return nil
}

// client returns c's state, creating it.
func (d *Directory) client(c ClientID) *clientState {
	cl := d.clients.get(c)
	if cl == nil {
		cl = new(clientState)
		d.clients.set(c, cl)
	}
	return cl
}

// heard records a message from c: it is alive, its miss run clears (seed
// 000 III-D) and a failed c takes part again.
func (d *Directory) heard(c ClientID) *clientState {
	cl := d.clients.get(c)
	if cl == nil {
		cl = d.client(c)
	}
	cl.MissRun, cl.Failed = 0, false
	if cl.Pinging { // else its bit is clear (INVARIANT of d.pinging)
		d.setPinging(c, cl, false)
	}
	return cl
}

// setPinging sets client c's Pinging (cl is c's state) and its bit in
// d.pinging.
func (d *Directory) setPinging(c ClientID, cl *clientState, on bool) {
	cl.Pinging = on
	if c < maskClients {
		if on {
			d.pinging |= 1 << c
		} else {
			d.pinging &^= 1 << c
		}
	}
}

func (d *Directory) served(cl *clientState, fromMem bool) {
	cl.Served++
	d.stats.ServedByServer++
	if fromMem {
		d.stats.ServedFromMemory++
	}
}

// current returns id's entry if it is for version v; an entry for another
// version is dropped (its holders cache a stale or unknown version).
func (d *Directory) current(id block.ID, v block.Version) int32 {
	e := d.tab.get(id)
	if e != 0 && d.tab.ents[e].ver != v {
		return d.dropVersion(e)
	}
	return e
}

// dropVersion drops entry e, of another version than a request's, and
// returns 0; not inlined, so that current is.
//
//go:noinline
func (d *Directory) dropVersion(e int32) int32 {
	d.tab.remove(e)
	d.stats.VersionDrops++
	return 0
}

// pick chooses the next node in e's rotation after e.last: the server when
// it holds the block in memory, then the holders in increasing id order,
// skipping the requester and clients being pinged. With serverLast
// (Config.ServerLast, or RequestPeersFirst) the server is left out of the rotation and chosen only when no holder
// can be. NoClient if none.
func (d *Directory) pick(e int32, requester ClientID, serverLast bool) ClientID {
	ent := &d.tab.ents[e]
	last, first := ent.last, NoClient // first: the first node that can serve, in rotation order
	inMem := d.tab.memHas(ent.id)
	if inMem && !serverLast {
		if last == NoClient {
			return Server // the server (0) comes first in the rotation
		}
		first = Server
	}
	// the holders below 64 that can serve, in one mask: the lowest after
	// last if any, else the lowest
	if m := ent.mask &^ (1 << requester) &^ d.pinging; m != 0 {
		if last == NoClient {
			return ClientID(bits.TrailingZeros64(m))
		}
		if last < maskClients-1 {
			if after := m & (^uint64(0) << (last + 1)); after != 0 {
				return ClientID(bits.TrailingZeros64(after))
			}
		}
		first = min(first, ClientID(bits.TrailingZeros64(m)))
	}
	if ent.more != 0 {
		for _, c := range d.tab.more[ent.more] {
			if c != requester && !d.clients.get(c).Pinging {
				if c > last || last == NoClient {
					return c
				}
				first = min(first, c)
			}
		}
	}
	if first == NoClient && inMem {
		return Server
	}
	return first
}

// pickBalanced chooses, among the holders other than the requester and
// clients being pinged, the one with the fewest recent forwards (ties go to
// the next in the rotation after e.last), so that no holder's link carries
// several copies of a block while another's is idle. The server serves only
// when no holder can (it holds the block in memory). NoClient if none.
func (d *Directory) pickBalanced(now time.Duration, e int32, requester ClientID) ClientID {
	best, bestLoad, bestAfter, last := NoClient, math.Inf(1), false, d.tab.ents[e].last
	for c := range d.tab.holders(e) {
		cl := d.clients.get(c)
		if c == requester || cl.Pinging {
			continue
		}
		l := d.recentLoad(cl, now)
		after := last == NoClient || c > last
		if l < bestLoad || l == bestLoad && after && !bestAfter {
			best, bestLoad, bestAfter = c, l, after
		}
	}
	if best == NoClient && d.tab.memHas(d.tab.ents[e].id) {
		return Server
	}
	return best
}

// record adds c (whose state is cl, as heard returned it) as a holder of id
// (version v), creating the entry if needed, and returns the entry.
func (d *Directory) record(e int32, id block.ID, v block.Version, c ClientID, cl *clientState) int32 {
	if cl.Distrusted {
		return e // never a holder again
	}
	if e == 0 {
		var recycled bool
		e, recycled = d.tab.create(id, v)
		if recycled {
			d.stats.Recycled++
		}
	}
	d.tab.add(e, c)
	d.stats.Entries = d.tab.len()
	return e
}

// purge removes c from every entry.
func (d *Directory) purge(c ClientID) {
	d.tab.each(func(e int32) {
		if d.tab.del(e, c) && d.tab.ents[e].empty() {
			d.tab.remove(e)
		}
	})
	d.stats.Entries = d.tab.len()
}

// remember notes that c's request for id went to holder.
func (d *Directory) remember(now time.Duration, c ClientID, id block.ID, holder ClientID) {
	if len(d.ring) == 0 {
		return // NoForwardMemory
	}
	k := fwdKey{c, id}
	if i, ok := d.ringIdx.Get(k); ok {
		d.ring[i].live = false
		d.forwardDone(d.ring[i].holder)
	}
	old := &d.ring[d.ringPos]
	if i, ok := d.ringIdx.Get(old.key); old.live && ok && i == d.ringPos {
		d.ringIdx.Delete(old.key)
		d.forwardDone(old.holder)
	}
	*old = fwdRec{key: k, holder: holder, at: now, live: true}
	d.ringIdx.Put(k, d.ringPos)
	d.ringPos = (d.ringPos + 1) % len(d.ring)
}

// recall returns (and forgets) the holder c's latest request for id went
// to, if it is younger than Config.ForwardTTL.
func (d *Directory) recall(now time.Duration, c ClientID, id block.ID) ClientID {
	k := fwdKey{c, id}
	i, ok := d.ringIdx.Get(k)
	if !ok {
		return NoClient
	}
	d.ringIdx.Delete(k)
	r := &d.ring[i]
	r.live = false
	d.forwardDone(r.holder)
	if now-r.at > d.cfg.ForwardTTL {
		return NoClient
	}
	return r.holder
}
