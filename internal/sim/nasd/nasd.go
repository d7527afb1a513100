package nasd

import (
	"fmt"

	"github.com/coopfs/coopfs/internal/coord/servercoop"
	"github.com/coopfs/coopfs/internal/sim"
)

// Event is one forward, reported to Config.Observe (tests check the
// forward-once and owned-only rules with it).
type Event struct {
	Side     string // "server" or "client"
	From, To int    // members; To is -1 for the overflow cache
	Key      sim.Key
	Owned    bool // the block was From's own
	Chain    int  // forwards before this one in the cascade
}

// Stats are NASD's own counts, finer than sim.Metrics' layers.
type Stats struct {
	Reads        int64 `json:"reads"`
	LocalHits    int64 `json:"local_hits"`         // the client's own cache
	RemoteClient int64 `json:"remote_client_hits"` // another client (1-Chance) or the client overflow cache (Global)
	ServerHits   int64 `json:"server_hits"`        // the owning server's cache
	RemoteServer int64 `json:"remote_server_hits"` // another server (1-Chance) or the overflow cache server (Global)
	DiskReads    int64 `json:"disk_reads"`

	MemMs     float64 `json:"mem_ms"`     // time in cache memories
	DiskMs    float64 `json:"disk_ms"`    // time in disks
	NetMs     float64 `json:"net_ms"`     // network time on the read path
	ForwardMs float64 `json:"forward_ms"` // network time of forwards, overflow and manager messages

	Server servercoop.Stats `json:"server_coop"`
	Client servercoop.Stats `json:"client_coop"`
}

// TotalMs is the whole simulated time.
func (s Stats) TotalMs() float64 { return s.MemMs + s.DiskMs + s.NetMs + s.ForwardMs }

// AvgMs is seed 004's average response time per block: all time, forwards
// included, over the reads.
func (s Stats) AvgMs() float64 {
	if s.Reads == 0 {
		return 0
	}
	return s.TotalMs() / float64(s.Reads)
}

// MissRate is seed 004's block miss rate: disk reads over reads.
func (s Stats) MissRate() float64 {
	if s.Reads == 0 {
		return 0
	}
	return float64(s.DiskReads) / float64(s.Reads)
}

// side is one side of the system: its members' caches, the overflow cache
// of the Global scheme and the cooperation policy.
type side struct {
	name     string
	node     func(m int) int // message-accounting node of member m
	caches   []*cache
	overflow *cache
	group    *servercoop.Group[sim.Key]
}

func newSide(name string, members, blocks int, sd Side, cfg Config, node func(int) int) (*side, error) {
	local := blocks
	var overflow *cache
	if sd.Scheme == servercoop.Global {
		total := blocks * members
		ov := int(float64(total)*cfg.GlobalFraction + 0.5)
		local = (total - ov) / members
		overflow = newLRU(ov)
	}
	g, err := servercoop.New[sim.Key](servercoop.Config{
		Members: members, Scheme: sd.Scheme, Target: sd.Target, ReturnOnHit: sd.ReturnOnHit,
		CacheEntries: local, RefRatio: cfg.RefRatio, MaxChain: cfg.MaxChain, Seed: cfg.Seed,
	})
	if err != nil {
		return nil, fmt.Errorf("%s side: %w", name, err)
	}
	s := &side{name: name, node: node, caches: make([]*cache, members), overflow: overflow, group: g}
	for i := range s.caches {
		s.caches[i] = newLRU(local)
	}
	return s, nil
}

// Sim simulates S NASD servers and C clients (seed 004). It implements
// sim.Algorithm: it puts its whole cost in Outcome.ExtraMs, so run it with
// the Params latencies zeroed (see ZeroLatencies), or read Stats.
type Sim struct {
	cfg     Config
	servers *side
	clients *side
	stats   Stats
	c       *sim.Counters // counters of the access in progress
	dummy   *sim.Counters
	// layerMs are the runner's per-layer latencies (indexed by sim.Layer),
	// subtracted from ExtraMs so that sim.Run's total is NASD's cost.
	layerMs [5]float64
}

// New returns a simulator for cfg.
func New(cfg Config) (*Sim, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.ServerOf == nil {
		n := uint64(cfg.Servers)
		cfg.ServerOf = func(a sim.Access) int { return int(a.File % n) }
	}
	sv, err := newSide("server", cfg.Servers, cfg.ServerCacheBlocks, cfg.Server, cfg, func(int) int { return sim.NodeServer })
	if err != nil {
		return nil, err
	}
	cl, err := newSide("client", cfg.Clients, cfg.ClientCacheBlocks, cfg.Client, cfg, func(m int) int { return m })
	if err != nil {
		return nil, err
	}
	p := sim.DefaultParams()
	p.Clients = cfg.Clients
	return &Sim{cfg: cfg, servers: sv, clients: cl, dummy: sim.NewCounters(p)}, nil
}

// Config returns the simulator's configuration.
func (s *Sim) Config() Config { return s.cfg }

// Stats returns the counts so far.
func (s *Sim) Stats() Stats {
	st := s.stats
	st.Server = s.servers.group.Stats()
	st.Client = s.clients.group.Stats()
	return st
}

// ResetStats forgets the counts (end of warm-up), keeping the caches.
func (s *Sim) ResetStats() { s.stats = Stats{} }

// NewFromParams builds a simulator from the simulator's common parameters
// (FromParams) for sim.Run: Outcome.ExtraMs is then NASD's cost minus the
// latency the runner charges for the layer, so that Metrics.AvgAccessMs is
// NASD's average access time whatever p's latencies.
func NewFromParams(p sim.Params) (*Sim, error) {
	cfg, err := FromParams(p)
	if err != nil {
		return nil, err
	}
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	s.layerMs = [5]float64{0, p.LocalMs, p.RemoteMs, p.ServerMs, p.DiskMs}
	return s, nil
}

// ZeroLatencies returns p with the latencies zeroed, for sim.Run: NASD
// reports its whole cost in Outcome.ExtraMs.
func ZeroLatencies(p sim.Params) sim.Params {
	p.LocalMs, p.RemoteMs, p.ServerMs, p.DiskMs, p.MessageMs = 0, 0, 0, 0, 0
	return p
}

// Access implements sim.Algorithm. Reads (and writes, which NASD treats as
// block accesses that need the block: the seed's model has no consistency
// traffic) go through the client's cache, the client side's cooperation,
// the owning server's cache, the server side's cooperation and the disk.
// Open, close and delete are ignored.
func (s *Sim) Access(a sim.Access, c *sim.Counters) sim.Outcome {
	if a.Op != sim.OpRead && a.Op != sim.OpWrite {
		return sim.Outcome{}
	}
	if c == nil {
		c = s.dummy
	}
	s.c = c
	srv := s.cfg.ServerOf(a)
	if srv < 0 || srv >= s.cfg.Servers {
		srv = ((srv % s.cfg.Servers) + s.cfg.Servers) % s.cfg.Servers
	}
	before := s.stats.TotalMs()
	layer := s.read(a.Client, srv, a.Key())
	s.stats.Reads++
	if a.Op != sim.OpRead {
		return sim.Outcome{}
	}
	return sim.Outcome{Layer: layer, ExtraMs: s.stats.TotalMs() - before - s.layerMs[layer]}
}

func (s *Sim) mem() { s.stats.MemMs += s.cfg.Cost.MemMs }
func (s *Sim) net(hops int, data bool) {
	t := s.cfg.Cost.NetLatMs
	if data {
		t += s.cfg.Cost.NetBlockMs
	}
	s.stats.NetMs += float64(hops) * t
}

// read serves one block for client cl from server srv and reports the layer.
func (s *Sim) read(cl, srv int, k sim.Key) sim.Layer {
	side := s.clients
	side.group.Observe(cl, 1)
	if side.caches[cl].touch(k) {
		s.mem()
		s.stats.LocalHits++
		return sim.LayerLocal
	}
	if s.remote(side, cl, k) {
		s.stats.RemoteClient++
		return sim.LayerRemote
	}
	layer := s.server(cl, srv, k)
	s.insert(side, cl, k, true, 0)
	return layer
}

// remote looks for k in the side's cooperative cache on behalf of member m
// (peer or overflow cache, one hop away) and reports a hit. A hit in the
// overflow cache, or a returned block, moves to m's cache.
func (s *Sim) remote(sd *side, m int, k sim.Key) bool {
	c := s.c
	loc := sd.group.Locate(m, k)
	switch loc.Where {
	case servercoop.Peer:
		p := loc.Peer
		s.net(1, false)
		c.Msg(sd.node(m), sd.node(p), false)
		c.Lookup(2)
		c.ForwardedReqs++
		if !sd.caches[p].touch(k) {
			s.net(1, false) // "not here"
			c.Msg(sd.node(p), sd.node(m), false)
			c.ForwardMisses++
			sd.group.RemoteMiss(m, k)
			return false
		}
		sd.group.Observe(p, 1)
		s.mem()
		s.net(1, true)
		c.Msg(sd.node(p), sd.node(m), true)
		if sd.group.RemoteHit(m, p, k) {
			sd.caches[p].remove(k)
			s.insert(sd, m, k, true, 0)
		}
		return true
	case servercoop.Overflow:
		s.net(1, false)
		c.Lookup(2)
		if !sd.overflow.remove(k) {
			s.net(1, false)
			return false
		}
		s.mem()
		s.net(1, true)
		s.insert(sd, m, k, true, 0)
		return true
	}
	return false
}

// server serves k from server srv to client cl, hops away: the server's
// cache, then the servers' cooperative cache (the block comes back through
// srv), then srv's disk.
func (s *Sim) server(cl, srv int, k sim.Key) sim.Layer {
	h := s.cfg.Hops
	sd := s.servers
	s.net(h, false)
	s.c.Msg(cl, sim.NodeServer, false)
	sd.group.Observe(srv, 1)
	layer := sim.LayerServer
	switch {
	case sd.caches[srv].touch(k):
		s.mem()
		s.stats.ServerHits++
	case s.remote(sd, srv, k):
		s.stats.RemoteServer++
	default:
		s.stats.DiskMs += s.cfg.Cost.DiskSeekMs + s.cfg.Cost.DiskBlockMs
		s.stats.DiskReads++
		s.insert(sd, srv, k, true, 0)
		layer = sim.LayerDisk
	}
	s.net(h, true)
	s.c.Msg(sim.NodeServer, cl, true)
	return layer
}

// insert caches k at member m of sd and deals with the victim as the
// side's policy says, forwarding it (one hop, plus the manager's request
// and reply for the Manager variant) and following the cascade.
func (s *Sim) insert(sd *side, m int, k sim.Key, owned bool, chain int) {
	victim, vOwned, ok := sd.caches[m].insert(k, owned)
	if !ok {
		return
	}
	e := sd.group.Evict(m, victim, vOwned, chain)
	cost := s.cfg.Cost
	switch e.Action {
	case servercoop.ToPeer:
		s.stats.ForwardMs += cost.NetLatMs + cost.NetBlockMs
		s.c.Msg(sd.node(m), sd.node(e.Peer), true)
		s.c.Forwards++
		s.c.Replacement(sim.ReplForward, 1)
		if e.AskedManager {
			s.stats.ForwardMs += 2 * cost.NetLatMs
			s.c.Manager(sim.CauseReplacement, 2)
			s.c.Msg(sd.node(m), sim.NodeManager, false)
			s.c.Msg(sim.NodeManager, sd.node(m), false)
		}
		if s.cfg.Observe != nil {
			s.cfg.Observe(Event{Side: sd.name, From: m, To: e.Peer, Key: victim, Owned: vOwned, Chain: chain})
		}
		s.insert(sd, e.Peer, victim, false, chain+1)
	case servercoop.ToOverflow:
		s.stats.ForwardMs += cost.NetLatMs + cost.NetBlockMs
		s.c.Forwards++
		if s.cfg.Observe != nil {
			s.cfg.Observe(Event{Side: sd.name, From: m, To: -1, Key: victim, Owned: vOwned, Chain: chain})
		}
		sd.overflow.insert(victim, false) // the overflow cache's victim is dropped
	}
}

// Check verifies the invariants: no cache holds more than its capacity,
// the lists are consistent, the reference lists are bounded.
func (s *Sim) Check() error {
	for _, sd := range []*side{s.servers, s.clients} {
		for m, l := range sd.caches {
			if err := l.check(); err != nil {
				return fmt.Errorf("%s %d cache: %w", sd.name, m, err)
			}
		}
		if sd.overflow != nil {
			if err := sd.overflow.check(); err != nil {
				return fmt.Errorf("%s overflow cache: %w", sd.name, err)
			}
		}
		if err := sd.group.Check(); err != nil {
			return fmt.Errorf("%s side: %w", sd.name, err)
		}
	}
	return nil
}

var (
	_ sim.Algorithm = (*Sim)(nil)
	_ sim.Checker   = (*Sim)(nil)
)
