package agent

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/hints"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// hintsClient is the client's side of the `hints` policy (seed 002,
// chapters 4 and 6), around the state machine internal/coord/hints.Client
// that the simulator (internal/sim/hintsim) runs too:
//
//   - master copies: a block read from the server is this client's master
//     copy; the state machine hints itself for it;
//   - on open the server hands over the hints of the file's last opener
//     (opened); a local miss goes straight to the hinted holder (fetch), a
//     holder without the block answers with its own hint or sends the
//     requester to the server (serveRead);
//   - best-guess replacement: the state machine orders the memory tier's
//     blocks by age and, when it evicts a master copy, names the peer with
//     the oldest block in its oldest-block list; the copy is forwarded
//     there (forward) and the two exchange the ages of their oldest blocks;
//     the target keeps it as a global block valued by age (acceptForward)
//     and sends a young master copy it evicts for it to the server's
//     discard cache (the pessimistic test);
//   - boot ids: every peer is known by a stable id and its boot id (the
//     server's client list, HintsPeers); a hint naming an older life or a
//     peer that left is dropped;
//   - consistency: blocks are tagged with the file version of the open;
//     a peer serves only that version, and the requester checks the block
//     against the server's SHA-256 of it (handed out with the hints, or
//     asked for) before using it.
//
// Lookups and replacements never involve the server.
type hintsClient struct {
	a *Agent
	*peerNet
	timeout time.Duration // how long a peer has to answer
	boot    uint64        // this client's boot id (Hello.BootID)
	blocks  int           // the memory tier's size in blocks

	mu      sync.Mutex
	hc      *hints.Client // nil until the server named our id
	me      uint32
	members map[uint32]wire.HintsMember // the other clients, by id
	seq     uint64                      // the last membership change members reflect (HintsPeers.Seq)
	stale   bool                        // members may lack changes up to seq: the whole list is asked for
	asking  bool                        // a resync is under way
	digests map[digestKey][]byte        // the server's digests of blocks peers may serve
	// last holds the files (and versions) this client is the last opener
	// of, as far as it knows: the server asks for its hints (HintsExport)
	// when another client opens one, which ends it. Reopening such a file
	// needs no hand-out (seed 002: no newer hints exist).
	last map[uint64]uint64
	// prov keeps the capabilities that came with master copies forwarded
	// here: the copy's provenance, shown when it is forwarded on or sent
	// to the discard cache (phints_admit.go).
	prov capStore

	fwd   chan struct{} // bounds the forwards in flight
	stats hintsStats
}

type digestKey struct{ file, version, index uint64 }

// minHints is the least bound on the hints naming peers a client keeps
// (hints.ClientConfig.MaxHints): 16 per cached block, at least this many.
const minHints = 1 << 16

// digestRun is how many blocks' digests a client asks for at once.
const digestRun = 8

// maxDigests bounds the digest table; past it the table restarts.
const maxDigests = 1 << 16

// hintsMinSize: files smaller than this and than one block are not worth a
// hint hand-out on open (one round trip to the server either way; seed 001
// found the coordination of small files costing more than their data).
// Such opens do not make the client the file's last opener.
const hintsMinSize = 64 << 10

// hintsForwards bounds the master copies being forwarded at once; an
// eviction past it drops the copy (the server still has the block).
const hintsForwards = 8

func newHintsClient(ctx context.Context, a *Agent, ln net.Listener) (*hintsClient, error) {
	bs, _ := a.sess.params()
	h := &hintsClient{a: a, timeout: a.cfg.ForwardTimeout, boot: a.sess.hello.BootID,
		blocks: max(1, int(a.cfg.CacheSize/int64(bs))), members: make(map[uint32]wire.HintsMember),
		digests: make(map[digestKey][]byte), last: make(map[uint64]uint64), fwd: make(chan struct{}, hintsForwards)}
	h.peerNet = newPeerNet(a, ln, "hints", wire.HandlerFunc(h.servePeer), a.cfg.ForwardTimeout)
	// The server registers a client as a member just after its handshake,
	// while it already serves its requests; under load the question may
	// come first and be answered without our id (You 0), and the list the
	// server pushes at the join may arrive before this policy is in place
	// (dropped): without an id the client would run without hints for its
	// whole life. Ask until the answer names us, for a while.
	for try := 0; ; try++ {
		named, err := h.askPeers(ctx)
		if err != nil {
			h.peerNet.close()
			return nil, err
		}
		if named || try >= peersTries {
			break
		}
		time.Sleep(peersRetryWait)
	}
	return h, nil
}

// askPeers asks the server for the whole client list and takes it; named
// reports whether the list named this client.
func (h *hintsClient) askPeers(ctx context.Context) (named bool, err error) {
	r, _, err := h.a.sess.call(ctx, &wire.HintsPeers{}, true)
	if err != nil {
		return false, fmt.Errorf("hints policy: ask the server for the client list: %w", err)
	}
	list, ok := r.(*wire.HintsPeers)
	if !ok {
		return false, nil
	}
	h.setPeers(list, false)
	return list.You != 0, nil
}

// A client list without our id is asked for again peersTries times,
// peersRetryWait apart (newHintsClient).
const (
	peersTries     = 100
	peersRetryWait = 20 * time.Millisecond
)

func (h *hintsClient) close() { h.peerNet.close() }

func now() hints.Time { return hints.Time(time.Now().UnixNano()) }

// setPeers takes the server's client list: our own id (a new one makes a
// new state machine: the old one's hints and ids mean nothing now), new
// peers and new lives join, peers gone are failed. A delta adds or
// removes only the members it names. pushed: the server sent it on its
// own (the whole list comes so at a join: a (re)connection), not as the
// answer to askPeers.
//
// Lists carry the number of the last change they reflect (Seq). A whole
// list older than what was applied (an answer overtaken by the deltas that
// followed it) is dropped, and so is a delta already applied. A delta that
// cannot be applied (before our id is known), or that shows a change was
// missed (the server sends changes in order, but one that arrives before
// the policy is in place is lost), makes the members stale: the client
// asks for the whole list until it gets one as new as the last change it
// applied.
func (h *hintsClient) setPeers(list *wire.HintsPeers, pushed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if list.Delta {
		h.applyDelta(list)
		return
	}
	known := h.hc != nil && list.You == h.me
	if known && list.Seq <= h.seq && !h.stale {
		return // what members holds already, or older
	}
	if known && list.Seq < h.seq {
		// Stale members, and a list older than a change applied since:
		// take the members it has (the ones missed may be among them) and
		// keep asking (resync) for one that holds every change.
		h.takeList(list)
		return
	}
	h.stale = false
	h.seq = list.Seq
	if pushed {
		clear(h.last) // a (re)connection: the server may have forgotten who opened what
	}
	if list.You != 0 && (h.hc == nil || list.You != h.me) {
		hc, err := hints.NewClient(hints.ClientConfig{ID: hints.ClientID(list.You), Boot: hints.BootID(h.boot),
			CacheBlocks: h.blocks, Discard: hints.DiscardPessimistic, MaxHints: max(minHints, 16*h.blocks)})
		if err != nil {
			h.a.log.Warn("hints policy off: cannot make the state machine", "err", err)
			return
		}
		h.hc, h.me = hc, list.You
		h.members = make(map[uint32]wire.HintsMember)
	}
	h.takeList(list)
}

// takeList makes the members those of list (h.mu held).
func (h *hintsClient) takeList(list *wire.HintsPeers) {
	seen := make(map[uint32]bool, len(list.Members))
	for _, m := range list.Members {
		if m.ID == h.me || m.ID == 0 {
			continue
		}
		seen[m.ID] = true
		h.members[m.ID] = m
		if h.hc != nil {
			h.hc.Join(hints.ClientID(m.ID), hints.BootID(m.Boot))
		}
	}
	for id := range h.members {
		if !seen[id] {
			delete(h.members, id)
			if h.hc != nil {
				h.hc.PeerFailed(hints.ClientID(id))
			}
		}
	}
}

// applyDelta applies one membership change (h.mu held); see setPeers.
func (h *hintsClient) applyDelta(list *wire.HintsPeers) {
	if h.hc == nil || list.You != h.me {
		h.stale = true // a change for another life of ours, or before we had one
		h.resync()
		return
	}
	if list.Seq <= h.seq {
		return // the whole list applied already holds it
	}
	if list.Seq != h.seq+1 {
		h.stale = true // changes in between were missed
		h.resync()
	}
	h.seq = list.Seq
	for _, m := range list.Members {
		if m.ID != h.me && m.ID != 0 {
			h.members[m.ID] = m
			h.hc.Join(hints.ClientID(m.ID), hints.BootID(m.Boot))
		}
	}
	for _, id := range list.Gone {
		if _, ok := h.members[id]; ok {
			delete(h.members, id)
			h.hc.PeerFailed(hints.ClientID(id))
		}
	}
}

// resync asks the server for the whole client list in the background,
// one request at a time, until the members are no longer stale (at most
// resyncTries times) (h.mu held).
func (h *hintsClient) resync() {
	if h.asking {
		return
	}
	h.asking = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), resyncTimeout)
		defer cancel()
		for try := 0; ; try++ {
			_, err := h.askPeers(ctx)
			if err != nil {
				h.a.log.Debug("hints policy: the client list could not be asked for again", "err", err)
			}
			h.mu.Lock()
			if err != nil || !h.stale || try+1 >= resyncTries {
				h.asking = false
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
		}
	}()
}

// resyncTries bounds the requests of one resync: each answer is as new as
// the changes the server had made when it answered, so the second is
// enough unless clients keep joining and leaving meanwhile.
const resyncTries = 5

// catchUp asks for the whole client list once the policy is in place: the
// changes the server sent before it was were dropped.
func (h *hintsClient) catchUp() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resync()
}

// resyncTimeout bounds a background request for the whole client list.
const resyncTimeout = 30 * time.Second

// addr returns the peer listener of id (h.mu held); "" if unknown.
func (h *hintsClient) addr(id hints.ClientID) string { return h.members[uint32(id)].Listen }

// opened asks the server for the hints of the file's last opener and
// imports them, with the digests of the hinted blocks.
func (h *hintsClient) opened(ctx context.Context, f *file) {
	f.mu.Lock()
	ino, v, size := f.attr.Ino, f.attr.Version, f.attr.Size
	f.mu.Unlock()
	if size < min(hintsMinSize, uint64(h.a.BlockSize())) || f.flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return // the hand-out would cost what reading the file from the server does
	}
	h.mu.Lock()
	ready := h.hc != nil
	still := h.last[ino] == v
	h.mu.Unlock()
	if !ready {
		return
	}
	if still {
		h.stats.localOpens.Add(1)
		return
	}
	r, err := f.call(ctx, func(hd uint64) wire.Msg { return &wire.HintsOpen{Handle: hd, File: ino, Version: v} }, true)
	hr, ok := r.(*wire.HintsReply)
	if err != nil || !ok {
		h.a.log.Warn("no hints handed out on open: the file's blocks come from the server", "file", ino, "err", err)
		return
	}
	bh := make([]hints.BlockHint, len(hr.Hints))
	for i, x := range hr.Hints {
		bh[i] = hints.BlockHint{Index: x.Index, Hint: hints.Hint{Holder: hints.ClientID(x.Holder), Boot: hints.BootID(x.Boot), Since: hints.Time(x.Since)}}
	}
	h.mu.Lock()
	if h.hc != nil {
		if hr.From != 0 {
			h.hc.Observe(hints.ClientID(hr.From), hints.BootID(hr.FromBoot))
		}
		n := h.hc.ImportHints(ino, block.Version(hr.Version), bh)
		h.stats.imported.Add(uint64(n))
	}
	if len(h.digests)+len(hr.Digests) > maxDigests {
		clear(h.digests)
	}
	for _, d := range hr.Digests {
		h.digests[digestKey{ino, hr.Version, d.Index}] = d.Digest
	}
	if len(h.last) >= maxDigests {
		clear(h.last)
	}
	h.last[ino] = hr.Version
	h.mu.Unlock()
}

// fetch reads a block after a local miss: from the hinted holder, then the
// holders it points to, then the server. A block from the server is a
// master copy.
func (h *hintsClient) fetch(ctx context.Context, f *file, id block.ID, v uint64) (*wire.BlockReply, error) {
	h.mu.Lock()
	hc := h.hc
	var r hints.Route
	if hc != nil {
		r = hc.Read(now(), id, block.Version(v))
		if r.Kind == hints.RouteLocal {
			// The state machine has a copy the tiers do not serve at v: a
			// newer version (an older open reads), or one the memory tier
			// lost behind its back, which it forgets.
			if _, held := h.a.cache.Peek(id); !held {
				hc.Drop(id)
			}
			r = hints.Route{Kind: hints.RouteServer}
		}
	}
	h.mu.Unlock()
	if hc == nil {
		return f.fromServer(ctx, &wire.ReadBlock{File: id.File, Index: id.Index, Version: v})
	}
	h.stats.misses.Add(1)
	if r.StaleHint {
		h.stats.stale.Add(1)
	}
	if r.Kind == hints.RoutePeer {
		if br := h.fromPeers(ctx, f, id, v, r.Peer); br != nil {
			return br, nil
		}
	}
	h.stats.lookupMessages.Add(2) // the request to the server and its answer
	br, err := f.fromServer(ctx, &wire.ReadBlock{File: id.File, Index: id.Index, Version: v})
	if err != nil || len(br.Data) == 0 {
		return br, err
	}
	h.mu.Lock()
	ev := hc.Fill(now(), id, block.Version(br.Version), true, hints.NoClient, 0, false)
	h.mu.Unlock()
	h.carryOut(ev)
	return br, nil
}

// fromPeers follows the hints for a block from holder to holder, at most
// hints.DefaultMaxHops of them; nil means "ask the server".
func (h *hintsClient) fromPeers(ctx context.Context, f *file, id block.ID, v uint64, to hints.ClientID) *wire.BlockReply {
	cp := h.a.ownCaps.get(id.File, v)
	if !cp.Valid() {
		return nil // no peer would serve it: read from the server
	}
	h.stats.lookups.Add(1)
	for hops := 1; hops <= hints.DefaultMaxHops; hops++ {
		h.mu.Lock()
		addr, me := h.addr(to), h.me
		h.mu.Unlock()
		if addr == "" {
			h.stats.stale.Add(1)
			h.dropHint(id)
			return nil
		}
		hb, err := h.read(ctx, addr, &wire.HintsRead{File: id.File, Index: id.Index, Version: v,
			Hops: uint32(hops), From: me, FromBoot: h.boot, Cap: cp})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			h.stats.holderFailures.Add(1)
			h.a.log.Info("hinted holder did not answer; asking the server", "holder", to, "addr", addr, "err", err)
			h.mu.Lock()
			h.hc.ForwardFailed(to, id) // lazy failure detection: ignored until heard from again
			h.mu.Unlock()
			return nil
		}
		h.mu.Lock()
		h.hc.Observe(to, hints.BootID(hb.Boot))
		h.mu.Unlock()
		switch hb.Kind {
		case wire.HintsHere:
			return h.admit(ctx, f, id, v, to, hb, hops)
		case wire.HintsTry:
			h.stats.redirects.Add(1)
			h.mu.Lock()
			if _, known := h.members[hb.To]; !known && hb.ToAddr != "" {
				h.members[hb.To] = wire.HintsMember{ID: hb.To, Boot: hb.ToBoot, Listen: hb.ToAddr}
				h.hc.Join(hints.ClientID(hb.To), hints.BootID(hb.ToBoot))
			}
			h.mu.Unlock()
			to = hints.ClientID(hb.To)
		default:
			h.dropHint(id)
			return nil
		}
	}
	return nil
}

// read sends one lookup to a holder and waits for its answer.
func (h *hintsClient) read(ctx context.Context, addr string, m *wire.HintsRead) (*wire.HintsBlock, error) {
	h.stats.lookupMessages.Add(2) // the request and its answer
	conn, err := h.peer(addr)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, peerTimeout(ctx, h.timeout))
	defer cancel()
	r, err := conn.Call(cctx, m)
	if err != nil {
		return nil, err
	}
	hb, ok := r.(*wire.HintsBlock)
	if !ok {
		return nil, fmt.Errorf("peer answered a lookup with %v: %w", r.Type(), syscall.EPROTO)
	}
	return hb, nil
}

// admit checks a block a holder sent (the version of the open, the
// server's digest) and takes it, hinting the holder when it has the master
// copy; nil means the block was refused and the server is asked.
func (h *hintsClient) admit(ctx context.Context, f *file, id block.ID, v uint64, from hints.ClientID, hb *wire.HintsBlock, hops int) *wire.BlockReply {
	if hb.Version != v || !h.check(ctx, f, id, v, hb.Data) {
		// Wrong bytes: the holder is ignored (as a failed one) until the
		// client list changes, so one bad peer costs one block per life.
		h.stats.badBlocks.Add(1)
		h.a.log.Warn("dropped a block from a peer that failed its check; reading it from the server",
			"holder", from, "file", id.File, "index", id.Index, "version", v, "sent_version", hb.Version)
		h.mu.Lock()
		h.hc.ForwardFailed(from, id)
		h.mu.Unlock()
		return nil
	}
	if hops == 1 {
		h.stats.hintHits.Add(1)
	} else {
		h.stats.chainHits.Add(1)
	}
	h.mu.Lock()
	ev := h.hc.Fill(now(), id, block.Version(v), false, from, hints.BootID(hb.Boot), hb.Master)
	h.mu.Unlock()
	h.carryOut(ev)
	h.a.metrics.CountRead(obs.LayerPeer, len(hb.Data))
	f.mu.Lock()
	size := f.attr.Size
	f.mu.Unlock()
	return &wire.BlockReply{Version: v, Size: size, Data: hb.Data}
}

// check compares a peer's block with the server's SHA-256 of it at version
// v: from the open's hand-out, else asked of the server.
func (h *hintsClient) check(ctx context.Context, f *file, id block.ID, v uint64, data []byte) bool {
	k := digestKey{id.File, v, id.Index}
	h.mu.Lock()
	sum, ok := h.digests[k]
	h.mu.Unlock()
	if !ok {
		h.askDigests(ctx, f, id, v)
		h.mu.Lock()
		sum, ok = h.digests[k]
		h.mu.Unlock()
		if !ok {
			return false
		}
	}
	return wire.DigestMatches(data, sum)
}

// askDigests asks the server for the digests of the aligned run of
// digestRun blocks around id (the reader of block i reads i+1 next); the
// fetches of one run, read ahead in parallel, share one request.
func (h *hintsClient) askDigests(ctx context.Context, f *file, id block.ID, v uint64) {
	// From the block needed to the end of its run: the server reads only
	// the first from the export if it must, and adds the others it knows.
	count := uint32(digestRun - id.Index%digestRun)
	key := "digests:" + strconv.FormatUint(id.File, 10) + ":" + strconv.FormatUint(v, 10) + ":" + strconv.FormatUint(id.Index, 10)
	h.a.flights.Do(key, func() (any, error) {
		h.stats.digestRequests.Add(1)
		r, err := f.call(ctx, func(hd uint64) wire.Msg {
			return &wire.HintsDigest{Handle: hd, File: id.File, Index: id.Index, Version: v, Count: count}
		}, true)
		h.keepDigests(id.File, v, r, err)
		return nil, err
	})
}

// keepDigests stores the digests of version v of file that a HintsDigest
// reply r carries (nothing on an error or a reply of another version).
func (h *hintsClient) keepDigests(file, v uint64, r wire.Msg, err error) {
	dr, isRep := r.(*wire.HintsDigestRep)
	if err != nil || !isRep || dr.Version != v {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.digests)+len(dr.Digests) > maxDigests {
		clear(h.digests)
	}
	for _, d := range dr.Digests {
		h.digests[digestKey{file, v, d.Index}] = d.Digest
	}
}

func (h *hintsClient) dropHint(id block.ID) {
	h.mu.Lock()
	if h.hc != nil {
		h.hc.DropHint(id)
	}
	h.mu.Unlock()
}

// carryOut does what an insertion's replacement decided: a dropped block
// leaves the memory tier, a master copy is forwarded to the best-guess
// target.
func (h *hintsClient) carryOut(ev hints.Eviction) {
	switch ev.Kind {
	case hints.EvictDrop:
		h.a.cache.Remove(ev.Block)
	case hints.EvictForward:
		data, ok := h.a.forPeer(ev.Block, ev.Version)
		h.a.cache.Remove(ev.Block)
		if !ok {
			h.dropHint(ev.Block)
			return
		}
		select {
		case h.fwd <- struct{}{}:
		default:
			h.stats.forwardsSkipped.Add(1)
			h.dropHint(ev.Block)
			return
		}
		go func() {
			defer func() { <-h.fwd }()
			h.forward(ev, data)
		}()
	}
}

// forward sends an evicted master copy to the best-guess target and
// completes the age exchange with its answer.
func (h *hintsClient) forward(ev hints.Eviction, data []byte) {
	h.mu.Lock()
	addr, me := h.addr(ev.To), h.me
	h.mu.Unlock()
	var ack *wire.HintsForwardAck
	err := fmt.Errorf("no address for client %d", ev.To)
	if addr != "" {
		var conn *wire.Conn
		if conn, err = h.peer(addr); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
			var r wire.Msg
			r, err = conn.Call(ctx, &wire.HintsForward{File: ev.Block.File, Index: ev.Block.Index,
				Version: uint64(ev.Version), Stamp: int64(ev.Stamp), FromOldest: int64(ev.FromOldest),
				From: me, FromBoot: h.boot, Cap: h.provenance(ev.Block.File, uint64(ev.Version)), Data: data})
			cancel()
			if a, ok := r.(*wire.HintsForwardAck); ok {
				ack = a
			} else if err == nil {
				err = fmt.Errorf("peer answered a forward with %v", r.Type())
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hc == nil || h.me != me {
		return
	}
	if ack == nil {
		h.stats.forwardFailures.Add(1)
		h.hc.ForwardFailed(ev.To, ev.Block)
		h.a.log.Debug("forward of a master copy failed", "to", ev.To, "err", err)
		return
	}
	h.stats.forwards.Add(1)
	h.hc.ForwardAcked(ev.To, hints.BootAge{Age: hints.Time(ack.Oldest), Boot: hints.BootID(ack.Boot)})
	if !ack.Kept {
		h.hc.DropHint(ev.Block)
	}
}

// servePeer answers peers: lookups and forwarded master copies.
func (h *hintsClient) servePeer(ctx context.Context, c *wire.Conn, m wire.Msg) (wire.Msg, error) {
	switch m := m.(type) {
	case *wire.HintsRead:
		if !h.a.servable(c, &m.Cap, block.ID{File: m.File, Index: m.Index}, m.Version) {
			// Neither the block nor a hint: the requester asks the server,
			// which checks its permission.
			return &wire.HintsBlock{Kind: wire.HintsServer, Boot: h.boot}, nil
		}
		return h.serveRead(m), nil
	case *wire.HintsForward:
		return h.acceptForward(ctx, m), nil
	case *wire.Ping:
		return &wire.OK{}, nil
	}
	return nil, fmt.Errorf("a hints peer does not serve %v: %w", m.Type(), syscall.ENOSYS)
}

// serveRead answers a lookup: the block if it is here (memory or disk) at
// the version asked, else this client's own hint, else "the server".
func (h *hintsClient) serveRead(m *wire.HintsRead) *wire.HintsBlock {
	id := block.ID{File: m.File, Index: m.Index}
	v := block.Version(m.Version)
	h.stats.lookupsServed.Add(1)
	h.mu.Lock()
	me := h.me
	if h.hc == nil {
		h.mu.Unlock()
		return &wire.HintsBlock{Kind: wire.HintsServer, Boot: h.boot}
	}
	h.hc.Observe(hints.ClientID(m.From), hints.BootID(m.FromBoot))
	r := h.hc.ServeRequest(now(), id, v, hints.ClientID(m.From), int(m.Hops))
	h.mu.Unlock()
	if data, ok := h.a.forPeer(id, v); ok {
		h.stats.served.Add(1)
		return &wire.HintsBlock{Kind: wire.HintsHere, Version: m.Version, Master: r.Kind == hints.RouteLocal && r.Master,
			Holder: me, Boot: h.boot, Data: data}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Kind == hints.RouteLocal {
		if _, held := h.a.cache.Peek(id); held {
			// A copy of another version (a newer one: the requester's open
			// is older): not for this request; the server serves it.
			return &wire.HintsBlock{Kind: wire.HintsServer, Holder: me, Boot: h.boot}
		}
		// The state machine had it, the tiers no longer: forget it, follow the hint.
		h.stats.lost.Add(1)
		h.hc.Drop(id)
		r = h.hc.ServeRequest(now(), id, v, hints.ClientID(m.From), int(m.Hops))
	}
	if r.Kind == hints.RoutePeer {
		if addr := h.addr(r.Peer); addr != "" {
			return &wire.HintsBlock{Kind: wire.HintsTry, Holder: me, Boot: h.boot, To: uint32(r.Peer), ToBoot: uint64(r.Boot), ToAddr: addr}
		}
	}
	return &wire.HintsBlock{Kind: wire.HintsServer, Holder: me, Boot: h.boot}
}

// toDiscardCache sends a young master copy to the server's discard cache.
func (h *hintsClient) toDiscardCache(ev hints.Eviction, data []byte) {
	h.stats.discards.Add(1)
	conn, _, err := h.a.sess.current(context.Background())
	if err == nil {
		err = conn.Send(&wire.HintsDiscard{File: ev.Block.File, Index: ev.Block.Index, Version: uint64(ev.Version),
			Stamp: int64(ev.Stamp), Cap: h.provenance(ev.Block.File, uint64(ev.Version)), Data: data})
	}
	if err != nil {
		h.a.log.Debug("young master copy not sent to the discard cache", "err", err)
	}
}

// hit makes a local hit a reference (the block becomes young); a block
// the state machine did not know joins it as a copy that is not a master.
func (h *hintsClient) hit(id block.ID, v uint64) {
	h.mu.Lock()
	if h.hc == nil {
		h.mu.Unlock()
		return
	}
	var ev hints.Eviction
	t := now()
	if r := h.hc.Read(t, id, block.Version(v)); r.Kind != hints.RouteLocal {
		ev = h.hc.Fill(t, id, block.Version(v), false, hints.NoClient, 0, false)
	}
	h.mu.Unlock()
	h.carryOut(ev)
}

func (h *hintsClient) promoted(id block.ID, v uint64) { h.hit(id, v) }

// memEvicted: the memory tier dropped a block on its own (it holds bytes,
// the state machine blocks): the state machine forgets it.
func (h *hintsClient) memEvicted(id block.ID) {
	h.mu.Lock()
	if h.hc != nil {
		h.hc.Drop(id)
	}
	h.mu.Unlock()
}

func (h *hintsClient) diskEvicted(block.ID) {}

func (h *hintsClient) closing(context.Context, *file) {}

func (h *hintsClient) fileDropped(ino uint64) {
	h.mu.Lock()
	if h.hc != nil {
		h.hc.Invalidate(ino)
	}
	h.mu.Unlock()
}

// serveServer takes the server's client list and its requests for this
// client's hints of a file (another client opened it after us).
func (h *hintsClient) serveServer(_ context.Context, m wire.Msg) (wire.Msg, error, bool) {
	switch m := m.(type) {
	case *wire.HintsPeers:
		h.setPeers(m, true)
		return nil, nil, true
	case *wire.HintsExport:
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.last, m.File) // another client opened it after us
		r := &wire.HintsReply{From: h.me, FromBoot: h.boot}
		if h.hc != nil {
			for _, x := range h.hc.ExportHints(m.File, nil) {
				r.Hints = append(r.Hints, wire.BlockHintMsg{Index: x.Index, Holder: uint32(x.Holder), Boot: uint64(x.Boot), Since: int64(x.Since)})
			}
		}
		return r, nil, true
	}
	return nil, nil, false
}

// hintsStats are the client's hints counters (phints_metrics.go).
type hintsStats struct {
	misses, lookups, hintHits, chainHits, redirects, lookupMessages atomic.Uint64
	stale, holderFailures, badBlocks, digestRequests                atomic.Uint64
	imported, lookupsServed, served                                 atomic.Uint64
	forwards, forwardFailures, forwardsSkipped                      atomic.Uint64
	forwardsReceived, discards, badForwards                         atomic.Uint64
	lost, localOpens                                                atomic.Uint64
}
