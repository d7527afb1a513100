package hints

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/coopfs/coopfs/internal/block"
)

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// ClientConfig configures one client's state machine.
type ClientConfig struct {
	// ID and Boot name this client and its current life.
	ID   ClientID
	Boot BootID
	// CacheBlocks is the size of the block cache (at least 1).
	CacheBlocks int
	// Peers are the other participants that may receive forwarded master
	// copies and requests: the other clients, and the server memory's
	// CoopID when it is part of the cooperative cache. ID itself is skipped.
	// Their order does not matter: ties between peers go to the lowest id.
	Peers []ClientID
	// Discard is the test that sends a young master copy evicted by a
	// forward to the server's discard cache. Use DiscardNever when the
	// server memory is not a discard cache.
	Discard DiscardTest
	// MaxHops bounds how many clients a request visits following hints
	// before it goes to the server (0 means DefaultMaxHops). The seed sets
	// no limit; a bound keeps hint cycles finite.
	MaxHops int
	// ServeOnly marks a participant that never reads for itself (the server
	// memory as part of the cooperative cache): its evictions are dropped,
	// never forwarded.
	ServeOnly bool
	// MaxHints bounds the hints that name other participants (0: no
	// bound, the simulator's choice). Past it, hints are pruned file by
	// file until a tenth of them is gone (seed 002 6.1.1 prunes its hint
	// cache past a threshold too). A client's hints of its own master
	// copies are never pruned.
	MaxHints int
	// Watch, if set, is called whenever a block enters (in) or leaves
	// (!in) the cache, after the change. Simulators use it to index
	// which clients cache a block; it must not call back into the client.
	Watch func(b block.ID, in bool)
	// DenseFiles says file ids are small dense numbers (the simulator
	// numbers them): per-file state is then kept in slices indexed by id
	// however many ids there are. Otherwise slices cover only the ids
	// below a bound that follows the number of files known, and a table
	// the rest.
	DenseFiles bool
}

// DefaultMaxHops is the default bound on the clients a request visits.
const DefaultMaxHops = 8

func (c *ClientConfig) validate() error {
	if c.CacheBlocks < 1 {
		return fmt.Errorf("%w: client %d cache of %d blocks, want at least 1", ErrConfig, c.ID, c.CacheBlocks)
	}
	if c.ID < 0 {
		return fmt.Errorf("%w: client id %d, want >= 0", ErrConfig, c.ID)
	}
	if c.MaxHints < 0 {
		return fmt.Errorf("%w: max hints %d, want >= 0", ErrConfig, c.MaxHints)
	}
	if c.MaxHops < 0 {
		return fmt.Errorf("%w: max hops %d, want >= 0", ErrConfig, c.MaxHops)
	}
	if c.MaxHops == 0 {
		c.MaxHops = DefaultMaxHops
	}
	return nil
}

// peer is what a client believes about another participant.
type peer struct {
	id     ClientID
	boot   BootID // newest boot id known (0: unknown, any accepted)
	oldest Time   // probable age of its oldest block (Free: free memory)
	failed bool   // a message to it timed out (lazy failure detection)
}

// Client is one client's hint-based cooperative caching state machine. It is
// not safe for concurrent use: the live agent wraps it in a lock.
//
// INVARIANT: the cache never holds more than CacheBlocks blocks; the client
// hints itself for a block iff it caches the block's master copy; at most
// MaxHints hints (when set) name other participants.
type Client struct {
	cfg   ClientConfig
	cache *ageCache
	idx   *fileIndex // the cache's entries and the hints, by file and block
	peers []peer
	index idMap[int] // peer id → position in peers
	ages  peerAges   // the peers' oldest-block entries, for target and young
	// others counts the hints naming another participant (MaxHints).
	others int
	// scratch for Invalidate
	dropped []block.ID
}

// NewClient returns a client with an empty cache, no hints, and every peer
// believed to have free memory.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	idx := newFileIndex(cfg.DenseFiles)
	c := &Client{cfg: cfg, cache: newAgeCache(cfg.CacheBlocks, idx, cfg.Watch), idx: idx}
	ids := slices.Clone(cfg.Peers)
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		if id == cfg.ID || id < 0 {
			continue
		}
		c.index.set(id, len(c.peers))
		c.peers = append(c.peers, peer{id: id, oldest: Free})
	}
	c.resetAges()
	return c, nil
}

// ID returns the client's id; Boot its boot id.
func (c *Client) ID() ClientID    { return c.cfg.ID }
func (c *Client) Boot() BootID    { return c.cfg.Boot }
func (c *Client) Len() int        { return c.cache.len() }
func (c *Client) Capacity() int   { return c.cfg.CacheBlocks }
func (c *Client) Oldest() BootAge { return BootAge{Age: c.cache.oldest(), Boot: c.cfg.Boot} }

// Has reports whether b is cached, and whether as the master copy.
func (c *Client) Has(b block.ID) (cached, master bool) {
	if e := c.cache.get(b); e != 0 {
		return true, c.cache.at(e).master
	}
	return false, false
}

// HintFor returns the client's hint for b, if any (self included).
func (c *Client) HintFor(b block.ID) (Hint, bool) {
	return c.idx.hint(b)
}

// OldestOf returns what the client believes the oldest block of p is.
func (c *Client) OldestOf(p ClientID) (Time, bool) {
	i, ok := c.index.get(p)
	if !ok {
		return 0, false
	}
	return c.peers[i].oldest, true
}

// Read is a local read of b at now: a hit touches the block (RouteLocal);
// a miss says where to send the request: the hinted holder of the master
// copy, or the server.
func (c *Client) Read(now Time, b block.ID, v block.Version) Route {
	s, e, stale := c.find(b, v)
	if e != 0 {
		c.cache.touch(e, now)
		return Route{Kind: RouteLocal, Master: c.cache.at(e).master}
	}
	r := c.followIn(s, b, NoClient, stale)
	r.Stale = stale
	return r
}

// lookup finds b for version v (0: any). A copy of an older version is
// dropped (stale = true) and not returned.
func (c *Client) lookup(b block.ID, v block.Version) (h int32, stale bool) {
	_, h, stale = c.find(b, v)
	return h, stale
}

// find is lookup that also returns b's slot (nil if none), valid unless
// stale (dropping the stale copy may have emptied it).
func (c *Client) find(b block.ID, v block.Version) (s *slot, h int32, stale bool) {
	s = c.idx.lookup(b)
	if s == nil || s.ent == 0 {
		return s, 0, false
	}
	h = s.ent
	e := c.cache.at(h)
	if v == 0 || e.ver == 0 || e.ver >= v {
		return s, h, false
	}
	master := e.master
	c.cache.remove(h)
	if master {
		c.deleteHint(b)
	}
	return nil, 0, true
}

// ServeRequest handles a request for b that a peer (from) sent here
// following a hint, after hops clients have been visited (this one
// included). If b is cached it is served (RouteLocal; a remote reference
// counts as a reference and makes the block young). Otherwise the client
// follows its own hint or sends the request to the server.
func (c *Client) ServeRequest(now Time, b block.ID, v block.Version, from ClientID, hops int) Route {
	s, e, stale := c.find(b, v)
	if e != 0 {
		c.cache.touch(e, now)
		return Route{Kind: RouteLocal, Master: c.cache.at(e).master}
	}
	if hops >= c.cfg.MaxHops {
		return Route{Kind: RouteServer, Stale: stale}
	}
	r := c.followIn(s, b, from, stale)
	r.Stale = stale
	return r
}

// followIn is follow with b's slot s as find returned it: its hint, unless
// stale (then b is looked up anew).
func (c *Client) followIn(s *slot, b block.ID, from ClientID, stale bool) Route {
	if stale {
		h, ok := c.HintFor(b)
		return c.route(b, from, h, ok)
	}
	if s == nil {
		return c.route(b, from, Hint{}, false)
	}
	h, ok := s.hint()
	return c.route(b, from, h, ok)
}

// route routes a request for b using the client's hint h (ok: there is
// one); from (if not NoClient) is the requester, never sent back to.
func (c *Client) route(b block.ID, from ClientID, h Hint, ok bool) Route {
	if !ok || h.Holder == c.cfg.ID || h.Holder == from {
		if ok && h.Holder == c.cfg.ID { // self-hint without the block: repair
			c.deleteHint(b)
		}
		return Route{Kind: RouteServer}
	}
	if !c.usable(h) {
		c.deleteHint(b)
		return Route{Kind: RouteServer, StaleHint: true}
	}
	return Route{Kind: RoutePeer, Peer: h.Holder, Boot: h.Boot, HintUsed: true}
}

// usable reports whether a hint names a live holder in its current life.
func (c *Client) usable(h Hint) bool {
	i, ok := c.index.get(h.Holder)
	if !ok {
		return false
	}
	p := &c.peers[i]
	if p.failed {
		return false
	}
	if p.boot != 0 && h.Boot != 0 && h.Boot < p.boot {
		return false // the holder restarted since: its cache is gone
	}
	return true
}

// Fill installs b, which arrived at now for a read miss: master is set when
// it came from the server (the master copy); otherwise from served it
// (servedMaster: from holds the master copy, which the client now hints).
// It returns the replacement the insertion caused.
func (c *Client) Fill(now Time, b block.ID, v block.Version, master bool, from ClientID, fromBoot BootID, servedMaster bool) Eviction {
	if h, _ := c.lookup(b, v); h != 0 { // raced with another fill
		c.cache.touch(h, now)
		e := c.cache.at(h)
		e.ver = max(e.ver, v)
		if master && !e.master {
			e.master = true
			c.setHint(b, Hint{Holder: c.cfg.ID, Boot: c.cfg.Boot, Since: now})
		}
		return Eviction{}
	}
	ev := c.makeRoom(now)
	r := c.cache.at(c.cache.insert(b, v, now, master, false)).rec // b's record: no second lookup
	if ev.Kind == EvictForward {
		ev.FromOldest = c.cache.oldest() // after the insertion, as the target will see it
	}
	switch {
	case master:
		c.setHintIn(r, b, Hint{Holder: c.cfg.ID, Boot: c.cfg.Boot, Since: now})
	case servedMaster && from != NoClient:
		c.Observe(from, fromBoot)
		if h, ok := c.idx.at(r, b.Index).hint(); !ok || h.Holder != from {
			c.setHintIn(r, b, Hint{Holder: from, Boot: fromBoot, Since: now})
		}
	}
	return ev
}

// Write records a write of b at now (write-through: the server has the new
// data). The writer's copy is the master copy of the new data.
func (c *Client) Write(now Time, b block.ID, v block.Version) Eviction {
	if h := c.cache.get(b); h != 0 {
		c.cache.touch(h, now)
		e := c.cache.at(h)
		e.master, e.ver = true, max(e.ver, v)
		c.setHint(b, Hint{Holder: c.cfg.ID, Boot: c.cfg.Boot, Since: now})
		return Eviction{}
	}
	return c.Fill(now, b, v, true, NoClient, 0, false)
}

// makeRoom evicts the oldest block if the cache is full, choosing its fate:
// a copy that is not the master copy is dropped; a master copy is forwarded
// to the peer believed to hold the oldest block (best-guess replacement),
// unless the victim is older than every entry in the oldest-block list (it
// is then probably the globally oldest block and is dropped, as Global LRU
// would).
func (c *Client) makeRoom(now Time) Eviction {
	if !c.cache.full() {
		return Eviction{}
	}
	v, _ := c.cache.popOldest()
	ev := Eviction{Kind: EvictDrop, Block: v.id, Version: v.ver, Master: v.master, Stamp: v.stamp}
	if !v.master {
		return ev
	}
	t := -1
	if !c.cfg.ServeOnly && len(c.peers) > 0 {
		t = c.target()
	}
	if t < 0 || c.peers[t].oldest >= v.stamp {
		c.deleteHintOf(&v)
		return ev
	}
	p := &c.peers[t]
	ev.Kind, ev.To, ev.ToBoot = EvictForward, p.id, p.boot
	c.setHintIn(c.recOf(&v), v.id, Hint{Holder: p.id, Boot: p.boot, Since: now}) // replaces the self hint
	// Until the ack says otherwise, assume the forward replaced the
	// target's oldest block by this (younger) one: a forwarding client that
	// never hears back does not keep picking the same target.
	p.oldest = v.stamp
	c.peerChanged(t)
	return ev
}

// target returns the position of the live peer with the oldest entry in the
// oldest-block list (the lowest id on ties: peers are kept in id order, so
// the choice does not depend on the order the peers became known in), or -1.
func (c *Client) target() int { return c.ages.oldest(c.live) }

// live reports whether peer position i is not marked failed.
func (c *Client) live(i int) bool { return !c.peers[i].failed }

// peerChanged brings the age tree up to date after peer position i's
// oldest entry or failed mark changed.
func (c *Client) peerChanged(i int) {
	p := &c.peers[i]
	c.ages.set(i, p.oldest, !p.failed)
}

// resetAges rebuilds the age tree (the peer list changed).
func (c *Client) resetAges() {
	c.ages.resize(len(c.peers))
	for i := range c.peers {
		c.peerChanged(i)
	}
}

// AcceptForward installs a master copy of b that peer from forwarded at now
// with age stamp; fromOldest is the sender's oldest block (age exchange).
// The block keeps its age (a global block valued by age like a local one).
// If that evicts a block, the victim is dropped, or sent to the discard
// cache if it is a young master copy by the configured test. The ack
// carries this client's oldest block back to the sender.
func (c *Client) AcceptForward(now Time, from ClientID, fromBoot BootID, b block.ID, v block.Version, stamp Time, fromOldest Time) ForwardAck {
	c.observeAge(from, fromBoot, fromOldest)
	var victim Eviction
	h, _ := c.lookup(b, v)
	var e *entry
	if h != 0 {
		e = c.cache.at(h)
	}
	switch {
	case e != nil && v != 0 && e.ver != 0 && e.ver > v:
		// The copy here is newer than the forwarded one: keep it, drop that.
		return ForwardAck{Oldest: c.Oldest(), Victim: Eviction{Kind: EvictDrop, Block: b, Version: v, Master: true, Stamp: stamp}}
	case e != nil: // a copy is here already: it becomes the master copy
		e.master, e.global = true, true
		if stamp > e.stamp {
			c.cache.setAge(h, stamp)
		}
		c.setHint(b, Hint{Holder: c.cfg.ID, Boot: c.cfg.Boot, Since: now})
	case c.cache.full() && stamp < c.cache.oldest():
		// The forwarded block is older than everything here: it is the
		// block to replace (the sender's list was out of date). It is the
		// victim, judged by the discard test like any other.
		victim = Eviction{Kind: EvictDrop, Block: b, Version: v, Master: true, Stamp: stamp}
		if h, ok := c.HintFor(b); ok && h.Holder == c.cfg.ID {
			c.deleteHint(b)
		}
		if c.young(stamp) {
			victim.Kind = EvictDiscard
		}
	default:
		victim = c.evictForForward()
		r := c.cache.at(c.cache.insert(b, v, stamp, true, true)).rec // b's record: no second lookup
		c.setHintIn(r, b, Hint{Holder: c.cfg.ID, Boot: c.cfg.Boot, Since: now})
	}
	return ForwardAck{Oldest: c.Oldest(), Victim: victim}
}

// evictForForward makes room for a forwarded block: the oldest block goes;
// a young master copy goes to the discard cache, anything else is dropped.
// Forwarded blocks are never forwarded again (no cascades).
func (c *Client) evictForForward() Eviction {
	if !c.cache.full() {
		return Eviction{}
	}
	v, _ := c.cache.popOldest()
	ev := Eviction{Kind: EvictDrop, Block: v.id, Version: v.ver, Master: v.master, Stamp: v.stamp}
	if v.master {
		c.deleteHintOf(&v)
		if c.young(v.stamp) {
			ev.Kind = EvictDiscard
		}
	}
	return ev
}

// young applies the discard test to a master copy of age stamp: is it
// younger than any (pessimistic) or all (optimistic) of the blocks in the
// oldest-block list? Free entries are not blocks and do not count: they are
// what the client assumed at boot about peers it has not exchanged ages
// with since, and an idle target (which rarely forwards) keeps many of them;
// counting them would declare every replacement a mistake.
func (c *Client) young(stamp Time) bool { return c.ages.young(stamp, c.cfg.Discard, c.live) }

// ForwardAcked completes the age exchange after a forward to target.
func (c *Client) ForwardAcked(target ClientID, oldest BootAge) {
	c.observeAge(target, oldest.Boot, oldest.Age)
}

// observeAge is Observe(p, boot) followed by taking age as p's oldest
// block (the age exchange), in one look-up of p and one update of the
// ages.
func (c *Client) observeAge(p ClientID, boot BootID, age Time) {
	i, ok := c.index.get(p)
	if !ok {
		return
	}
	c.observed(&c.peers[i], boot)
	c.peers[i].oldest = age
	c.peerChanged(i)
}

// ForwardFailed reports that a forward of b to target timed out: the peer
// is marked failed and the hint for b (which named it) is dropped; the
// block is lost from the client caches (the server still has it).
func (c *Client) ForwardFailed(target ClientID, b block.ID) {
	c.PeerFailed(target)
	if h, ok := c.HintFor(b); ok && h.Holder == target {
		c.deleteHint(b)
	}
}

// Observe records that peer p is alive in life boot (any message from it
// carries its boot id). A newer boot id means p restarted: its cache is
// empty (free memory) and older hints naming it are stale.
func (c *Client) Observe(p ClientID, boot BootID) {
	i, ok := c.index.get(p)
	if !ok || boot == 0 {
		return
	}
	q := &c.peers[i]
	was := *q
	c.observed(q, boot)
	if q.oldest != was.oldest || q.failed != was.failed {
		c.peerChanged(i)
	}
}

// observed updates peer q for a message of life boot (Observe; the caller
// brings the ages up to date).
func (c *Client) observed(q *peer, boot BootID) {
	if boot == 0 {
		return
	}
	if boot > q.boot {
		if q.boot != 0 {
			q.oldest = Free
		}
		q.boot = boot
	}
	if boot >= q.boot {
		q.failed = false
	}
}

// PeerFailed records a timeout on a message to p: hints and oldest-block
// entries naming p are ignored until p is heard from again.
func (c *Client) PeerFailed(p ClientID) {
	if i, ok := c.index.get(p); ok {
		c.peers[i].failed = true
		c.peerChanged(i)
	}
}

// Join adds p, a participant that joined after the client was made (a live
// cluster's membership changes), believed to have free memory. A known
// peer is treated as PeerBooted.
func (c *Client) Join(p ClientID, boot BootID) {
	if p == c.cfg.ID || p < 0 {
		return
	}
	if _, ok := c.index.get(p); ok {
		c.PeerBooted(p, boot)
		return
	}
	// Peers stay in id order (target's tie-break); those after p move up.
	at, _ := slices.BinarySearchFunc(c.peers, p, func(q peer, id ClientID) int { return cmp.Compare(q.id, id) })
	c.peers = slices.Insert(c.peers, at, peer{id: p, boot: boot, oldest: Free})
	for i := at; i < len(c.peers); i++ {
		c.index.set(c.peers[i].id, i)
	}
	c.resetAges()
}

// DropHint forgets the client's hint for b unless it names the client
// itself (a forward that could not be carried out: the block is gone).
func (c *Client) DropHint(b block.ID) {
	if h, ok := c.HintFor(b); ok && h.Holder != c.cfg.ID {
		c.deleteHint(b)
	}
}

// PeerBooted records that p (re)started in life boot (the manager's client
// list after a restart, or a message from it).
func (c *Client) PeerBooted(p ClientID, boot BootID) {
	if i, ok := c.index.get(p); ok {
		q := &c.peers[i]
		if boot > q.boot {
			q.boot, q.oldest = boot, Free
		}
		q.failed = false
		c.peerChanged(i)
	}
}

// ExportHints returns the client's hints for file (its own master copies
// included): what the manager hands the next client that opens the file.
func (c *Client) ExportHints(file uint64, out []BlockHint) []BlockHint {
	c.idx.fileHints(file, func(idx uint64, h Hint) bool {
		out = append(out, BlockHint{Index: idx, Hint: h})
		return true
	})
	return out
}

// ImportHints merges hints handed out on open of file (from the last
// opener); v is the file's current version (0: unknown), and a cached copy
// of an older version is dropped as the hints come in. A hint replaces the client's own one unless that one is newer or
// names the client itself; hints naming this client, unknown peers or stale
// boot ids are skipped. Returns how many hints were taken.
func (c *Client) ImportHints(file uint64, v block.Version, hs []BlockHint) int {
	n := 0
	for _, bh := range hs {
		if bh.Holder == c.cfg.ID || !c.usable(bh.Hint) {
			continue
		}
		b := block.ID{File: file, Index: bh.Index}
		c.lookup(b, v) // a stale copy (and its self-hint) goes first
		if cur, ok := c.HintFor(b); ok && (cur.Holder == c.cfg.ID || cur.Since >= bh.Since) {
			continue
		}
		c.setHint(b, bh.Hint)
		n++
	}
	return n
}

// Invalidate drops every cached block of file and the hints for it (the
// manager revoked the file's token for a writer, or the file was deleted).
// It returns the blocks dropped (valid until the next call).
func (c *Client) Invalidate(file uint64) []block.ID {
	c.dropped = c.cache.dropFile(file, c.dropped[:0])
	c.idx.dropFileHints(file, func(h Hint) {
		if h.Holder != c.cfg.ID {
			c.others--
		}
	})
	return c.dropped
}

func (c *Client) setHint(b block.ID, h Hint) { c.setHintIn(c.idx.ensure(b.File), b, h) }

// setHintIn is setHint with b's file record r (the victim of an eviction
// knows its record: no lookup).
func (c *Client) setHintIn(r int32, b block.ID, h Hint) {
	if old, ok := c.idx.setHintIn(r, b.Index, h); ok && old.Holder != c.cfg.ID {
		c.others--
	}
	if h.Holder != c.cfg.ID {
		c.others++
		if c.cfg.MaxHints > 0 && c.others > c.cfg.MaxHints {
			c.pruneHints(b.File)
		}
	}
}

func (c *Client) deleteHint(b block.ID) {
	if old, ok := c.idx.delHint(b); ok && old.Holder != c.cfg.ID {
		c.others--
	}
}

// deleteHintOf deletes the hint of a master copy just evicted (entry v):
// its self hint keeps its file's record indexed, so v.rec names it.
func (c *Client) deleteHintOf(v *entry) {
	if old, ok := c.idx.delHintIn(c.recOf(v), v.id.Index); ok && old.Holder != c.cfg.ID {
		c.others--
	}
}

// recOf returns the record of the file of v, an entry just evicted: v.rec
// while the self hint kept it indexed (the invariant), else found anew.
func (c *Client) recOf(v *entry) int32 {
	if r := v.rec; c.idx.made(r) && c.idx.rec(r).used > 0 && c.idx.rec(r).id == v.id.File {
		return r
	}
	return c.idx.ensure(v.id.File)
}

// pruneHints drops hints naming other participants, file by file (keep
// last: the file being hinted now), until MaxHints*9/10 remain.
func (c *Client) pruneHints(keep uint64) {
	target := c.cfg.MaxHints * 9 / 10
	var drop []block.ID
	for _, pass := range [2]bool{false, true} {
		for _, f := range c.idx.hintFiles() {
			if f == keep && !pass {
				continue
			}
			drop = drop[:0]
			c.idx.fileHints(f, func(idx uint64, h Hint) bool {
				if h.Holder != c.cfg.ID {
					drop = append(drop, block.ID{File: f, Index: idx})
				}
				return true
			})
			for _, b := range drop {
				c.idx.delHint(b)
				c.others--
			}
			if c.others <= target {
				return
			}
		}
	}
}

// Hints returns how many hints the client holds that name other
// participants.
func (c *Client) Hints() int { return c.others }

// Check verifies the client's invariants (tests and simulator checks).
func (c *Client) Check() error {
	if err := c.cache.check(); err != nil {
		return fmt.Errorf("client %d: %w", c.cfg.ID, err)
	}
	others := 0
	var err error
	c.idx.eachHint(func(b block.ID, h Hint) bool {
		if h.Holder != c.cfg.ID {
			others++
		}
		e := c.cache.get(b)
		master := e != 0 && c.cache.at(e).master
		if self := h.Holder == c.cfg.ID; self != master {
			err = fmt.Errorf("client %d: hint for %v names %d, cached master %v", c.cfg.ID, b, h.Holder, master)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	if others != c.others {
		return fmt.Errorf("client %d: %d hints name others, counted %d", c.cfg.ID, others, c.others)
	}
	if c.cfg.MaxHints > 0 && others > c.cfg.MaxHints {
		return fmt.Errorf("client %d: %d hints name others, bound %d", c.cfg.ID, others, c.cfg.MaxHints)
	}
	c.cache.each(func(e *entry) {
		if id := e.id; e.master && err == nil {
			if h, ok := c.HintFor(id); !ok || h.Holder != c.cfg.ID {
				err = fmt.Errorf("client %d: master copy of %v without a self hint", c.cfg.ID, id)
			}
		}
	})
	return err
}

// Revalidate marks every cached block of file as belonging to version v:
// the client just became the file's writer, its copies are current (it held
// a token, so they were invalidated on every earlier write), and the new
// version must not make them look stale.
func (c *Client) Revalidate(file uint64, v block.Version) {
	var scratch [64]int32
	for _, h := range c.cache.fileHandles(file, scratch[:0]) {
		e := c.cache.at(h)
		e.ver = max(e.ver, v)
	}
}

// Drop removes b from the cache if cached (a write-through made it stale on
// the server memory participant). It reports whether b was cached.
func (c *Client) Drop(b block.ID) bool {
	h := c.cache.get(b)
	if h == 0 {
		return false
	}
	master := c.cache.at(h).master
	c.cache.remove(h)
	if master {
		c.deleteHint(b)
	}
	return true
}

// Cached reports whether b is cached in a version no older than v (0: any),
// and whether as the master copy. Unlike Read it changes nothing.
func (c *Client) Cached(b block.ID, v block.Version) (cached, master bool) {
	h := c.cache.get(b)
	if h == 0 {
		return false, false
	}
	if e := c.cache.at(h); v == 0 || e.ver == 0 || e.ver >= v {
		return true, e.master
	}
	return false, false
}

// VersionedBlock is a cached block and the file version of its data.
type VersionedBlock struct {
	ID      block.ID
	Version block.Version
}

// Masters appends the master copies the client caches (checks and
// diagnostics; O(cache size)).
func (c *Client) Masters(out []VersionedBlock) []VersionedBlock {
	c.cache.each(func(e *entry) {
		if e.master {
			out = append(out, VersionedBlock{ID: e.id, Version: e.ver})
		}
	})
	return out
}

// MasterElsewhere reports whether the client's hint for b names another
// participant: before writing b, a writer with such a hint must make a new
// file version (Server.NewVersion, then Revalidate), since the master copy
// it once forwarded may still be cached there with the current version. A
// writer holds the only token, so a master copy of the current version can
// be elsewhere only if the writer forwarded it, which left this hint.
func (c *Client) MasterElsewhere(b block.ID) bool {
	h, ok := c.HintFor(b)
	return ok && h.Holder != c.cfg.ID
}
