package nasd

import (
	"context"
	"math"
	"testing"

	"github.com/coopfs/coopfs/internal/coord/servercoop"
	"github.com/coopfs/coopfs/internal/sim"
)

// tiny returns a config with small caches and the given schemes.
func tiny(servers, clients, serverBlocks, clientBlocks int, sv, cl Side) Config {
	c := DefaultConfig()
	c.Servers, c.Clients = servers, clients
	c.ServerCacheBlocks, c.ClientCacheBlocks = serverBlocks, clientBlocks
	c.Server, c.Client = sv, cl
	return c
}

// rd is a read by client cl of block b of a file stored on server srv.
func rd(cl, srv int, b uint64) sim.Access {
	return sim.Access{Client: cl, File: uint64(srv), Block: b, Op: sim.OpRead}
}

func replay(t *testing.T, cfg Config, as ...sim.Access) (*Sim, []sim.Outcome) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var outs []sim.Outcome
	for _, a := range as {
		outs = append(outs, s.Access(a, nil))
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
	}
	return s, outs
}

var (
	noncoop  = Side{Scheme: servercoop.NonCoop}
	global   = Side{Scheme: servercoop.Global}
	oneMgr   = Side{Scheme: servercoop.OneChance, Target: servercoop.Manager}
	oneRet   = Side{Scheme: servercoop.OneChance, Target: servercoop.Manager, ReturnOnHit: true}
	oneBette = Side{Scheme: servercoop.OneChance, Target: servercoop.Better}
)

func wantStats(t *testing.T, got Stats, local, rclient, server, rserver, disk int64) {
	t.Helper()
	if got.LocalHits != local || got.RemoteClient != rclient || got.ServerHits != server ||
		got.RemoteServer != rserver || got.DiskReads != disk {
		t.Fatalf("hits local/remote client/server/remote server/disk = %d/%d/%d/%d/%d, want %d/%d/%d/%d/%d",
			got.LocalHits, got.RemoteClient, got.ServerHits, got.RemoteServer, got.DiskReads,
			local, rclient, server, rserver, disk)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// With one client, no server cache and noncoop everywhere, the client is
// exactly LRU.
func TestNonCoopIsLRU(t *testing.T) {
	s, _ := replay(t, tiny(1, 1, 0, 2, noncoop, noncoop),
		rd(0, 0, 1), rd(0, 0, 2), rd(0, 0, 1), rd(0, 0, 3), rd(0, 0, 2), rd(0, 0, 1))
	wantStats(t, s.Stats(), 1, 0, 0, 0, 5)
	// 5 disk reads at 0.2 + 15 + 0.6, one local hit at 0.25.
	if got := s.Stats().TotalMs(); !near(got, 5*15.8+0.25) {
		t.Fatalf("total = %v ms", got)
	}
}

// Server 0 owns a, b, c with room for two; server 1 is idle.
func TestOneChanceServerHandChecked(t *testing.T) {
	s, outs := replay(t, tiny(2, 1, 2, 0, oneMgr, noncoop),
		rd(0, 0, 1), rd(0, 0, 2), rd(0, 0, 3), // c evicts a: forwarded to server 1
		rd(0, 0, 1), // remote server hit, stays at server 1
		rd(0, 0, 2), // server hit
		rd(0, 0, 1)) // remote again (no return)
	wantStats(t, s.Stats(), 0, 0, 1, 2, 3)
	want := []float64{15.8, 15.8, 15.8 + 0.6 + 0.4, 1.85, 1.05, 1.85}
	for i, o := range outs {
		if !near(o.ExtraMs, want[i]) {
			t.Fatalf("access %d took %v ms, want %v", i, o.ExtraMs, want[i])
		}
	}
	if outs[3].Layer != sim.LayerServer || outs[2].Layer != sim.LayerDisk {
		t.Fatalf("layers %v %v", outs[2].Layer, outs[3].Layer)
	}
	if st := s.Stats().Server; st.Forwards != 1 || st.ManagerAsks != 1 {
		t.Fatalf("server coop stats %+v", st)
	}
}

func TestOneChanceReturnOnHit(t *testing.T) {
	s, outs := replay(t, tiny(2, 1, 2, 0, oneRet, noncoop),
		rd(0, 0, 1), rd(0, 0, 2), rd(0, 0, 3), // a forwarded to 1
		rd(0, 0, 1), // remote hit, a returns; b (LRU) is forwarded
		rd(0, 0, 2), // remote hit, b returns; c is forwarded
		rd(0, 0, 1)) // a is home: server hit
	wantStats(t, s.Stats(), 0, 0, 1, 2, 3)
	if !near(outs[3].ExtraMs, 1.85+1.0) || !near(outs[5].ExtraMs, 1.05) {
		t.Fatalf("times %v", outs)
	}
	if st := s.Stats().Server; st.Returns != 2 || st.Forwards != 3 {
		t.Fatalf("server coop stats %+v", st)
	}
}

// The Better variant makes the same choices without the manager's messages.
func TestBetterSavesManagerMessages(t *testing.T) {
	tr := []sim.Access{rd(0, 0, 1), rd(0, 0, 2), rd(0, 0, 3), rd(0, 0, 1)}
	m, _ := replay(t, tiny(2, 1, 2, 0, oneMgr, noncoop), tr...)
	b, _ := replay(t, tiny(2, 1, 2, 0, oneBette, noncoop), tr...)
	wantStats(t, b.Stats(), 0, 0, 0, 1, 3)
	if d := m.Stats().TotalMs() - b.Stats().TotalMs(); !near(d, 0.4) {
		t.Fatalf("manager - better = %v ms, want 0.4", d)
	}
}

// Global: 2 servers × 4 blocks = 8; the overflow cache takes 6, each server
// keeps 1.
func TestGlobalServerHandChecked(t *testing.T) {
	s, outs := replay(t, tiny(2, 1, 4, 0, global, noncoop),
		rd(0, 0, 1), rd(0, 0, 2), // a to the overflow cache
		rd(0, 0, 1), // overflow hit: a comes back, b goes out
		rd(0, 1, 9), // server 1: disk
		rd(0, 0, 2)) // overflow hit
	wantStats(t, s.Stats(), 0, 0, 0, 2, 3)
	if !near(outs[2].ExtraMs, 0.2+0.2+0.25+0.6+0.6+0.6) {
		t.Fatalf("overflow hit took %v ms", outs[2].ExtraMs)
	}
	if n := s.servers.caches[0].capacity; n != 1 || s.servers.overflow.capacity != 6 {
		t.Fatalf("capacities %d, %d", n, s.servers.overflow.capacity)
	}
}

// Client side 1-Chance: client 0's victim goes to client 1 and is hit there.
func TestOneChanceClientHandChecked(t *testing.T) {
	s, outs := replay(t, tiny(1, 2, 100, 1, noncoop, oneMgr),
		rd(0, 0, 1), rd(0, 0, 2), // x forwarded to client 1
		rd(0, 0, 1), // remote client hit: 0.2 + 0.25 + 0.6
		rd(1, 0, 7), // client 1 reads its own block: the foreign x is dropped
		// Stale reference: 0.4 wasted, then the server's cache (1.05).
		// Caching x evicts y, forwarded to client 1 (0.6 + manager 0.4),
		// whose own 7 is displaced and discarded (the cascade bound).
		rd(0, 0, 1))
	wantStats(t, s.Stats(), 0, 1, 1, 0, 3)
	if !near(outs[2].ExtraMs, 1.05) || !near(outs[4].ExtraMs, 0.4+1.05+1.0) {
		t.Fatalf("times %v", outs)
	}
	if st := s.Stats().Client; st.ForeignDrops != 1 || st.StaleRefs != 1 || st.ChainDrops != 1 || st.Forwards != 2 {
		t.Fatalf("client coop stats %+v", st)
	}
}

func TestHopsScaleServerPath(t *testing.T) {
	cfg := tiny(1, 1, 10, 0, noncoop, noncoop)
	cfg.Hops = 3
	_, outs := replay(t, cfg, rd(0, 0, 1), rd(0, 0, 1))
	if !near(outs[0].ExtraMs, 3*0.2+15+3*0.6) || !near(outs[1].ExtraMs, 3*0.2+0.25+3*0.6) {
		t.Fatalf("times %v", outs)
	}
}

func TestFromParams(t *testing.T) {
	p := sim.DefaultParams()
	p.Clients, p.ClientCacheBlocks, p.ServerCacheBlocks = 20, 2048, 8192
	p = p.WithOption(OptServerScheme, "global").WithOption(OptClientScheme, "1chance").
		WithOption(OptClientTarget, "hints").WithOption(OptHops, "4")
	c, err := FromParams(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Scheme != servercoop.Global || c.Client.Target != servercoop.Hints || c.Hops != 4 || c.Servers != 8 {
		t.Fatalf("config %+v", c)
	}
	if _, err := FromParams(p.WithOption(OptServerTarget, "nope")); err == nil {
		t.Fatal("bad target accepted")
	}
}

// With MaxChain 2 the receiver forwards its own displaced block on.
func TestCascade(t *testing.T) {
	cfg := tiny(1, 2, 100, 1, noncoop, oneMgr)
	cfg.MaxChain = 2
	s, outs := replay(t, cfg, rd(0, 0, 1), rd(0, 0, 2), rd(0, 0, 1), rd(1, 0, 7), rd(0, 0, 1))
	// y goes to client 1, whose own 7 is forwarded back to client 0 (1.0),
	// displacing x, which is client 0's own but at the bound: dropped.
	if !near(outs[4].ExtraMs, 0.4+1.05+1.0+1.0) {
		t.Fatalf("cascade access took %v ms", outs[4].ExtraMs)
	}
	if st := s.Stats().Client; st.Forwards != 3 || st.ChainDrops != 1 {
		t.Fatalf("client coop stats %+v", st)
	}
}

// Through sim.Run, with any Params latencies, the average is NASD's cost.
func TestSimRunAccountsNASDCost(t *testing.T) {
	p := sim.DefaultParams()
	p.Clients, p.ClientCacheBlocks, p.ServerCacheBlocks, p.WarmUp = 1, 2, 0, 0
	p = p.WithOption(OptServers, "1").WithOption(OptServerScheme, "noncoop")
	alg, err := NewFromParams(p)
	if err != nil {
		t.Fatal(err)
	}
	w := &sim.Slice{Label: "t", Accesses: []sim.Access{rd(0, 0, 1), rd(0, 0, 2), rd(0, 0, 1), rd(0, 0, 3), rd(0, 0, 2), rd(0, 0, 1)}}
	m, err := sim.Run(context.Background(), w, alg, p, sim.RunOptions{Algorithm: "nasd"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (5*15.8 + 0.25) / 6; !near(m.AvgAccessMs, want) || m.Hits.Local != 1 || m.Hits.Disk != 5 {
		t.Fatalf("avg %v ms (want %v), hits %+v", m.AvgAccessMs, want, m.Hits)
	}
}
