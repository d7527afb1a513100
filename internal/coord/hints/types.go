package hints

import (
	"errors"
	"math"

	"github.com/coopfs/coopfs/internal/block"
)

// ClientID names a participant: a client machine, or the server memory when
// it is used as part of the cooperative cache (ServerConfig.CoopID).
type ClientID int32

// NoClient is the zero value of "no participant".
const NoClient ClientID = -1

// BootID identifies one life of a participant; it grows on every restart.
type BootID uint64

// Time is a stamp: the time of an event or of a block's last reference.
// Only its order matters. Smaller is older.
type Time int64

// Free is the age of free memory: older than any block (the seed's INF).
const Free Time = math.MinInt64

// Hint says where the master copy of a block probably is.
type Hint struct {
	Holder ClientID
	Boot   BootID // Holder's boot id when the hint was made
	Since  Time   // when the master copy reached Holder, as far as known
}

// BlockHint is a hint for one block, as handed out on open.
type BlockHint struct {
	Index uint64 // block index in the file
	Hint
}

// RouteKind says what to do with a block request.
type RouteKind uint8

const (
	// RouteLocal: the block is here (a local hit, or serve it to the peer).
	RouteLocal RouteKind = iota
	// RoutePeer: send the request to Route.Peer, the hinted holder.
	RoutePeer
	// RouteServer: send the request to the server.
	RouteServer
)

func (k RouteKind) String() string {
	switch k {
	case RouteLocal:
		return "local"
	case RoutePeer:
		return "peer"
	case RouteServer:
		return "server"
	}
	return "route(?)"
}

// Route is the answer to a read or a request.
type Route struct {
	Kind RouteKind
	Peer ClientID // RoutePeer: the hinted holder
	Boot BootID   // RoutePeer: the boot id the hint names
	// Master is set on RouteLocal for ServeRequest when the copy served is
	// the master copy (the requester then hints the server of the reply).
	Master bool
	// HintUsed is set on a local miss when a usable hint named a peer
	// (RoutePeer); StaleHint when a hint was dropped for a stale boot id or
	// a failed holder.
	HintUsed, StaleHint bool
	// Stale is set when a cached copy of an older version was dropped on
	// the way (a lazy invalidation).
	Stale bool
}

// EvictKind says what became of a block evicted from a client cache.
type EvictKind uint8

const (
	EvictNone    EvictKind = iota // nothing was evicted
	EvictDrop                     // dropped (not a master copy, or believed globally oldest)
	EvictForward                  // forward the master copy to Eviction.To (best-guess target)
	EvictDiscard                  // send the young master copy to the server's discard cache
)

func (k EvictKind) String() string {
	return [...]string{"none", "drop", "forward", "discard"}[k]
}

// Eviction is the replacement action that follows an insertion.
type Eviction struct {
	Kind    EvictKind
	Block   block.ID
	Version block.Version // the file version of the evicted data
	Master  bool          // the evicted copy was a master copy
	Stamp   Time          // its age (last reference)
	// EvictForward: the target and the boot id the sender believes it has,
	// and the sender's oldest block after the eviction (the age exchange
	// rides on the forward).
	To         ClientID
	ToBoot     BootID
	FromOldest Time
}

// ForwardAck is the target's answer to a forwarded master copy: the age of
// its oldest block (the other half of the age exchange), and what its own
// eviction did (EvictDiscard: send Victim to the server's discard cache).
type ForwardAck struct {
	Oldest BootAge
	Victim Eviction
}

// BootAge is an oldest-block age tagged with the sender's boot id.
type BootAge struct {
	Age  Time
	Boot BootID
}

// DiscardTest chooses the heuristic that declares a replacement a mistake
// (seed 002 section 4.5.2).
type DiscardTest uint8

const (
	// DiscardPessimistic: a master copy is young (sent to the discard
	// cache) if it is younger than ANY block in the oldest-block list. The
	// seed's choice and the default.
	DiscardPessimistic DiscardTest = iota
	// DiscardOptimistic: young only if younger than ALL entries.
	DiscardOptimistic
	// DiscardNever: never send to the discard cache (server memory used
	// otherwise).
	DiscardNever
)

// ErrConfig marks an invalid configuration.
var ErrConfig = errors.New("invalid hints configuration")
