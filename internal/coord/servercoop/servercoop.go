package servercoop

import (
	"errors"
	"fmt"
	"math/rand/v2"
)

// Scheme is how the members of a group cooperate.
type Scheme uint8

const (
	NonCoop   Scheme = iota // each member its own LRU cache (baseline)
	Global                  // victims go to one global overflow cache
	OneChance               // an owned victim is forwarded once to a peer
)

var schemeNames = [...]string{"noncoop", "global", "1chance"}

func (s Scheme) String() string {
	if int(s) < len(schemeNames) {
		return schemeNames[s]
	}
	return fmt.Sprintf("scheme(%d)", s)
}

// Letter is seed 004's one-letter name (figure 5): N, G or 1.
func (s Scheme) Letter() string {
	switch s {
	case NonCoop:
		return "N"
	case Global:
		return "G"
	case OneChance:
		return "1"
	}
	return "?"
}

// ParseScheme accepts noncoop, global, 1chance (and N, G, 1).
func ParseScheme(s string) (Scheme, error) {
	switch s {
	case "noncoop", "N", "n", "none":
		return NonCoop, nil
	case "global", "G", "g":
		return Global, nil
	case "1chance", "1", "onechance", "1-chance":
		return OneChance, nil
	}
	return 0, fmt.Errorf("unknown scheme %q: want noncoop, global or 1chance", s)
}

// Target is how 1-Chance picks the peer a victim is forwarded to.
type Target uint8

const (
	Manager Target = iota // least busy member, asked from the manager (default)
	Random                // a peer chosen uniformly at random
	Hints                 // fewest blocks sent to plus received from the peer
	Better                // least busy member, known by snooping (no manager message)
)

var targetNames = [...]string{"manager", "random", "hints", "better"}

func (t Target) String() string {
	if int(t) < len(targetNames) {
		return targetNames[t]
	}
	return fmt.Sprintf("target(%d)", t)
}

// ParseTarget accepts manager, random, hints, better.
func ParseTarget(s string) (Target, error) {
	for i, n := range targetNames {
		if s == n {
			return Target(i), nil
		}
	}
	return 0, fmt.Errorf("unknown 1-Chance target %q: want manager, random, hints or better", s)
}

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("invalid servercoop config")

// Config describes one group. Zero fields take the defaults noted.
type Config struct {
	Members      int    // members of the group (servers, or clients); at least 1
	Scheme       Scheme // NonCoop by default
	Target       Target // 1-Chance target variant; Manager by default
	ReturnOnHit  bool   // 1-Chance: a block hit at a peer goes back to its owner
	CacheEntries int    // blocks in one member's cache (sizes the reference list)
	RefRatio     int    // reference list entries per cache entry; default 6
	// MaxChain bounds a forwarding cascade: a block received from a peer
	// displaces the receiver's LRU victim, which is dropped (default 1: the
	// displaced block "is then discarded", as in the cooperative caching
	// algorithms of seed 002 §2.4), or, with MaxChain > 1, forwarded in turn
	// if the receiver owns it, up to MaxChain forwards in one cascade.
	MaxChain int
	// LoadHalfLife is the number of observed load units after which every
	// member's load is halved (the manager's sliding view). Default 4096.
	LoadHalfLife int
	Seed         uint64 // seeds Random target choice
}

func (c Config) withDefaults() Config {
	if c.RefRatio == 0 {
		c.RefRatio = 6
	}
	if c.MaxChain == 0 {
		c.MaxChain = 1
	}
	if c.LoadHalfLife == 0 {
		c.LoadHalfLife = 4096
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Members < 1:
		return fmt.Errorf("%w: members = %d, want at least 1", ErrConfig, c.Members)
	case c.Scheme > OneChance:
		return fmt.Errorf("%w: scheme %v", ErrConfig, c.Scheme)
	case c.Target > Better:
		return fmt.Errorf("%w: target %v", ErrConfig, c.Target)
	case c.CacheEntries < 0 || c.RefRatio < 0 || c.MaxChain < 0 || c.LoadHalfLife < 0:
		return fmt.Errorf("%w: sizes must not be negative", ErrConfig)
	}
	return nil
}

// Where a member looks after a local miss.
type Where uint8

const (
	Nowhere  Where = iota // go to the next layer (disk, or the server)
	Peer                  // ask the peer named by Location.Peer
	Overflow              // ask the global overflow cache
)

// Location is the answer of Locate.
type Location struct {
	Where Where
	Peer  int
}

// Action is what happens to a victim.
type Action uint8

const (
	Drop       Action = iota // forget the block
	ToPeer                   // forward it to Eviction.Peer, which always accepts it
	ToOverflow               // send it to the global overflow cache
)

// Eviction is the decision for one victim.
type Eviction struct {
	Action Action
	Peer   int
	// AskedManager is set when the target came from the manager (one
	// request and one reply, seed 004's default 1-Chance variant).
	AskedManager bool
}

// Stats are the group's decision counts.
type Stats struct {
	Forwards     int64 // victims forwarded to a peer
	ToOverflow   int64 // victims sent to the overflow cache
	Drops        int64 // victims dropped
	ForeignDrops int64 // ... of them, received blocks (the forward-once rule)
	ChainDrops   int64 // ... of them, owned blocks dropped at the cascade bound
	ManagerAsks  int64 // target requests to the manager
	RefHits      int64 // local misses the reference list pointed to a peer
	StaleRefs    int64 // ... where the peer no longer had the block
	RefForgotten int64 // references pushed out of a full reference list
	Returns      int64 // blocks returned to their owner on a remote hit
}

// Group is the cooperation state of one group, for block keys of type K.
//
// INVARIANT: every reference list holds at most RefRatio*CacheEntries
// entries, and never a reference to the member itself.
type Group[K comparable] struct {
	cfg   Config
	refs  []refList[K]
	load  []int64 // manager's view of each member's recent work
	seen  int64   // load units since the last halving
	sent  []int64 // sent[m*n+t]: blocks m forwarded to t (hints)
	recv  []int64 // recv[m*n+t]: blocks m received from t (hints)
	rng   *rand.Rand
	stats Stats
}

// New returns a group for cfg.
func New[K comparable](cfg Config) (*Group[K], error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := cfg.Members
	g := &Group[K]{
		cfg:  cfg,
		load: make([]int64, n),
		rng:  rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15)),
	}
	if cfg.Scheme == OneChance {
		g.refs = make([]refList[K], n)
		for i := range g.refs {
			g.refs[i] = newRefList[K](cfg.RefRatio * cfg.CacheEntries)
		}
		g.sent = make([]int64, n*n)
		g.recv = make([]int64, n*n)
	}
	return g, nil
}

// Config returns the group's configuration with defaults applied.
func (g *Group[K]) Config() Config { return g.cfg }

// Stats returns the decision counts so far.
func (g *Group[K]) Stats() Stats { return g.stats }

// Observe adds n units of work done by member m (requests it served) to the
// load view that Manager and Better use.
func (g *Group[K]) Observe(m, n int) {
	g.load[m] += int64(n)
	g.seen += int64(n)
	if g.seen >= int64(g.cfg.LoadHalfLife) {
		g.seen = 0
		for i := range g.load {
			g.load[i] /= 2
		}
	}
}

// Load returns member m's current load in the manager's view.
func (g *Group[K]) Load(m int) int64 { return g.load[m] }

// Locate says where member m looks for block k after missing it locally.
// For OneChance it consults (and refreshes) m's reference list.
func (g *Group[K]) Locate(m int, k K) Location {
	switch g.cfg.Scheme {
	case Global:
		return Location{Where: Overflow}
	case OneChance:
		if p, ok := g.refs[m].get(k); ok {
			g.stats.RefHits++
			return Location{Where: Peer, Peer: p}
		}
	}
	return Location{Where: Nowhere}
}

// RemoteHit tells the group that peer served block k for member m after
// Locate pointed there. It reports whether the block goes back to m (return
// on hit): then the caller moves the block from peer to m's cache, and m
// forgets the reference.
func (g *Group[K]) RemoteHit(m, peer int, k K) (returnToOwner bool) {
	if g.cfg.Scheme != OneChance || !g.cfg.ReturnOnHit {
		return false
	}
	g.refs[m].remove(k)
	g.stats.Returns++
	g.sent[peer*g.cfg.Members+m]++
	g.recv[m*g.cfg.Members+peer]++
	return true
}

// RemoteMiss tells the group that the peer Locate named no longer had block
// k (it was dropped there): m forgets the stale reference.
func (g *Group[K]) RemoteMiss(m int, k K) {
	if g.cfg.Scheme == OneChance {
		g.refs[m].remove(k)
		g.stats.StaleRefs++
	}
}

// Evict decides the fate of member m's LRU victim k. owned says whether the
// block is m's own (it entered m's cache from m's own miss, not as a
// forwarded block); chain is the number of forwards in the cascade that
// displaced it (0 when m's own insert did). For ToPeer, the group records
// the reference, the hints counters and the target's load; the caller
// inserts the block at the peer and hands the peer's victim back here with
// chain+1.
func (g *Group[K]) Evict(m int, k K, owned bool, chain int) Eviction {
	switch g.cfg.Scheme {
	case Global:
		g.stats.ToOverflow++
		return Eviction{Action: ToOverflow}
	case OneChance:
		switch {
		case !owned:
			g.stats.ForeignDrops++
		case chain >= g.cfg.MaxChain:
			g.stats.ChainDrops++
		case g.cfg.Members < 2 || g.cfg.CacheEntries == 0 || g.cfg.RefRatio == 0:
			// nobody to forward to, or no way to find the block again
		default:
			return g.forward(m, k)
		}
	}
	g.stats.Drops++
	return Eviction{Action: Drop}
}

func (g *Group[K]) forward(m int, k K) Eviction {
	n := g.cfg.Members
	var t int
	asked := false
	switch g.cfg.Target {
	case Manager, Better:
		t = g.argmin(m, func(i int) int64 { return g.load[i] })
		asked = g.cfg.Target == Manager
	case Random:
		t = g.rng.IntN(n - 1)
		if t >= m {
			t++
		}
	case Hints:
		t = g.argmin(m, func(i int) int64 { return g.sent[m*n+i] + g.recv[m*n+i] })
	}
	if g.refs[m].put(k, t) {
		g.stats.RefForgotten++
	}
	g.sent[m*n+t]++
	g.recv[t*n+m]++
	g.Observe(t, 1)
	g.stats.Forwards++
	if asked {
		g.stats.ManagerAsks++
	}
	return Eviction{Action: ToPeer, Peer: t, AskedManager: asked}
}

// argmin returns the member other than m with the smallest f, scanning from
// m+1 so that ties spread over the members.
func (g *Group[K]) argmin(m int, f func(int) int64) int {
	n := g.cfg.Members
	best, bestV := -1, int64(0)
	for d := 1; d < n; d++ {
		i := (m + d) % n
		if v := f(i); best < 0 || v < bestV {
			best, bestV = i, v
		}
	}
	return best
}

// RefLen returns the number of references member m holds.
func (g *Group[K]) RefLen(m int) int {
	if g.refs == nil {
		return 0
	}
	return g.refs[m].len()
}

// Check verifies the group's invariants.
func (g *Group[K]) Check() error {
	for m := range g.refs {
		r := &g.refs[m]
		if r.len() > r.capacity {
			return fmt.Errorf("member %d: reference list holds %d entries, capacity %d", m, r.len(), r.capacity)
		}
		if err := r.check(m); err != nil {
			return fmt.Errorf("member %d: %w", m, err)
		}
	}
	return nil
}
