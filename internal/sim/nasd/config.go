package nasd

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/coopfs/coopfs/internal/coord/servercoop"
	"github.com/coopfs/coopfs/internal/sim"
)

// Cost is seed 004's cost model (table 2), in milliseconds.
type Cost struct {
	DiskSeekMs  float64 `json:"disk_seek_ms"`  // 14 ms
	DiskBlockMs float64 `json:"disk_block_ms"` // 1 ms per block transferred
	MemMs       float64 `json:"mem_ms"`        // 0.25 ms per block, any cache
	NetLatMs    float64 `json:"net_lat_ms"`    // 0.2 ms per message per hop
	NetBlockMs  float64 `json:"net_block_ms"`  // 0.4 ms per block per hop
}

// DefaultCost is seed 004 table 2.
func DefaultCost() Cost {
	return Cost{DiskSeekMs: 14, DiskBlockMs: 1, MemMs: 0.25, NetLatMs: 0.2, NetBlockMs: 0.4}
}

// Side is the cooperation scheme of one side (the servers or the clients).
type Side struct {
	Scheme      servercoop.Scheme `json:"scheme"`
	Target      servercoop.Target `json:"target"`
	ReturnOnHit bool              `json:"return_on_hit"`
}

// Label is seed 004's name of a 1-Chance variant or of a scheme: N, G,
// 1chance-manager, 1chance-random, ..., 1chance-return.
func (s Side) Label() string {
	if s.Scheme != servercoop.OneChance {
		return s.Scheme.String()
	}
	if s.ReturnOnHit {
		if s.Target == servercoop.Manager {
			return "1chance-return"
		}
		return "1chance-" + s.Target.String() + "-return"
	}
	return "1chance-" + s.Target.String()
}

// Config is a NASD system: S storage servers, C clients, the cost model and
// the scheme on each side. DefaultConfig is seed 004 table 2.
type Config struct {
	Servers           int     `json:"servers"`             // 8
	Clients           int     `json:"clients"`             // 20
	ServerCacheBlocks int     `json:"server_cache_blocks"` // 8192 per server
	ClientCacheBlocks int     `json:"client_cache_blocks"` // 2048 per client
	RefRatio          int     `json:"refratio"`            // 6
	GlobalFraction    float64 `json:"global_fraction"`     // 0.75 of the side's total cache
	Hops              int     `json:"hops"`                // hops between clients and servers: 1
	// MaxChain bounds forwarding cascades (servercoop.Config.MaxChain);
	// 0 means 1: a block displaced by a received one is dropped.
	MaxChain int    `json:"max_chain"`
	Cost     Cost   `json:"cost"`
	Server   Side   `json:"server"`
	Client   Side   `json:"client"`
	Seed     uint64 `json:"seed"`
	// ServerOf names the server that stores an access's block; nil means
	// File mod Servers (the convention of this package's generator).
	ServerOf func(sim.Access) int `json:"-"`
	// Observe, if set, sees every forward, for tests.
	Observe func(Event) `json:"-"`
}

// DefaultConfig returns seed 004 table 2 with 1-Chance (manager) on the
// servers and non-cooperative clients, the seed's best combination.
func DefaultConfig() Config {
	return Config{
		Servers: 8, Clients: 20, ServerCacheBlocks: 8192, ClientCacheBlocks: 2048,
		RefRatio: 6, GlobalFraction: 0.75, Hops: 1, Cost: DefaultCost(),
		Server: Side{Scheme: servercoop.OneChance, Target: servercoop.Manager},
		Client: Side{Scheme: servercoop.NonCoop},
		Seed:   1,
	}
}

func (c Config) validate() error {
	switch {
	case c.Servers < 1 || c.Clients < 1:
		return fmt.Errorf("%w: %d servers, %d clients; want at least 1 of each", sim.ErrConfig, c.Servers, c.Clients)
	case c.ServerCacheBlocks < 0 || c.ClientCacheBlocks < 0:
		return fmt.Errorf("%w: cache sizes must not be negative", sim.ErrConfig)
	case c.RefRatio < 0:
		return fmt.Errorf("%w: refratio = %d, want >= 0", sim.ErrConfig, c.RefRatio)
	case c.GlobalFraction < 0 || c.GlobalFraction > 1:
		return fmt.Errorf("%w: global fraction = %g, want 0..1", sim.ErrConfig, c.GlobalFraction)
	case c.Hops < 0:
		return fmt.Errorf("%w: hops = %d, want >= 0", sim.ErrConfig, c.Hops)
	case c.Cost.DiskSeekMs < 0 || c.Cost.DiskBlockMs < 0 || c.Cost.MemMs < 0 || c.Cost.NetLatMs < 0 || c.Cost.NetBlockMs < 0:
		return fmt.Errorf("%w: costs must not be negative", sim.ErrConfig)
	}
	return nil
}

// Option keys understood by FromParams (sim.Params.Options).
const (
	OptServers        = "servers"         // number of storage servers (8)
	OptServerScheme   = "server_scheme"   // noncoop | global | 1chance
	OptServerTarget   = "server_target"   // manager | random | hints | better
	OptServerReturn   = "server_return"   // true | false: return on hit
	OptClientScheme   = "client_scheme"   // noncoop | global | 1chance
	OptClientTarget   = "client_target"   // manager | random | hints | better
	OptClientReturn   = "client_return"   // true | false
	OptRefRatio       = "refratio"        // 6
	OptHops           = "hops"            // 1
	OptGlobalFraction = "global_fraction" // 0.75
)

// FromParams builds a Config from the simulator's common parameters: the
// number of clients, the cache sizes and the seed come from p, the rest
// from p.Options (keys above) over DefaultConfig. p's latencies are not
// used: NASD has its own cost model (seed 004 table 2).
func FromParams(p sim.Params) (Config, error) {
	c := DefaultConfig()
	c.Clients = p.Clients
	c.ClientCacheBlocks = p.ClientCacheBlocks
	c.ServerCacheBlocks = p.ServerCacheBlocks
	c.Seed = uint64(p.Seed)
	var err error
	atoi := func(key string, dst *int) {
		if v, ok := p.Options[key]; ok && err == nil {
			var n int
			if n, err = strconv.Atoi(v); err != nil {
				err = fmt.Errorf("%w: option %s=%q: %w", sim.ErrConfig, key, v, err)
				return
			}
			*dst = n
		}
	}
	side := func(prefix string, s *Side) {
		if v, ok := p.Options[prefix+"_scheme"]; ok && err == nil {
			s.Scheme, err = servercoop.ParseScheme(v)
		}
		if v, ok := p.Options[prefix+"_target"]; ok && err == nil {
			s.Target, err = servercoop.ParseTarget(v)
		}
		if v, ok := p.Options[prefix+"_return"]; ok && err == nil {
			s.ReturnOnHit, err = strconv.ParseBool(v)
		}
		if err != nil && !errors.Is(err, sim.ErrConfig) {
			err = fmt.Errorf("%w: %w", sim.ErrConfig, err)
		}
	}
	atoi(OptServers, &c.Servers)
	atoi(OptRefRatio, &c.RefRatio)
	atoi(OptHops, &c.Hops)
	side("server", &c.Server)
	side("client", &c.Client)
	if v, ok := p.Options[OptGlobalFraction]; ok && err == nil {
		if c.GlobalFraction, err = strconv.ParseFloat(v, 64); err != nil {
			err = fmt.Errorf("%w: option %s=%q: %w", sim.ErrConfig, OptGlobalFraction, v, err)
		}
	}
	if err != nil {
		return Config{}, err
	}
	return c, c.validate()
}
