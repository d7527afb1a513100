package server

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/wire"
)

// coop drives the `directory` policy's state machine for the live server:
// it owns the lock around the Directory, the clock it is fed, and the
// connections of the clients it forwards to.
type coop struct {
	mu    sync.Mutex
	dir   *directory.Directory
	start time.Time
	conns map[directory.ClientID]*peerInfo
	// inFlight remembers, per holder, the recent forwards sent to it, so
	// that when the holder's connection drops its requesters are told at
	// once instead of waiting out their forward timeout.
	inFlight map[directory.ClientID][]sentForward
	// bad counts, per peer identity (peerWho), the blocks requesters
	// reported as failing their check or never sent (digests.go);
	// badReports is their sum. It outlives the connection: a holder that
	// reconnects keeps its strikes, and a distrusted one stays distrusted.
	bad        map[string]int
	badReports uint64
	departed   []directory.ClientID // disconnected clients, oldest first
}

// sentForward is a forward the server sent: who waits for it, and how to
// tell them it will not come.
type sentForward struct {
	requester *wire.Conn
	nack      wire.PeerNack
	at        time.Time
}

// Bounds of the in-flight record per holder: forwards older than
// inFlightAge have been answered or timed out at the requester.
const (
	inFlightAge = 30 * time.Second
	inFlightMax = 4096
)

// sent records a forward to holder for the requester on conn. A holder
// that left between the Forward and this record was missed by left(): its
// requester gets the negative reply here instead.
func (c *coop) sent(holder uint32, requester *wire.Conn, nack wire.PeerNack) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.conns[directory.ClientID(holder)]; !ok {
		go requester.Send(&nack)
		return
	}
	fs := c.inFlight[directory.ClientID(holder)]
	for len(fs) > 0 && (now.Sub(fs[0].at) > inFlightAge || len(fs) >= inFlightMax) {
		fs = fs[1:]
	}
	c.inFlight[directory.ClientID(holder)] = append(fs, sentForward{requester: requester, nack: nack, at: now})
}

// peerInfo is how the server reaches a client under the policy.
type peerInfo struct {
	conn   *wire.Conn
	listen string // the client's peer listener
	who    string // its peer identity (peerWho)
}

// maxPeerStrikes bounds the identities whose strikes are remembered.
const maxPeerStrikes = 1 << 16

// peerWho is a client's peer identity: the name in its certificate, else
// the session the server issued to it (which it resumes when it
// reconnects), never what it says of itself.
func peerWho(cl *client) string {
	if cl.cert != "" {
		return "cert " + cl.cert
	}
	return fmt.Sprintf("session %016x", cl.session)
}

func newCoop(cfg directory.Config) (*coop, error) {
	d, err := directory.New(cfg)
	if err != nil {
		return nil, err
	}
	return &coop{dir: d, start: time.Now(), conns: make(map[directory.ClientID]*peerInfo),
		inFlight: make(map[directory.ClientID][]sentForward), bad: make(map[string]int)}, nil
}

func (c *coop) now() time.Duration { return time.Since(c.start) }

// joined registers a freshly connected client: whatever an earlier
// connection with its id claimed is purged first.
func (c *coop) joined(id uint32, conn *wire.Conn, listen, who string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir.ClientJoined(directory.ClientID(id))
	c.conns[directory.ClientID(id)] = &peerInfo{conn: conn, listen: listen, who: who}
	if c.bad[who] >= BadBlockLimit {
		c.dir.Distrust(directory.ClientID(id)) // distrusted before it reconnected
	}
}

// left marks a disconnected client failed: never forwarded to again.
func (c *coop) left(id uint32) {
	c.mu.Lock()
	c.dir.ClientFailed(directory.ClientID(id))
	c.forgetDeparted(id)
	delete(c.conns, directory.ClientID(id))
	lost := c.inFlight[directory.ClientID(id)]
	delete(c.inFlight, directory.ClientID(id))
	c.mu.Unlock()
	// Forwards the holder may not have served: their requesters get a
	// negative reply now and ask the server again. A requester that already
	// has its block ignores it (the token is no longer awaited).
	for _, f := range lost {
		if time.Since(f.at) < inFlightAge && f.requester.Err() == nil {
			f.requester.Send(&f.nack)
		}
	}
}

func (c *coop) fileChanged(ino uint64) {
	c.mu.Lock()
	c.dir.FileChanged(ino)
	c.mu.Unlock()
}

func (c *coop) cached(id block.ID) {
	c.mu.Lock()
	c.dir.ServerCached(id)
	c.mu.Unlock()
}

func (c *coop) evicted(id block.ID) {
	c.mu.Lock()
	c.dir.ServerEvicted(id)
	c.mu.Unlock()
}

// held records that client id has blocks (arrived, cached): the directory
// counts it as a holder that has them, not one still receiving them. A
// client can claim only blocks it asked for: Confirm records no holder.
func (c *coop) held(id uint32, blocks []block.ID) {
	c.mu.Lock()
	c.dir.Confirm(c.now(), directory.ClientID(id), blocks)
	c.mu.Unlock()
}

func (c *coop) discarded(id uint32, blocks []block.ID) {
	c.mu.Lock()
	c.dir.Discarded(directory.ClientID(id), blocks)
	c.mu.Unlock()
}

// decide runs a Request (or a Retry naming the holder that failed) and
// returns the action with the holder's connection for a forward. A forward
// to a client whose connection is gone becomes a retry at once.
func (c *coop) decide(client uint32, id block.ID, v uint64, retry uint32, peersFirst bool) (directory.Action, *peerInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := directory.ClientID(client)
	var act directory.Action
	if retry != 0 {
		act = c.dir.Retry(c.now(), cl, id, block.Version(v), directory.ClientID(retry))
	} else {
		if peersFirst {
			act = c.dir.RequestPeersFirst(c.now(), cl, id, block.Version(v))
		} else {
			act = c.dir.Request(c.now(), cl, id, block.Version(v))
		}
	}
	if act.Kind != directory.ActForward {
		return act, nil
	}
	p := c.conns[act.To]
	if p == nil || p.conn.Err() != nil || p.listen == "" {
		c.dir.ClientFailed(act.To)
		delete(c.conns, act.To)
		return c.dir.Retry(c.now(), cl, id, block.Version(v), act.To), nil
	}
	return act, p
}

// ping asks a client that keeps missing forwards whether it is alive, and
// reports the outcome to the directory.
func (c *coop) ping(id directory.ClientID, timeout time.Duration) {
	c.mu.Lock()
	p := c.conns[id]
	c.mu.Unlock()
	ok := false
	if p != nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		_, err := p.conn.Call(ctx, &wire.Ping{})
		cancel()
		ok = err == nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.dir.PingOK(id)
	} else {
		c.dir.PingFailed(id)
	}
}

// stats returns the directory's counters, and every client's, and the
// bad-block reports, under the lock.
func (c *coop) stats() (directory.Stats, map[directory.ClientID]directory.ClientStats, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	per := make(map[directory.ClientID]directory.ClientStats)
	for _, id := range c.dir.Clients() {
		per[id], _ = c.dir.ClientStats(id)
	}
	return c.dir.Stats(), per, c.badReports
}

// coopCollector exports the directory's counters at scrape time.
type coopCollector struct {
	c         *coop
	descs     map[string]*prometheus.Desc
	perClient [4]*prometheus.Desc
}

var coopMetricNames = []struct{ name, help string }{
	{"coopfs_directory_requests_total", "Block requests the directory decided."},
	{"coopfs_directory_retries_total", "Requests asked again after a failed forward."},
	{"coopfs_directory_served_by_server_total", "Requests the server served itself."},
	{"coopfs_directory_forwards_total", "Requests forwarded to a holder client."},
	{"coopfs_directory_forward_misses_total", "Forwards the holder did not serve."},
	{"coopfs_directory_notifications_total", "Discard notifications received."},
	{"coopfs_directory_notified_blocks_total", "Block ids in discard notifications."},
	{"coopfs_directory_entries", "Blocks tracked by the cache directory."},
	{"coopfs_directory_recycled_total", "Directory entries recycled to make room."},
	{"coopfs_directory_pings_total", "Pings sent to clients that kept missing forwards."},
	{"coopfs_directory_failures_total", "Clients marked failed."},
	{"coopfs_directory_bad_blocks_reported_total", "Forwarded blocks that requesters reported as failing their digest or identity check."},
	{"coopfs_directory_distrusted_total", "Clients no longer forwarded to because they sent bad blocks."},
	{"coopfs_directory_held_blocks_total", "Blocks clients confirmed they have (Held), under balanced forwarding."},
}

func newCoopCollector(c *coop) *coopCollector {
	cc := &coopCollector{c: c, descs: make(map[string]*prometheus.Desc)}
	for _, m := range coopMetricNames {
		cc.descs[m.name] = prometheus.NewDesc(m.name, m.help, nil, nil)
	}
	for i, m := range []struct{ name, help string }{
		{"coopfs_directory_client_requests_total", "Block requests from a client (the miss table, by client id)."},
		{"coopfs_directory_client_served_total", "Blocks the server served to a client itself."},
		{"coopfs_directory_client_forwards_total", "Forwards sent to a client to serve."},
		{"coopfs_directory_client_forward_misses_total", "Forwards a client did not serve."},
	} {
		cc.perClient[i] = prometheus.NewDesc(m.name, m.help, []string{"client"}, nil)
	}
	return cc
}

func (cc *coopCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range cc.descs {
		ch <- d
	}
	for _, d := range cc.perClient {
		ch <- d
	}
}

func (cc *coopCollector) Collect(ch chan<- prometheus.Metric) {
	s, per, bad := cc.c.stats()
	for id, cs := range per {
		label := strconv.FormatUint(uint64(id), 10)
		for i, v := range []uint64{cs.Requests, cs.Served, cs.Forwards, cs.Misses} {
			ch <- prometheus.MustNewConstMetric(cc.perClient[i], prometheus.CounterValue, float64(v), label)
		}
	}
	vals := map[string]float64{
		"coopfs_directory_requests_total":            float64(s.Requests),
		"coopfs_directory_retries_total":             float64(s.Retries),
		"coopfs_directory_served_by_server_total":    float64(s.ServedByServer),
		"coopfs_directory_forwards_total":            float64(s.Forwards),
		"coopfs_directory_forward_misses_total":      float64(s.ForwardMisses),
		"coopfs_directory_notifications_total":       float64(s.Notifications),
		"coopfs_directory_notified_blocks_total":     float64(s.NotifiedBlocks),
		"coopfs_directory_entries":                   float64(s.Entries),
		"coopfs_directory_recycled_total":            float64(s.Recycled),
		"coopfs_directory_pings_total":               float64(s.Pings),
		"coopfs_directory_failures_total":            float64(s.Failures),
		"coopfs_directory_bad_blocks_reported_total": float64(bad),
		"coopfs_directory_distrusted_total":          float64(s.Distrusted),
		"coopfs_directory_held_blocks_total":         float64(s.Confirmed),
	}
	for name, v := range vals {
		t := prometheus.CounterValue
		if name == "coopfs_directory_entries" {
			t = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(cc.descs[name], t, v)
	}
}

// maxDeparted is how many disconnected clients the directory remembers
// (their counters, one metric series each); older ones are forgotten.
const maxDeparted = 64

// forgetDeparted records a departed client and forgets the oldest past
// maxDeparted (c.mu held).
func (c *coop) forgetDeparted(id uint32) {
	c.departed = append(c.departed, directory.ClientID(id))
	for len(c.departed) > maxDeparted {
		c.dir.Forget(c.departed[0])
		c.departed = c.departed[1:]
	}
}
