package directory

import (
	"errors"
	"fmt"
	"time"
)

// ErrConfig marks an invalid Config or HolderConfig.
var ErrConfig = errors.New("invalid directory configuration")

// Defaults.
const (
	DefaultEntries       = 1 << 20 // blocks tracked: 4 GiB of 4 KiB blocks
	DefaultMissThreshold = 4
	DefaultPingTimeout   = 2 * time.Second
	DefaultForwardMemory = 1 << 14
	DefaultForwardTTL    = time.Minute
	DefaultQueueLen      = 400 // seed 000's page discard queue length
	DefaultLoadHalfLife  = 5 * time.Second
	// NoForwardMemory as Config.ForwardMemory remembers no forwards.
	NoForwardMemory = -1
)

// Config is the server-side directory's configuration. Zero fields take the
// defaults.
type Config struct {
	// Entries bounds the number of blocks the directory tracks; the least
	// recently used entry is recycled when a new one is needed.
	Entries int
	// MissThreshold is the number of consecutive forward misses (requests
	// that came back as Retry) after which the server pings the client.
	// The count clears on any request or discard notification from it.
	MissThreshold int
	// PingTimeout is how long Tick waits for PingOK before it marks a
	// pinged client failed. The live server may instead time pings out
	// itself and call PingFailed.
	PingTimeout time.Duration
	// ForwardMemory is the number of recent forwards remembered so that a
	// Retry that does not name the holder (the requester timed out) can
	// still blame it: the seed's request cache. NoForwardMemory keeps none,
	// for a caller that always names the holder (the simulator, whose
	// requests never time out): a Retry without one then blames no one.
	ForwardMemory int
	// ForwardTTL is how long a remembered forward stays valid for that.
	ForwardTTL time.Duration
	// ServerLast takes the server out of the round robin: it serves a block
	// from its memory only when no client can be forwarded to. The seed puts
	// the server in the rotation while it holds the block (false, the
	// default); when the server's link is the bottleneck — many clients
	// reading the same data at once — every block it sends again is
	// bandwidth the clients' links could have carried instead.
	ServerLast bool
	// Balanced replaces the round robin with the least-loaded holder: the
	// one with the fewest forwards in the last LoadHalfLife or so (ties in
	// rotation order); the server serves only blocks no client holds, as
	// with ServerLast.
	Balanced bool
	// LoadHalfLife is the half-life of a client's forward count (Balanced).
	LoadHalfLife time.Duration
	// Swarm (with Balanced) tells holders that have a block from those
	// still receiving it (swarm.go): a forward goes to the holder with the
	// least load plus depth of waits, and never makes a wait deeper than
	// MaxDepth while a shallower holder exists. The requesters confirm
	// their blocks with Confirm. The simulator, whose blocks arrive at
	// once, leaves it off.
	Swarm bool
	// MaxDepth bounds the chains of waiting holders (Swarm).
	MaxDepth int
	// PendingTTL is how long an unconfirmed record keeps its depth (Swarm).
	PendingTTL time.Duration
	// Dense says that the caller numbers blocks densely: every block.ID it
	// passes is {File: the file, Index: the block's number}, a small
	// integer from 1 naming one block across all files (the simulator's
	// sim.IDs). The directory then finds an entry through a slice of
	// handles indexed by the number, and the server's memory in a bit of
	// the same slots, instead of hash tables; both grow with the largest number seen, not
	// with the entries, so the live server (whose ids are inode numbers and
	// block indexes) leaves it false.
	Dense bool
}

func (c Config) withDefaults() Config {
	if c.Entries == 0 {
		c.Entries = DefaultEntries
	}
	if c.MissThreshold == 0 {
		c.MissThreshold = DefaultMissThreshold
	}
	if c.PingTimeout == 0 {
		c.PingTimeout = DefaultPingTimeout
	}
	if c.ForwardMemory == 0 {
		c.ForwardMemory = DefaultForwardMemory
	}
	if c.ForwardTTL == 0 {
		c.ForwardTTL = DefaultForwardTTL
	}
	if c.LoadHalfLife == 0 {
		c.LoadHalfLife = DefaultLoadHalfLife
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	if c.PendingTTL == 0 {
		c.PendingTTL = DefaultPendingTTL
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Entries < 1:
		return fmt.Errorf("%w: entries = %d, want at least 1 (or 0 for the default %d)", ErrConfig, c.Entries, DefaultEntries)
	case c.MissThreshold < 1:
		return fmt.Errorf("%w: miss threshold = %d, want at least 1", ErrConfig, c.MissThreshold)
	case c.PingTimeout < 0:
		return fmt.Errorf("%w: ping timeout = %v, want > 0", ErrConfig, c.PingTimeout)
	case c.ForwardMemory < 1 && c.ForwardMemory != NoForwardMemory:
		return fmt.Errorf("%w: forward memory = %d, want at least 1 (or %d for none)", ErrConfig, c.ForwardMemory, NoForwardMemory)
	case c.MaxDepth < 1:
		return fmt.Errorf("%w: max depth = %d, want at least 1", ErrConfig, c.MaxDepth)
	case c.PendingTTL < 0:
		return fmt.Errorf("%w: pending TTL = %v, want > 0", ErrConfig, c.PendingTTL)
	case c.ForwardTTL < 0:
		return fmt.Errorf("%w: forward TTL = %v, want > 0", ErrConfig, c.ForwardTTL)
	}
	return nil
}

// HolderConfig is the client-side configuration. Zero fields take the
// defaults, so the zero value has notifications on with a 400-entry queue.
type HolderConfig struct {
	// QueueLen is the discard queue length: a batch is sent when this many
	// evicted blocks are queued (seed 000: 400).
	QueueLen int
	// NoNotify turns discard notifications off (batched and on demand), for
	// the seed's comparison (tables 4 and 5).
	NoNotify bool
}

func (c HolderConfig) withDefaults() HolderConfig {
	if c.QueueLen == 0 {
		c.QueueLen = DefaultQueueLen
	}
	return c
}

func (c HolderConfig) validate() error {
	if c.QueueLen < 1 {
		return fmt.Errorf("%w: discard queue length = %d, want at least 1 (or 0 for the default %d)", ErrConfig, c.QueueLen, DefaultQueueLen)
	}
	return nil
}
