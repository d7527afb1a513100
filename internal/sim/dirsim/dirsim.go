package dirsim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/lru"
	"github.com/coopfs/coopfs/internal/sim"
)

// Options keys (Params.Options) this algorithm reads.
const (
	OptPolicy     = "policy"           // "directory" (default) or "none": every miss to the server (NFS)
	OptNotify     = "notify"           // "on" (default) or "off": discard notifications
	OptQueueLen   = "queue_len"        // discard queue length (default 400)
	OptEntries    = "entries"          // directory entries (default 1048576)
	OptServerLink = "server_link_mbps" // server link bandwidth in Mbit/s under contention=on (default 100; 0: no queueing there)
	OptClientLink = "client_link_mbps" // each client's link bandwidth in Mbit/s under contention=on (default 100; 0: none)
	// OptContention: "off" (default) or "on": reads queue for the server's
	// link, the holder's link and the server's disk. Queueing means
	// something only when the workload's times are real arrival times —
	// a closed loop (ClockOrder, the nfscc study) or a timed trace; a
	// generated open-loop trace issues its accesses at nominal times (one a
	// millisecond over all clients), so a single disk of 15.85 ms queues
	// without bound and the average grows with the trace. Off, a read costs
	// its layer's latency and its hops, the classic algorithms' cost model,
	// so that `sim run` compares like with like.
	OptContention = "contention"
	OptForward    = "forward_choice" // "round-robin" (default, the seed's) or "balanced" (coopfs serve --forward-choice)
	// OptKeepOwn: "off" (default) or "on": a writer's copies of the version
	// its write replaced stay valid (the live agent's WriteBase, NFS's weak
	// cache consistency); off, only the block written does.
	OptKeepOwn = "keep_own_writes"
)

// Sim is the directory (NFS-cc) algorithm in the simulator: client LRU
// caches, the server's LRU memory and disk, and the very state machines of
// internal/coord/directory (one Directory on the server, one Holder per
// client) deciding where every miss is served from.
//
// Time: each read is issued at its access's Time and costs the layer's
// latency (Params), MessageMs per extra hop, and the time it queues for a
// link (the server's link for blocks the server sends, the holder's link
// for blocks a client sends, the server's disk), reported as ExtraMs.
// Blocks reserved by a client whose data has not arrived by the time a
// forward reaches it are pending: the holder waits. Queues are FIFO in the
// order accesses are simulated, which is time order when the workload's
// times are ordered (ClockOrder makes a closed-loop workload of that kind).
//
// Sim clients never fail: a ping is answered at once.
type Sim struct {
	p       sim.Params
	none    bool
	keepOwn bool // OptKeepOwn
	dir     *directory.Directory
	holders []*directory.Holder
	caches  []*cache
	server  *cache
	ids     sim.IDs                           // numbers blocks: the caches and the directory index by number
	vers    lru.Table[fileKey, block.Version] // the current version of written/deleted files (1 otherwise)

	msg, local, remote, srvMs, diskMs time.Duration
	xferSrv, xferCli                  time.Duration
	diskQueue                         bool          // OptContention: reads queue for the disk
	srvLink, disk                     time.Duration // when the server's link and disk are free
	cliLink                           []time.Duration
	done                              []time.Duration // when each client's latest read completed
	servedRemote                      []uint64        // blocks each client received from peers
	tch                               toucher         // Touch's state
	depth                             depths          // the forward depth of cached copies
}

var _ sim.Algorithm = (*Sim)(nil)
var _ sim.Checker = (*Sim)(nil)
var _ sim.Numberer = (*Sim)(nil)

// New returns the algorithm for p. Options: policy, notify, queue_len,
// entries, server_link_mbps, client_link_mbps, forward_choice (see the Opt
// constants).
func New(p sim.Params) (*Sim, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s := &Sim{p: p}
	switch pol := p.Option(OptPolicy, "directory"); pol {
	case "directory":
	case "none":
		s.none = true
	default:
		return nil, fmt.Errorf("%w: %s = %q, want directory or none", sim.ErrConfig, OptPolicy, pol)
	}
	switch k := p.Option(OptKeepOwn, "off"); k {
	case "on":
		s.keepOwn = true
	case "off":
	default:
		return nil, fmt.Errorf("%w: %s = %q, want on or off", sim.ErrConfig, OptKeepOwn, k)
	}
	var hc directory.HolderConfig
	switch n := p.Option(OptNotify, "on"); n {
	case "on":
	case "off":
		hc.NoNotify = true
	default:
		return nil, fmt.Errorf("%w: %s = %q, want on or off", sim.ErrConfig, OptNotify, n)
	}
	var err error
	if hc.QueueLen, err = intOption(p, OptQueueLen, directory.DefaultQueueLen); err != nil {
		return nil, err
	}
	entries, err := intOption(p, OptEntries, directory.DefaultEntries)
	if err != nil {
		return nil, err
	}
	srvMbps, err := floatOption(p, OptServerLink, 100)
	if err != nil {
		return nil, err
	}
	cliMbps, err := floatOption(p, OptClientLink, 100)
	if err != nil {
		return nil, err
	}
	switch ct := p.Option(OptContention, "off"); ct {
	case "on":
		s.diskQueue = true
	case "off":
		srvMbps, cliMbps = 0, 0
	default:
		return nil, fmt.Errorf("%w: %s = %q, want on or off", sim.ErrConfig, OptContention, ct)
	}
	// the simulator always names the holder in a retry: no forward memory
	dc := directory.Config{Entries: entries, Dense: true, ForwardMemory: directory.NoForwardMemory}
	switch fc := p.Option(OptForward, "round-robin"); fc {
	case "round-robin":
	case "balanced":
		dc.Balanced = true
	default:
		return nil, fmt.Errorf("%w: %s = %q, want round-robin or balanced", sim.ErrConfig, OptForward, fc)
	}
	if s.dir, err = directory.New(dc); err != nil {
		return nil, fmt.Errorf("%w: %w", sim.ErrConfig, err)
	}
	ix := &blockIndex{dir: s.dir}
	kind, rs := kindLone, (*rows)(nil)
	if p.Clients > 1 {
		kind, rs = kindTable, newRows(p.Clients, p.ClientCacheBlocks)
		if rs != nil {
			kind = kindRows
		}
	}
	s.holders = make([]*directory.Holder, p.Clients)
	s.caches = make([]*cache, p.Clients)
	for i := range p.Clients {
		if s.holders[i], err = directory.NewHolder(hc); err != nil {
			return nil, fmt.Errorf("%w: %w", sim.ErrConfig, err)
		}
		s.caches[i] = newLRU(p.ClientCacheBlocks, kind, ix, rs, i)
	}
	s.server = newLRU(p.ServerCacheBlocks, kindServer, ix, nil, 0)
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	s.msg, s.local, s.remote, s.srvMs, s.diskMs = ms(p.MessageMs), ms(p.LocalMs), ms(p.RemoteMs), ms(p.ServerMs), ms(p.DiskMs)
	s.xferSrv, s.xferCli = xfer(p.BlockSize, srvMbps), xfer(p.BlockSize, cliMbps)
	s.cliLink = make([]time.Duration, p.Clients)
	s.done = make([]time.Duration, p.Clients)
	s.servedRemote = make([]uint64, p.Clients)
	return s, nil
}

func xfer(bs int64, mbps float64) time.Duration {
	if mbps <= 0 {
		return 0
	}
	return time.Duration(float64(bs*8) / (mbps * 1e6) * float64(time.Second))
}

func intOption(p sim.Params, key string, def int) (int, error) {
	v := p.Option(key, "")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: %s = %q, want a positive integer", sim.ErrConfig, key, v)
	}
	return n, nil
}

func floatOption(p sim.Params, key string, def float64) (float64, error) {
	v := p.Option(key, "")
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%w: %s = %q, want a number >= 0", sim.ErrConfig, key, v)
	}
	return f, nil
}

// IDs implements sim.Numberer: the blocks' numbers, which the caches and
// the directory (directory.Config.Dense) index by. The directory names
// blocks {File: the file, Index: the block's number}.
func (s *Sim) IDs() *sim.IDs { return &s.ids }

// Directory returns the server's directory (for its counters).
func (s *Sim) Directory() *directory.Directory { return s.dir }

// Holder returns client i's holder state machine (for its counters).
func (s *Sim) Holder(i int) *directory.Holder { return s.holders[i] }

// Clock returns when client i's latest read completed: the issue time of
// its next read in a closed loop.
func (s *Sim) Clock(i int) time.Duration { return s.done[i] }

// PreloadServer puts blocks 0..n-1 of file in the server's memory (as far
// as it holds), as the seed did before its benchmarks.
func (s *Sim) PreloadServer(file uint64, n int) {
	for i := range n {
		id := s.ids.ID(sim.Key{File: file, Block: uint64(i)})
		s.serverInsert(ref{id, file}, s.version(file), true)
	}
}

// ref names a block by its number, with its file.
type ref struct {
	id   uint32
	file uint64
}

// dirID is how the directory names the block (directory.Config.Dense).
func (r ref) dirID() block.ID { return block.ID{File: r.file, Index: uint64(r.id)} }

// refOf numbers a's block (Run has, unless a came another way).
func (s *Sim) refOf(a *sim.Access) ref {
	if a.ID == 0 {
		return s.number(a)
	}
	return ref{a.ID, a.File}
}

// number is refOf for an access Run did not number; not inlined, so that
// refOf is.
//
//go:noinline
func (s *Sim) number(a *sim.Access) ref {
	r := ref{0, a.File}
	if a.Op == sim.OpRead || a.Op == sim.OpWrite {
		r.id = s.ids.ID(a.Key())
	}
	return r
}

// fileKey is a file id hashable by lru.Table.
type fileKey uint64

func (k fileKey) Hash() uint64 { return lru.Mix(uint64(k)) }

// version returns file's current version (1 until it changes), small
// enough to be inlined: nothing is looked up while no file has changed.
func (s *Sim) version(file uint64) block.Version {
	if s.vers.Len() == 0 {
		return 1
	}
	return s.changedVersion(file)
}

// changedVersion looks file's version up; not inlined, so that version is.
//
//go:noinline
func (s *Sim) changedVersion(file uint64) block.Version {
	if v, ok := s.vers.Get(fileKey(file)); ok {
		return v
	}
	return 1
}

// current reports whether handle h of cache l holds version v (the file's
// current one): always, while no file has changed (every copy is then of
// version 1), without loading the node.
func (s *Sim) current(l *cache, h int32, v block.Version) bool {
	return s.vers.Len() == 0 || l.nodes[h].ver == v
}

// Access implements sim.Algorithm. A read that hits its client's cache
// (most of them with one client) is handled here, without another call;
// a miss goes on to miss.
func (s *Sim) Access(a sim.Access, c *sim.Counters) sim.Outcome {
	switch a.Op {
	case sim.OpRead:
		id, cl := s.refOf(&a), a.Client
		v := s.version(id.file)
		cache := s.caches[cl]
		var h int32 // cache.find, spelled out: find is too big to be inlined, inSlot is
		if cache.kind == kindLone {
			h = cache.inSlot(id.id)
		} else {
			h = cache.findShared(id.id)
		}
		if h != 0 && s.current(cache, h, v) {
			cache.touch(h)
			s.done[cl] = a.Time + s.local
			return sim.Outcome{Layer: sim.LayerLocal}
		}
		return s.miss(cl, a.Time, id, v, h, c)
	case sim.OpWrite:
		s.write(a, s.refOf(&a), c)
	case sim.OpDelete:
		s.changed(a.File, c)
	}
	return sim.Outcome{}
}

// changed makes a new version of file: the server's directory drops its
// entries; cached copies of the old version are found stale when next used.
func (s *Sim) changed(file uint64, c *sim.Counters) block.Version {
	v := s.version(file) + 1
	s.vers.Put(fileKey(file), v)
	if !s.none {
		s.dir.FileChanged(file)
		c.Manager(sim.CauseConsistency, 1)
	}
	return v
}

// write is write-through: a new version of the file at the server (the
// block in its memory), the writer keeping the new copy (with OptKeepOwn,
// its copies of the version before too: nobody else changed them).
func (s *Sim) write(a sim.Access, id ref, c *sim.Counters) {
	prev := s.version(id.file)
	v := s.changed(id.file, c)
	if s.keepOwn {
		s.caches[a.Client].relabel(id.file, prev, v)
	}
	c.Msg(a.Client, sim.NodeServer, true)
	s.serverInsert(id, v, true)
	s.clientInsert(a.Client, id, v, a.Time, true, c)
	s.depth.set(a.Client, id.id, 0)
}

// miss is a read of id (version v) that client cl's cache misses at t: h
// is its handle of a stale copy (0: none).
func (s *Sim) miss(cl int, t time.Duration, id ref, v block.Version, h int32, c *sim.Counters) sim.Outcome {
	if h != 0 {
		s.caches[cl].remove(h) // stale: a newer version exists
		c.Invalidations++
	}
	var out sim.Outcome
	var wait time.Duration
	if s.none {
		c.Lookup(2)
		c.Msg(cl, sim.NodeServer, false)
		out.Layer, wait = s.serve(t, id, v, cl, c)
	} else {
		out, wait = s.cooperative(t, cl, id, v, c)
	}
	out.ExtraMs = float64(wait) / float64(time.Millisecond)
	total := wait + time.Duration(out.Hops)*s.msg
	switch out.Layer {
	case sim.LayerRemote:
		total += s.remote
	case sim.LayerServer:
		total += s.srvMs
	case sim.LayerDisk:
		total += s.diskMs
	}
	s.done[cl] = t + total
	s.clientInsert(cl, id, v, t+total, false, c)
	s.depth.set(cl, id.id, s.depth.last)
	s.depth.last = 0
	return out
}

// cooperative runs one miss through the directory: serve, or forward to a
// holder who sends, waits for pending data, or answers negatively (then the
// requester retries and the server serves).
func (s *Sim) cooperative(t time.Duration, cl int, id ref, v block.Version, c *sim.Counters) (sim.Outcome, time.Duration) {
	me := directory.ClientID(cl + 1)
	c.Msg(cl, sim.NodeServer, false)
	act := s.dir.Request(t, me, id.dirID(), v)
	c.Manager(sim.CauseLookup, 2) // the request in, the reply or forward out
	if act.Kind == directory.ActServe {
		c.Lookup(2)
		layer, wait := s.serve(t, id, v, cl, c)
		return sim.Outcome{Layer: layer}, wait
	}
	c.ForwardedReqs++
	h := int(act.To) - 1
	c.Msg(sim.NodeServer, h, false)
	arrive := t + 2*s.msg
	local := directory.Local{}
	n := s.caches[h].get(id.id)
	if n != nil {
		local = directory.Local{State: directory.Present, Version: n.ver}
		if n.ready > arrive {
			local.State = directory.Pending
		}
	}
	r := s.holders[h].Forward(act.Block, act.Version, local)
	if r.Notify != nil {
		s.notify(h, r.Notify, c)
	}
	switch r.Answer {
	case directory.Send, directory.Wait:
		start := arrive
		d := 0
		if r.Answer == directory.Wait {
			start = max(start, n.ready)
			d = s.depth.of(h, id.id) + 1
		}
		s.depth.served(d)
		begin := start
		if s.xferCli > 0 { // a link without queueing keeps no clock: reads arrive out of order
			begin = max(start, s.cliLink[h])
			s.cliLink[h] = begin + s.xferCli
		}
		c.Lookup(3)
		c.Msg(h, cl, true)
		s.servedRemote[cl]++
		return sim.Outcome{Layer: sim.LayerRemote, Hops: 1}, begin - arrive
	}
	// negative reply, then the retry to the server
	c.ForwardMisses++
	c.Msg(h, cl, false)
	c.Msg(cl, sim.NodeServer, false)
	c.Lookup(5)
	c.Manager(sim.CauseLookup, 2)
	if r.DropFile {
		// the holder's copies of the file are stale; in the sim they are
		// found stale lazily (version check on use), so nothing to do.
		c.Invalidations++
	}
	rt := s.dir.Retry(t, me, act.Block, v, act.To)
	if rt.Ping != 0 {
		s.dir.PingOK(rt.Ping) // simulated clients never fail
		c.Manager(sim.CauseLookup, 2)
	}
	layer, wait := s.serve(t+2*s.msg, id, v, cl, c)
	return sim.Outcome{Layer: layer, Hops: 3}, wait
}

// serve has the server send id to client cl, from memory or from disk,
// queueing for the disk and the server's link. The request reaches the
// server at t + MessageMs.
func (s *Sim) serve(t time.Duration, id ref, v block.Version, cl int, c *sim.Counters) (sim.Layer, time.Duration) {
	arrive := t + s.msg
	at, layer := arrive, sim.LayerServer
	var wait time.Duration
	c.ServerMemLookups++
	h := s.server.inSlot(id.id) // kindServer
	if h != 0 && s.current(s.server, h, v) {
		s.server.touch(h)
	} else {
		layer = sim.LayerDisk
		if s.diskQueue {
			begin := max(arrive, s.disk)
			wait += begin - arrive
			s.disk = begin + max(0, s.diskMs-s.srvMs)
			at = s.disk
		}
		s.serverInsert(id, v, h != 0)
	}
	if s.xferSrv > 0 {
		begin := max(at, s.srvLink)
		wait += begin - at
		s.srvLink = begin + s.xferSrv
	}
	c.Msg(sim.NodeServer, cl, true)
	return layer, wait
}

// serverInsert puts id (version v) in the server's memory, replacing a
// copy it may hold (held; otherwise it holds none).
func (s *Sim) serverInsert(id ref, v block.Version, held bool) {
	if s.p.ServerCacheBlocks <= 0 {
		return
	}
	var victim ref
	if held {
		victim = s.server.insert(id.id, id.file, v, 0)
	} else {
		victim = s.server.insertNew(id.id, id.file, v, 0)
	}
	if s.none {
		return
	}
	if victim.id != 0 {
		s.dir.ServerEvicted(victim.dirID())
	}
	s.dir.ServerCached(id.dirID())
}

// clientInsert caches id at client cl, its data arriving at ready,
// replacing a copy it may hold (held; otherwise it holds none); an evicted
// block goes to the discard queue.
func (s *Sim) clientInsert(cl int, id ref, v block.Version, ready time.Duration, held bool, c *sim.Counters) {
	var victim ref
	if held {
		victim = s.caches[cl].insert(id.id, id.file, v, ready)
	} else {
		victim = s.caches[cl].insertNew(id.id, id.file, v, ready)
	}
	if victim.id == 0 || s.none {
		return
	}
	if batch := s.holders[cl].Evicted(victim.dirID()); batch != nil {
		s.notify(cl, batch, c)
	}
}

func (s *Sim) notify(cl int, ids []block.ID, c *sim.Counters) {
	s.dir.Discarded(directory.ClientID(cl+1), ids)
	c.Msg(cl, sim.NodeServer, false)
	c.Manager(sim.CauseReplacement, 1)
	c.Replacement(sim.ReplDelete, 1)
}

// ClientRow is one client's line of the seed's table 3 and figure 7.
type ClientRow struct {
	Client   int    // simulated client number (0-based)
	Served   uint64 // blocks the server sent it
	Received uint64 // blocks it received from peers
	Hits     uint64 // forwarded requests it served (forward hits)
	Misses   uint64 // forwarded requests it could not serve (forward misses)
}

// Clients returns every client's row, counted since New.
func (s *Sim) Clients() []ClientRow {
	rows := make([]ClientRow, s.p.Clients)
	for i := range rows {
		cs, _ := s.dir.ClientStats(directory.ClientID(i + 1))
		rows[i] = ClientRow{Client: i, Served: cs.Served, Received: s.servedRemote[i],
			Hits: cs.Forwards - cs.Misses, Misses: cs.Misses}
	}
	return rows
}

// Check implements sim.Checker: cache sizes and directory size are within
// bounds, and the directory never lists a holder that is failed.
func (s *Sim) Check() error {
	for i, l := range s.caches {
		if l.len() > max(0, s.p.ClientCacheBlocks) {
			return fmt.Errorf("client %d caches %d blocks > %d", i, l.len(), s.p.ClientCacheBlocks)
		}
	}
	if s.server.len() > max(0, s.p.ServerCacheBlocks) {
		return fmt.Errorf("server caches %d blocks > %d", s.server.len(), s.p.ServerCacheBlocks)
	}
	if n, max := s.dir.Len(), s.dir.Config().Entries; n > max {
		return fmt.Errorf("directory has %d entries > %d", n, max)
	}
	return nil
}
