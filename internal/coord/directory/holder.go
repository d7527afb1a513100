package directory

import (
	"fmt"
	"slices"

	"github.com/coopfs/coopfs/internal/block"
)

// State is the local cache state of a block at a holder.
type State uint8

const (
	Absent  State = iota // not cached (never, or evicted)
	Pending              // space reserved, data on its way (the client asked for it)
	Present              // cached
)

func (s State) String() string {
	switch s {
	case Absent:
		return "absent"
	case Pending:
		return "pending"
	case Present:
		return "present"
	}
	return fmt.Sprintf("state(%d)", s)
}

// Local is what the holder's cache says about a block: its state and, when
// Pending or Present, the file version the copy belongs to.
type Local struct {
	State   State
	Version block.Version
}

// Answer is a holder's answer to a forwarded request.
type Answer uint8

const (
	// Send: send the block to the requester now.
	Send Answer = iota + 1
	// Wait: the block is pending; when its data arrives call Forward again
	// (with Present, or Absent if the fetch failed) and act on that answer.
	Wait
	// Negative: send a negative reply to the requester, who asks the server
	// again (Directory.Retry).
	Negative
)

func (a Answer) String() string {
	switch a {
	case Send:
		return "send"
	case Wait:
		return "wait"
	case Negative:
		return "negative"
	}
	return fmt.Sprintf("answer(%d)", a)
}

// Reply is what the holder must do about one forward.
type Reply struct {
	Answer Answer
	// DropFile: the local copy is older than the server's version: drop
	// every cached block of the file and adopt the forward's version for
	// its attributes. (Dropped blocks need not be queued as discards: the
	// server already dropped the file's entries.)
	DropFile bool
	// Notify, when not nil, is a discard notification to send to the
	// server now (on demand). The caller owns the slice.
	Notify []block.ID
}

// HolderStats are the client-side counters.
type HolderStats struct {
	Forwards       uint64 // forwards received
	Sent           uint64 // answered Send: forward hits
	Waited         uint64 // answered Wait
	Misses         uint64 // answered Negative because the block was absent
	Stale          uint64 // answered Negative because the local copy was older
	Newer          uint64 // answered Negative because the local copy was newer
	Evictions      uint64 // Evicted calls
	Batched        uint64 // notifications sent because the queue was full
	OnDemand       uint64 // notifications sent at once on a forward miss
	NotifiedBlocks uint64 // block ids in all notifications
	Queued         int    // discard queue length now
}

// Holder is the client-side state machine: it answers forwards and keeps the
// discard queue. Not safe for concurrent use.
type Holder struct {
	cfg   HolderConfig
	queue []block.ID
	stats HolderStats
}

// NewHolder returns a holder with an empty discard queue.
func NewHolder(cfg HolderConfig) (*Holder, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Holder{cfg: cfg}, nil
}

// Config returns the configuration in use (defaults filled in).
func (h *Holder) Config() HolderConfig { return h.cfg }

// Forward answers a request for id forwarded by the server with the file's
// version v, given the block's local state. The copy must be of exactly
// version v to be sent or waited for; an older copy drops the file, a newer
// one (unflushed local writes) is not sent. An absent block flushes the
// discard queue on demand (with id added, so the server stops forwarding
// for it even if the requester never retries).
func (h *Holder) Forward(id block.ID, v block.Version, local Local) Reply {
	h.stats.Forwards++
	if local.State != Absent {
		switch {
		case local.Version < v:
			h.stats.Stale++
			return Reply{Answer: Negative, DropFile: true}
		case local.Version > v:
			h.stats.Newer++
			return Reply{Answer: Negative}
		case local.State == Present:
			h.stats.Sent++
			return Reply{Answer: Send}
		default:
			h.stats.Waited++
			return Reply{Answer: Wait}
		}
	}
	h.stats.Misses++
	if h.cfg.NoNotify {
		return Reply{Answer: Negative}
	}
	if !slices.Contains(h.queue, id) { // on demand only: O(QueueLen) is fine
		h.queue = append(h.queue, id)
	}
	h.stats.OnDemand++
	return Reply{Answer: Negative, Notify: h.take()}
}

// Evicted queues id (the client dropped it from its cache). When the queue
// reaches Config.QueueLen it returns the batch to send to the server now
// (the caller owns it); otherwise nil. With notifications off it only
// counts.
func (h *Holder) Evicted(id block.ID) []block.ID {
	h.stats.Evictions++
	if h.cfg.NoNotify {
		return nil
	}
	h.queue = append(h.queue, id)
	if len(h.queue) < h.cfg.QueueLen {
		return nil
	}
	h.stats.Batched++
	return h.take()
}

// Flush returns the queued discards to send now (on unmount, or from a
// timer so that a quiet client's queue does not go stale), nil if none.
// It counts as a batched notification.
func (h *Holder) Flush() []block.ID {
	if len(h.queue) == 0 {
		return nil
	}
	h.stats.Batched++
	return h.take()
}

// Stats returns the client-side counters.
func (h *Holder) Stats() HolderStats {
	s := h.stats
	s.Queued = len(h.queue)
	return s
}

func (h *Holder) take() []block.ID {
	q := h.queue
	h.stats.NotifiedBlocks += uint64(len(q))
	h.queue = make([]block.ID, 0, h.cfg.QueueLen)
	return q
}

// Verdict is Admit's decision on a block that arrived for a read.
type Verdict uint8

const (
	// Use: the block is of the reader's version.
	Use Verdict = iota + 1
	// UseAfterDrop: the block is newer than the reader's view of the file:
	// drop the file's cached blocks and its attributes first, then use it
	// (the read restarts on the new version).
	UseAfterDrop
	// Reject: the block is older than the reader's version (or of unknown
	// version): discard it and ask the server (Directory.Retry).
	Reject
)

func (v Verdict) String() string {
	switch v {
	case Use:
		return "use"
	case UseAfterDrop:
		return "use-after-drop"
	case Reject:
		return "reject"
	}
	return fmt.Sprintf("verdict(%d)", v)
}

// Admit is the requester-side rule that keeps a reader from assembling a
// file from two versions: a block of version got arriving at a client whose
// view of the file is version have. A client that knows no version yet
// (have = 0) gets UseAfterDrop (nothing to drop) and adopts got.
func Admit(have, got block.Version) Verdict {
	switch {
	case got == 0:
		return Reject
	case got == have:
		return Use
	case got > have:
		return UseAfterDrop
	default:
		return Reject
	}
}
