package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/wire"
)

// coop is the client's part of the `directory` policy: a peer listener on
// which forwarded blocks arrive, the holder state machine that answers the
// server's forwards, the discard queue, and the connections it opens to
// requesters to send them blocks.
type coop struct {
	a *Agent
	*peerNet
	timeout time.Duration // how long a requester waits for a forwarded block

	holderMu sync.Mutex
	holder   *directory.Holder

	pendMu  sync.Mutex
	pending map[block.ID]*pendingFetch // blocks on their way from the server or a peer

	nextToken atomic.Uint64
	tokMu     sync.Mutex
	tokens    map[uint64]*peerToken // requests waiting for PeerData or PeerNack

	heldMu    sync.Mutex
	heldQueue []block.ID // arrived blocks not yet confirmed to the server (held)

	stats coopStats
}

// coopStats are the requester-side counters.
type coopStats struct {
	forwarded, peerHits, nacks, timeouts atomic.Uint64
	badBlocks                            atomic.Uint64 // peer blocks that failed verify
}

// peerToken is a forwarded request waiting for the holder's answer: the
// PeerData or PeerNack (one), and the holder's word that it waits for the
// block itself (PeerWait, any number, merged).
type peerToken struct {
	answer chan wire.Msg
	wait   chan struct{}
}

// maxPeerWaits bounds how many times a holder's PeerWait extends a
// requester's forward timeout: the waits of swarm forwarding are at most
// three deep (directory.DefaultMaxDepth), and a holder that keeps saying
// it waits cannot hold a requester for longer than this many timeouts.
const maxPeerWaits = 4

type pendingFetch struct {
	version uint64
	done    chan struct{}
}

// listenPeer opens the peer listener: on addr, or (addr "") on the local
// address this host uses to reach the server, port chosen by the kernel.
func listenPeer(addr, server string) (net.Listener, error) {
	if addr == "" {
		c, err := net.Dial("udp", server) // sends nothing: picks the route
		if err != nil {
			return nil, fmt.Errorf("find a local address toward %s: %w", server, err)
		}
		host := c.LocalAddr().(*net.UDPAddr).IP.String()
		c.Close()
		addr = net.JoinHostPort(host, "0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("peer listener on %s: the port is in use; pick another --listen address", addr)
		}
		return nil, fmt.Errorf("peer listener on %s: %w", addr, err)
	}
	return ln, nil
}

func newCoop(a *Agent, ln net.Listener) (*coop, error) {
	h, err := directory.NewHolder(directory.HolderConfig{QueueLen: a.cfg.DiscardQueue, NoNotify: a.cfg.NoDiscard})
	if err != nil {
		return nil, err
	}
	c := &coop{a: a, timeout: a.cfg.ForwardTimeout, holder: h,
		pending: make(map[block.ID]*pendingFetch), tokens: make(map[uint64]*peerToken)}
	c.peerNet = newPeerNet(a, ln, "directory", wire.HandlerFunc(c.servePeer), a.cfg.ForwardTimeout)
	return c, nil
}

func (c *coop) close() {
	c.holderMu.Lock()
	batch := c.holder.Flush()
	c.holderMu.Unlock()
	c.sendDiscard(batch, false)
	c.peerNet.close()
}

// servePeer takes the answers to this client's forwarded requests.
func (c *coop) servePeer(ctx context.Context, _ *wire.Conn, m wire.Msg) (wire.Msg, error) {
	var token uint64
	switch m := m.(type) {
	case *wire.PeerData:
		token = m.Token
	case *wire.PeerNack:
		token = m.Token
	case *wire.PeerWait:
		c.tokMu.Lock()
		tok := c.tokens[m.Token]
		c.tokMu.Unlock()
		if tok != nil {
			select {
			case tok.wait <- struct{}{}:
			default: // one not yet taken is enough
			}
		}
		return nil, nil
	case *wire.Ping:
		return &wire.OK{}, nil
	default:
		return nil, fmt.Errorf("a peer listener does not serve %v: %w", m.Type(), syscall.ENOSYS)
	}
	c.tokMu.Lock()
	tok := c.tokens[token]
	delete(c.tokens, token)
	c.tokMu.Unlock()
	if tok != nil {
		tok.answer <- m // buffered for the one answer a token gets
	}
	return nil, nil
}

// localState is what this client's cache says about a block, for a forward.
func (c *coop) localState(id block.ID) directory.Local {
	if v, ok := c.a.cache.Peek(id); ok {
		return directory.Local{State: directory.Present, Version: v}
	}
	c.pendMu.Lock()
	p := c.pending[id]
	c.pendMu.Unlock()
	if p != nil {
		return directory.Local{State: directory.Pending, Version: block.Version(p.version)}
	}
	if v, ok := c.a.diskPeek(id); ok {
		return directory.Local{State: directory.Present, Version: v}
	}
	return directory.Local{State: directory.Absent}
}

// onForward answers a request the server forwarded to this client.
func (c *coop) onForward(fw *wire.Forward) {
	id := block.ID{File: fw.File, Index: fw.Index}
	v := block.Version(fw.Version)
	local := c.localState(id)
	reply := c.answer(id, v, local)
	if reply.Answer == directory.Wait {
		reply = c.waitFor(fw, id, v)
	}
	why := reply.Answer.String()
	if reply.Answer == directory.Send {
		if data, ok := c.a.forPeer(id, v); ok {
			// The block goes only to the client the server's capability
			// names, proved on the connection it is sent on.
			conn, err := c.peer(fw.RequesterAddr)
			if err == nil && c.a.servable(conn, &fw.Cap, id, fw.Version) {
				_, me := c.a.sess.params()
				c.send(conn, fw.RequesterAddr, &wire.PeerData{Token: fw.Token, File: fw.File, Index: fw.Index,
					Version: fw.Version, Holder: me, Data: data})
				return
			}
			why = "no valid capability"
		}
	}
	_, me := c.a.sess.params()
	c.toPeer(fw.RequesterAddr, &wire.PeerNack{Token: fw.Token, File: fw.File, Index: fw.Index,
		Holder: me, Reason: why})
}

// waitFor waits for a block on its way to this holder, to answer a forward
// for it. It tells the requester so (PeerWait), which waits another
// forward timeout each time, and asks again every half timeout while the
// block is still on its way — a wait behind a holder that waits itself
// lasts longer than one timeout when links are slow and the swarm's
// uploads queue — up to maxPeerWaits times. Past that, a negative reply
// sends the requester to the server at once instead of letting it time
// out.
func (c *coop) waitFor(fw *wire.Forward, id block.ID, v block.Version) directory.Reply {
	c.pendMu.Lock()
	p := c.pending[id]
	c.pendMu.Unlock()
	if p != nil {
		_, me := c.a.sess.params()
		wait := &wire.PeerWait{Token: fw.Token, File: fw.File, Index: fw.Index, Holder: me}
		tick := time.NewTicker(c.timeout / 2)
		defer tick.Stop()
	waiting:
		for n := 0; n < maxPeerWaits; n++ {
			c.toPeer(fw.RequesterAddr, wait)
			select {
			case <-p.done:
				break waiting
			case <-tick.C:
			}
		}
	}
	return c.answer(id, v, c.localState(id))
}

// answer runs the holder state machine and carries out its side effects.
func (c *coop) answer(id block.ID, v block.Version, local directory.Local) directory.Reply {
	c.holderMu.Lock()
	r := c.holder.Forward(id, v, local)
	c.holderMu.Unlock()
	if r.DropFile {
		c.a.dropFile(id.File)
	}
	c.sendDiscard(r.Notify, true)
	return r
}

// evicted is the memory cache's eviction callback: the block joins the
// discard queue, which is sent when full.
func (c *coop) evicted(id block.ID) {
	c.holderMu.Lock()
	batch := c.holder.Evicted(id)
	c.holderMu.Unlock()
	c.sendDiscard(batch, false)
}

func (c *coop) sendDiscard(ids []block.ID, onDemand bool) {
	if len(ids) == 0 {
		return
	}
	conn, _, err := c.a.sess.current(context.Background())
	if err == nil {
		err = conn.Send(&wire.Discard{Blocks: ids, OnDemand: onDemand})
	}
	if err != nil {
		c.a.log.Debug("discard notification not sent", "blocks", len(ids), "err", err)
	}
}

// heldDelay is how long arrived blocks gather before one Held tells the
// server of them all: the directory needs to know soon, not at once.
const heldDelay = 20 * time.Millisecond

// held queues the confirmation that block id arrived and is cached: the
// server then forwards to us as a holder that has it, not one still
// receiving it (directory Swarm).
func (c *coop) held(id block.ID) {
	c.heldMu.Lock()
	c.heldQueue = append(c.heldQueue, id)
	first := len(c.heldQueue) == 1
	c.heldMu.Unlock()
	if first {
		time.AfterFunc(heldDelay, c.sendHeld)
	}
}

func (c *coop) sendHeld() {
	c.heldMu.Lock()
	ids := c.heldQueue
	c.heldQueue = nil
	c.heldMu.Unlock()
	if len(ids) == 0 {
		return
	}
	conn, _, err := c.a.sess.current(context.Background())
	if err == nil {
		err = conn.Send(&wire.Held{Blocks: ids})
	}
	if err != nil {
		c.a.log.Debug("held notification not sent", "blocks", len(ids), "err", err)
	}
}

// toPeer sends a one-way message to a requester, dialing it if needed.
func (c *coop) toPeer(addr string, m wire.Msg) {
	conn, err := c.peer(addr)
	if err != nil {
		c.a.log.Warn("cannot answer a forwarded request", "requester", addr, "err", err)
		return
	}
	c.send(conn, addr, m)
}

func (c *coop) send(conn *wire.Conn, addr string, m wire.Msg) {
	if err := conn.Send(m); err != nil {
		c.a.log.Warn("cannot answer a forwarded request", "requester", addr, "err", err)
	}
}

// startFetch marks a block as on its way (a forward for it waits), and
// returns the function that marks it arrived (or failed).
func (c *coop) startFetch(id block.ID, v uint64) func() {
	p := &pendingFetch{version: v, done: make(chan struct{})}
	c.pendMu.Lock()
	c.pending[id] = p
	c.pendMu.Unlock()
	return func() {
		deleteIfSame(&c.pendMu, c.pending, id, p)
		close(p.done)
	}
}

// deleteIfSame removes k from m, under mu, if it still maps to v: an entry
// put under k since is left alone.
func deleteIfSame[K, V comparable](mu *sync.Mutex, m map[K]V, k K, v V) {
	mu.Lock()
	if m[k] == v {
		delete(m, k)
	}
	mu.Unlock()
}

// token registers a request that may be answered by a peer.
func (c *coop) token() (uint64, *peerToken) {
	t := c.nextToken.Add(1)
	tok := &peerToken{answer: make(chan wire.Msg, 1), wait: make(chan struct{}, 1)}
	c.tokMu.Lock()
	c.tokens[t] = tok
	c.tokMu.Unlock()
	return t, tok
}

func (c *coop) dropToken(t uint64) {
	c.tokMu.Lock()
	delete(c.tokens, t)
	c.tokMu.Unlock()
}

// await waits for the peer's answer to a forwarded request: the block, or
// nil after a negative reply or the timeout (silent). The holder's word
// that the block is on its way to it (PeerWait) starts the timeout again,
// up to maxPeerWaits times.
func (c *coop) await(ctx context.Context, t uint64, tok *peerToken, v uint64) (pd *wire.PeerData, silent bool, err error) {
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	waits := 0
	for {
		select {
		case <-tok.wait:
			if waits < maxPeerWaits {
				waits++
				timer.Reset(c.timeout)
			}
			continue
		case m := <-tok.answer:
			return c.admit(m, v)
		case <-timer.C:
			c.dropToken(t)
			c.stats.timeouts.Add(1)
			c.a.log.Warn("forwarded block did not arrive in time; asking the server", "token", t, "timeout", c.timeout)
			return nil, true, nil
		case <-ctx.Done():
			c.dropToken(t)
			return nil, false, ctx.Err()
		}
	}
}

// admit takes a holder's answer: the block if it is of an acceptable
// version, else nil (a negative reply).
func (c *coop) admit(m wire.Msg, v uint64) (*wire.PeerData, bool, error) {
	pd, ok := m.(*wire.PeerData)
	if !ok || directory.Admit(block.Version(v), block.Version(pd.Version)) == directory.Reject {
		c.stats.nacks.Add(1)
		return nil, false, nil
	}
	return pd, false, nil
}

// coopCollector exports the client's cooperative counters at scrape time.
type coopCollector struct {
	c     *coop
	descs []*prometheus.Desc
}

var coopMetrics = []struct {
	name, help string
	gauge      bool
}{
	{"coopfs_forwards_received_total", "Forwards the server sent this client to serve.", false},
	{"coopfs_forward_hits_total", "Forwards this client served (sent the block).", false},
	{"coopfs_forward_waits_total", "Forwards that waited for a block on its way.", false},
	{"coopfs_forward_misses_total", "Forwards this client could not serve (negative replies).", false},
	{"coopfs_discard_notifications_batched_total", "Discard notifications sent because the queue was full.", false},
	{"coopfs_discard_notifications_on_demand_total", "Discard notifications sent at once on a forward miss.", false},
	{"coopfs_discard_queue", "Evicted blocks waiting in the discard queue.", true},
	{"coopfs_forwarded_requests_total", "This client's misses the server forwarded to a peer.", false},
	{"coopfs_forwarded_peer_hits_total", "Forwarded misses a peer served.", false},
	{"coopfs_forwarded_nacks_total", "Forwarded misses a peer answered negatively.", false},
	{"coopfs_forwarded_timeouts_total", "Forwarded misses no peer answered in time.", false},
	{"coopfs_forwarded_bad_blocks_total", "Blocks peers sent that failed the check (file, index, version, SHA-256): dropped, read from the server, reported.", false},
}

func newCoopCollector(c *coop) *coopCollector {
	cc := &coopCollector{c: c}
	for _, m := range coopMetrics {
		cc.descs = append(cc.descs, prometheus.NewDesc(m.name, m.help, nil, nil))
	}
	return cc
}

func (cc *coopCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range cc.descs {
		ch <- d
	}
}

func (cc *coopCollector) Collect(ch chan<- prometheus.Metric) {
	cc.c.holderMu.Lock()
	h := cc.c.holder.Stats()
	cc.c.holderMu.Unlock()
	s := &cc.c.stats
	vals := []float64{float64(h.Forwards), float64(h.Sent), float64(h.Waited), float64(h.Misses + h.Stale + h.Newer),
		float64(h.Batched), float64(h.OnDemand), float64(h.Queued),
		float64(s.forwarded.Load()), float64(s.peerHits.Load()), float64(s.nacks.Load()), float64(s.timeouts.Load()), float64(s.badBlocks.Load())}
	for i, v := range vals {
		t := prometheus.CounterValue
		if coopMetrics[i].gauge {
			t = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(cc.descs[i], t, v)
	}
}
