// Package hintsim is the hint-based cooperative caching algorithm of seed
// 002 (chapter 4) for the simulator. It drives the policy state machines of
// internal/coord/hints — one hints.Client per simulated client and one
// hints.Server — and only delivers their messages and counts them: the
// policy logic lives in internal/coord/hints alone.
//
// Options (sim.Params.Options):
//
//	server_memory  discard (default) | disk | coop — the three uses of server
//	               memory of seed 002 section 4.5.1 and table 5.7
//	discard_test   pessimistic (default) | optimistic
//	max_hops       clients a request may visit following hints (default 8)
//
// Accounting (seed 002 chapter 5):
//   - manager messages are consistency only: an open or token request and
//     its reply (2), fetching the last opener's hints (2), each revocation
//     or downgrade (2), a delete (2 + 2 per holder). An open by a client
//     that holds the token and is still the file's last opener stays local
//     (hints.Server.OpenIsLocal): there are no newer hints to fetch. Reads
//     and writes without a token open implicitly (traces without opens);
//   - lookup messages on a local read miss: every request hop plus the
//     reply (2 for a correct hint or a direct server fetch);
//   - replacement messages: one per master copy forwarded, one per block
//     sent to the discard cache (both under "forward"); the age exchange
//     rides on the forward and its acknowledgement;
//   - hint accuracy: HintSaysClient when the first hop is a client (or the
//     server memory participant in coop mode), HintCorrect when a client
//     served the block, HintAbsCorrect when the first hinted client did,
//     HintFalseNeg when no hint named a client but another client caches
//     the block (an oracle: the clients that cache it, from a holder index
//     kept through hints.ClientConfig.Watch);
//   - unnecessary forwards: a master copy forwarded while other copies
//     existed, whose file is deleted or rewritten while more than one copy
//     is still cached.
//
// Virtual time for ages is the access count (strictly increasing), so ages
// order like LRU even when trace times tie.
//
// Files are numbered densely (sim.IDs.NumberFiles, on the reading
// goroutine when sim.Run drives it), and the state machines are handed the
// numbers as file ids: their per-file state is then found by index, not by
// hash. The policy does not depend on what file ids are.
package hintsim

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/hints"
	"github.com/coopfs/coopfs/internal/lru"
	"github.com/coopfs/coopfs/internal/sim"
)

// Name is the algorithm's name in the registry.
const Name = "hints"

// Algorithm is the hint-based algorithm under simulation.
type Algorithm struct {
	p       sim.Params
	mem     hints.MemoryUse
	clients []*hints.Client
	srv     *hints.Server
	coopID  hints.ClientID
	now     hints.Time
	buf     []hints.BlockHint
	// pending holds forwards made while other copies existed, for the
	// unnecessary-forward count: block 0 of file f as bit f of pending0
	// (an object trace forwards only those; a bitmap of its files is
	// small enough to stay in a processor cache), other blocks as file →
	// block indexes.
	pending0 []uint64
	pending  map[uint64]map[uint64]struct{}
	// oneVersion is set while no file has a second version (no write or
	// delete yet): every cached copy is then current, and the oracle's
	// "does another client cache b" is the holder index's bits alone.
	oneVersion bool
	// holders indexes, per block, the clients whose caches hold it (a bit
	// per client, kept through hints.ClientConfig.Watch) so that the
	// oracle scans only them; nil with one client or more than 64 (then every
	// client is asked).
	holders holderIndex
	// alone is set with one client: the oracle has no one else to ask.
	alone bool
	ids   sim.IDs
	// SecondMasters counts server fetches that created a second master copy
	// of a block (the documented race: a missing or wrong hint).
	SecondMasters int64
}

var (
	_ sim.Algorithm = (*Algorithm)(nil)
	_ sim.Checker   = (*Algorithm)(nil)
)

// New builds the algorithm for p (see the package doc for p.Options).
func New(p sim.Params) (*Algorithm, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	mem, err := hints.ParseMemoryUse(p.Option("server_memory", "discard"))
	if err != nil {
		return nil, err
	}
	test := hints.DiscardPessimistic
	switch v := p.Option("discard_test", "pessimistic"); v {
	case "pessimistic":
	case "optimistic":
		test = hints.DiscardOptimistic
	default:
		return nil, fmt.Errorf("%w: hints discard_test %q, want pessimistic or optimistic", sim.ErrConfig, v)
	}
	if mem != hints.MemoryDiscard {
		test = hints.DiscardNever
	}
	hops, err := strconv.Atoi(p.Option("max_hops", strconv.Itoa(hints.DefaultMaxHops)))
	if err != nil || hops < 1 {
		return nil, fmt.Errorf("%w: hints max_hops %q, want a positive integer", sim.ErrConfig, p.Option("max_hops", ""))
	}
	if p.ClientCacheBlocks < 1 {
		return nil, fmt.Errorf("%w: hints needs client caches of at least 1 block", sim.ErrConfig)
	}
	a := &Algorithm{p: p, mem: mem, coopID: hints.ClientID(p.Clients), pending: make(map[uint64]map[uint64]struct{}),
		oneVersion: true}
	ids := make([]hints.ClientID, p.Clients)
	for i := range ids {
		ids[i] = hints.ClientID(i)
	}
	peers := ids
	if mem == hints.MemoryCoop && p.ServerCacheBlocks > 0 {
		peers = append(append([]hints.ClientID(nil), ids...), a.coopID)
	}
	a.holders.on = p.Clients > 1 && p.Clients <= 64 // one client: the oracle asks it directly
	a.alone = p.Clients == 1
	a.ids.NumberFiles()
	for i := range ids {
		c, err := hints.NewClient(hints.ClientConfig{ID: ids[i], Boot: 1, CacheBlocks: p.ClientCacheBlocks,
			Peers: peers, Discard: test, MaxHops: hops, Watch: a.watcher(i), DenseFiles: true})
		if err != nil {
			return nil, err
		}
		a.clients = append(a.clients, c)
	}
	a.srv, err = hints.NewServer(hints.ServerConfig{MemoryBlocks: p.ServerCacheBlocks, Memory: mem,
		CoopID: a.coopID, Clients: ids, DenseFiles: true})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Client returns simulated client i's state machine (tests).
func (a *Algorithm) Client(i int) *hints.Client { return a.clients[i] }

// Server returns the simulated server's state machine (tests).
func (a *Algorithm) Server() *hints.Server { return a.srv }

// IDs implements sim.Numberer: Run numbers the files (and blocks).
func (a *Algorithm) IDs() *sim.IDs { return &a.ids }

// FileNo returns file's number: the file id the state machines know it by.
func (a *Algorithm) FileNo(file uint64) uint64 { return uint64(a.ids.FileID(file)) }

// Block returns the block as the state machines name it (tests).
func (a *Algorithm) Block(file, index uint64) block.ID {
	return block.ID{File: a.FileNo(file), Index: index}
}

// Access simulates one access.
func (a *Algorithm) Access(acc sim.Access, c *sim.Counters) sim.Outcome {
	a.now++
	cid := hints.ClientID(acc.Client)
	f := uint64(acc.FileID)
	if f == 0 { // not numbered by Run
		f = a.FileNo(acc.File)
	}
	switch acc.Op {
	case sim.OpOpen:
		if !a.srv.OpenIsLocal(cid, f, false) {
			a.open(cid, f, false, c)
		}
	case sim.OpClose:
		// Tokens stay cached at the client until revoked (Sprite).
	case sim.OpDelete:
		a.delete(f, c)
	case sim.OpWrite:
		a.write(cid, block.ID{File: f, Index: acc.Block}, c)
	case sim.OpRead:
		return a.read(cid, block.ID{File: f, Index: acc.Block}, c)
	}
	return sim.Outcome{}
}

// open gets client cid a token for file (implicitly before a read or write
// without one) and hands it the last opener's hints.
func (a *Algorithm) open(cid hints.ClientID, file uint64, write bool, c *sim.Counters) {
	v0 := a.srv.Version(file)
	r := a.srv.Open(a.now, cid, 1, file, write)
	a.managerMsgs(int(cid), 1, c)
	if len(r.Revoke) > 0 || r.NewVersion {
		a.settlePending(file, v0, c) // before any copy goes
	}
	if r.NewVersion { // the new writer's copies are current
		a.clients[cid].Revalidate(file, r.Version)
	}
	if r.HintsFrom != hints.NoClient { // before a revocation clears them
		a.buf = a.clients[r.HintsFrom].ExportHints(file, a.buf[:0])
		a.clients[cid].ImportHints(file, r.Version, a.buf)
		a.managerMsgs(int(r.HintsFrom), 1, c)
	}
	for _, h := range r.Revoke {
		c.Invalidations += int64(len(a.clients[h].Invalidate(file)))
		a.managerMsgs(int(h), 1, c)
	}
	if r.Downgraded != hints.NoClient {
		a.managerMsgs(int(r.Downgraded), 1, c)
	}
}

// managerMsgs records n request/reply pairs between node and the manager.
func (a *Algorithm) managerMsgs(node, n int, c *sim.Counters) {
	c.Manager(sim.CauseConsistency, 2*n)
	for range n {
		c.Msg(node, sim.NodeManager, false)
		c.Msg(sim.NodeManager, node, false)
	}
}

func (a *Algorithm) delete(file uint64, c *sim.Counters) {
	a.oneVersion = false
	a.settlePending(file, a.srv.Version(file), c)
	holders := a.srv.Delete(file)
	c.Manager(sim.CauseConsistency, 2)
	for _, h := range holders {
		c.Invalidations += int64(len(a.clients[h].Invalidate(file)))
		a.managerMsgs(int(h), 1, c)
	}
}

func (a *Algorithm) write(cid hints.ClientID, b block.ID, c *sim.Counters) {
	a.oneVersion = false
	if !a.srv.Holds(cid, b.File, true) {
		a.open(cid, b.File, true, c)
	}
	cl := a.clients[cid]
	if cl.MasterElsewhere(b) {
		a.settlePending(b.File, a.srv.Version(b.File), c)
		cl.Revalidate(b.File, a.srv.NewVersion(b.File))
	}
	ev := cl.Write(a.now, b, a.srv.Version(b.File))
	a.srv.WriteThrough(a.now, b)
	c.Msg(int(cid), sim.NodeServer, true)
	a.evicted(cl, ev, c)
}

func (a *Algorithm) read(cid hints.ClientID, b block.ID, c *sim.Counters) sim.Outcome {
	v, held := a.srv.Token(cid, b.File, false)
	if !held {
		a.open(cid, b.File, false, c)
		v = a.srv.Version(b.File)
	}
	cl := a.clients[cid]
	r := cl.Read(a.now, b, v)
	if r.Stale {
		c.Invalidations++
	}
	if r.Kind == hints.RouteLocal {
		return sim.Outcome{Layer: sim.LayerLocal}
	}
	return a.miss(cid, cl, b, v, r, c)
}

// miss carries out client cid's local read miss of b (version v), which cl
// routed as r: along the hints, then to the server. (A function of its own:
// a hit, seven reads in ten, does not set up its frame.)
func (a *Algorithm) miss(cid hints.ClientID, cl *hints.Client, b block.ID, v block.Version, r hints.Route, c *sim.Counters) sim.Outcome {
	hinted := r.Kind == hints.RoutePeer
	if hinted {
		c.HintSaysClient++
	} else if !a.alone && a.otherHas(b, v, cid) {
		c.HintFalseNeg++
	}
	msgs, from, first := 0, cid, true
	for r.Kind == hints.RoutePeer && r.Peer != a.coopID {
		msgs++
		c.Msg(int(from), int(r.Peer), false)
		holder := r.Peer
		sr := a.clients[holder].ServeRequest(a.now, b, v, cid, msgs)
		if sr.Stale {
			c.Invalidations++
		}
		if sr.Kind == hints.RouteLocal {
			msgs++
			c.Msg(int(holder), int(cid), true)
			c.Lookup(msgs)
			c.HintCorrect++
			if first {
				c.HintAbsCorrect++
			}
			a.evicted(cl, cl.Fill(a.now, b, v, false, holder, 1, sr.Master), c)
			return sim.Outcome{Layer: sim.LayerRemote, Hops: msgs - 2}
		}
		from, r, first = holder, sr, false
	}
	// To the server (its memory, then its disk).
	msgs += 2
	c.Msg(int(from), sim.NodeServer, false)
	c.Msg(sim.NodeServer, int(cid), true)
	c.Lookup(msgs)
	c.ServerMemLookups++
	f := a.srv.Fetch(a.now, b)
	out := sim.Outcome{Layer: sim.LayerDisk, Hops: msgs - 2}
	if f.Memory {
		out.Layer, out.Discard = sim.LayerServer, f.Discard
		if hinted && r.Peer == a.coopID && first {
			c.HintCorrect++
			c.HintAbsCorrect++
		}
	}
	if f.Master && !a.alone && a.otherMaster(b, v, cid) {
		a.SecondMasters++
	}
	var ev hints.Eviction
	if f.Master {
		ev = cl.Fill(a.now, b, v, true, hints.NoClient, 0, false)
	} else { // the cooperative server memory keeps the master copy
		ev = cl.Fill(a.now, b, v, false, a.coopID, 1, true)
	}
	a.evicted(cl, ev, c)
	return out
}

// evicted carries out a replacement decision of client from: a forward of
// a master copy to its best-guess target (with the age exchange), and the
// target's own victim to the discard cache if it is a young master copy.
func (a *Algorithm) evicted(from *hints.Client, ev hints.Eviction, c *sim.Counters) {
	if ev.Kind != hints.EvictForward {
		return
	}
	c.Forwards++
	c.Replacement(sim.ReplForward, 1)
	c.Msg(int(from.ID()), a.node(ev.To), true)
	if a.otherHas(ev.Block, ev.Version, from.ID()) {
		a.addPending(ev.Block)
	}
	target := a.srv.Coop()
	if ev.To != a.coopID {
		target = a.clients[ev.To]
	}
	ack := target.AcceptForward(a.now, from.ID(), from.Boot(), ev.Block, ev.Version, ev.Stamp, ev.FromOldest)
	c.Msg(a.node(ev.To), int(from.ID()), false)
	from.ForwardAcked(ev.To, ack.Oldest)
	if ack.Victim.Kind == hints.EvictDiscard {
		c.Replacement(sim.ReplForward, 1)
		c.Msg(a.node(ev.To), sim.NodeServer, true)
		if a.srv.AcceptDiscard(ack.Victim.Block, ack.Victim.Version, ack.Victim.Stamp) {
			c.DiscardInserts++
		}
	}
}

func (a *Algorithm) node(id hints.ClientID) int {
	if id == a.coopID {
		return sim.NodeServer
	}
	return int(id)
}

// watcher returns client i's hints.ClientConfig.Watch: it keeps the holder
// index (nil without one).
func (a *Algorithm) watcher(i int) func(block.ID, bool) {
	if !a.holders.on {
		return nil
	}
	bit := uint64(1) << uint(i)
	return func(b block.ID, in bool) {
		m := a.holders.first0(b) // ref's common case, inlined
		if m == nil {
			m = a.holders.ref(b)
		}
		if in {
			*m |= bit
		} else {
			*m &^= bit
		}
	}
}

// candidates returns the clients other than except that may cache b: a bit
// per client (all of them without a holder index).
func (a *Algorithm) candidates(b block.ID, except hints.ClientID) uint64 {
	if !a.holders.on {
		return ^uint64(0)
	}
	return a.holders.get(b) &^ (uint64(1) << uint(except))
}

// cachedBy reports, for each client other than except that caches b
// (version v or newer), whether it holds the master copy, until f returns
// false.
func (a *Algorithm) cachedBy(b block.ID, v block.Version, except hints.ClientID, f func(master bool) bool) {
	if len(a.clients) == 1 && except == 0 { // no other client
		return
	}
	if !a.holders.on {
		for i, cl := range a.clients {
			if hints.ClientID(i) == except {
				continue
			}
			if ok, m := cl.Cached(b, v); ok && !f(m) {
				return
			}
		}
		return
	}
	for m := a.candidates(b, except); m != 0; m &= m - 1 {
		if ok, mm := a.clients[bits.TrailingZeros64(m)].Cached(b, v); ok && !f(mm) {
			return
		}
	}
}

// otherHas is the oracle: does a client other than except cache b (version
// v or newer)?
func (a *Algorithm) otherHas(b block.ID, v block.Version, except hints.ClientID) bool {
	if a.oneVersion && a.holders.on { // every copy is current: the bits say it
		return a.candidates(b, except) != 0
	}
	found := false
	a.cachedBy(b, v, except, func(bool) bool { found = true; return false })
	return found
}

func (a *Algorithm) otherMaster(b block.ID, v block.Version, except hints.ClientID) bool {
	found := false
	a.cachedBy(b, v, except, func(m bool) bool { found = m; return !m })
	return found
}

// settlePending counts, before file's copies of version v are invalidated, the forwards
// of its blocks that were unnecessary: more than one copy is still cached.
func (a *Algorithm) settlePending(file uint64, v block.Version, c *sim.Counters) {
	unnecessary := func(idx uint64) {
		n := 0
		a.cachedBy(block.ID{File: file, Index: idx}, v, -1, func(bool) bool { n++; return true })
		if n > 1 {
			c.UnnecessaryFwds++
		}
	}
	if w, bit := file/64, uint64(1)<<(file%64); w < uint64(len(a.pending0)) && a.pending0[w]&bit != 0 {
		a.pending0[w] &^= bit
		unnecessary(0)
	}
	m := a.pending[file]
	if m == nil {
		return
	}
	for idx := range m {
		unnecessary(idx)
	}
	delete(a.pending, file)
}

// addPending records a forward of b made while other copies existed.
func (a *Algorithm) addPending(b block.ID) {
	if b.Index == 0 {
		w := b.File / 64
		if w >= uint64(len(a.pending0)) {
			a.pending0 = lru.Extend(a.pending0, int(w)+1, 1<<62)
		}
		a.pending0[w] |= 1 << (b.File % 64)
		return
	}
	m := a.pending[b.File]
	if m == nil {
		m = make(map[uint64]struct{})
		a.pending[b.File] = m
	}
	m[b.Index] = struct{}{}
}

// holderIndex is the oracle's index: per block, a bit per client whose
// cache holds it, kept through the clients' Watch hooks. Files are
// numbered densely: block 0 of every file (the only block of an object
// trace's files) is in one slice indexed by file, a word per file; the
// other blocks in a slice per file; blocks past farIndex (a txt or LIRS
// trace is one file whose block numbers are object ids) in a table.
type holderIndex struct {
	on    bool     // kept (2 to 64 clients)
	first []uint64 // block 0 of file f: first[f]
	files [][]uint64
	far   sim.Table[sim.Key, uint64]
}

// farIndex is the first block index kept in holderIndex.far.
const farIndex = 1 << 16

func (x *holderIndex) get(b block.ID) uint64 {
	if b.Index == 0 {
		if b.File < uint64(len(x.first)) {
			return x.first[b.File]
		}
		return 0
	}
	if b.Index >= farIndex {
		m, _ := x.far.Get(sim.Key{File: b.File, Block: b.Index})
		return m
	}
	if b.File < uint64(len(x.files)) {
		if f := x.files[b.File]; b.Index < uint64(len(f)) {
			return f[b.Index]
		}
	}
	return 0
}

// first0 returns b's bits if b is a block 0 the index has a word for
// (ref's common case, small enough to inline), else nil.
func (x *holderIndex) first0(b block.ID) *uint64 {
	if b.Index == 0 && b.File < uint64(len(x.first)) {
		return &x.first[b.File]
	}
	return nil
}

// ref returns b's bits, made if need be.
func (x *holderIndex) ref(b block.ID) *uint64 {
	if b.Index == 0 {
		if b.File >= uint64(len(x.first)) {
			x.first = lru.Extend(x.first, int(b.File)+1, 1<<62)
		}
		return &x.first[b.File]
	}
	if b.Index >= farIndex {
		k := sim.Key{File: b.File, Block: b.Index}
		if m := x.far.Ref(k); m != nil {
			return m
		}
		x.far.Put(k, 0)
		return x.far.Ref(k)
	}
	for b.File >= uint64(len(x.files)) {
		x.files = append(x.files, nil)
	}
	f := x.files[b.File]
	if b.Index >= uint64(len(f)) {
		f = append(f, make([]uint64, int(b.Index)+1-len(f))...)
		x.files[b.File] = f
	}
	return &f[b.Index]
}

// each calls f for every block with bits.
func (x *holderIndex) each(f func(b block.ID, m uint64)) {
	for file, m := range x.first {
		if m != 0 {
			f(block.ID{File: uint64(file)}, m)
		}
	}
	for file, bs := range x.files {
		for idx, m := range bs {
			if m != 0 && idx > 0 {
				f(block.ID{File: uint64(file), Index: uint64(idx)}, m)
			}
		}
	}
	x.far.Range(func(k sim.Key, m uint64) bool {
		if m != 0 {
			f(block.ID{File: k.File, Index: k.Block}, m)
		}
		return true
	})
}
