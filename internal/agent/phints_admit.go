package agent

import (
	"context"
	"strconv"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/hints"
	"github.com/coopfs/coopfs/internal/wire"
)

// acceptForward takes a master copy a peer evicted: the state machine
// places it by its age and may evict a block for it; a young master copy
// evicted so goes to the server's discard cache.
func (h *hintsClient) acceptForward(ctx context.Context, m *wire.HintsForward) *wire.HintsForwardAck {
	id := block.ID{File: m.File, Index: m.Index}
	v := block.Version(m.Version)
	h.stats.forwardsReceived.Add(1)
	if !h.admitForward(ctx, m) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.hc == nil {
			return &wire.HintsForwardAck{Oldest: int64(hints.Free), Boot: h.boot}
		}
		o := h.hc.Oldest()
		return &wire.HintsForwardAck{Oldest: int64(o.Age), Boot: uint64(o.Boot)}
	}
	h.mu.Lock()
	if h.hc == nil {
		h.mu.Unlock()
		return &wire.HintsForwardAck{Oldest: int64(hints.Free), Boot: h.boot}
	}
	ack := h.hc.AcceptForward(now(), hints.ClientID(m.From), hints.BootID(m.FromBoot), id, v, hints.Time(m.Stamp), hints.Time(m.FromOldest))
	kept, _ := h.hc.Cached(id, v)
	h.mu.Unlock()
	// The victim leaves the memory tier before the forwarded block enters
	// it (the tier would otherwise make room by its own order).
	victim := ack.Victim
	switch victim.Kind {
	case hints.EvictDiscard:
		data := m.Data
		if victim.Block != id {
			var ok bool
			data, ok = h.a.cache.Get(victim.Block, victim.Version)
			h.a.cache.Remove(victim.Block)
			if !ok {
				break
			}
		}
		h.toDiscardCache(victim, data)
	case hints.EvictDrop:
		if victim.Block != id {
			h.a.cache.Remove(victim.Block)
		}
	}
	if kept && !h.a.cache.Contains(id, v) {
		// A copy of this version already here is the same bytes, checked
		// when it came: it stays.
		h.a.cache.Put(id, v, m.Data)
	}
	return &wire.HintsForwardAck{Oldest: int64(ack.Oldest.Age), Boot: uint64(ack.Oldest.Boot), Kept: kept}
}

// admitForward says whether a master copy a peer forwarded may enter the
// cache: it carries a capability the server issued for its file and
// version (someone who could read the file sent it on), and its bytes have
// the server's SHA-256 of that block at that version — from the open's
// hand-outs, else asked of the server with the capability. A forward that
// fails is refused whole: the state machine never hears of it, so no
// good copy is evicted for it.
func (h *hintsClient) admitForward(ctx context.Context, m *wire.HintsForward) bool {
	id := block.ID{File: m.File, Index: m.Index}
	why := ""
	if err := h.a.caps.Check(&m.Cap, m.File, m.Version, nil, time.Now()); err != nil {
		why = err.Error()
	} else if !h.checkForwarded(ctx, id, m.Version, &m.Cap, m.Data) {
		why = "the block's SHA-256 is not the server's"
	}
	if why != "" {
		h.stats.badForwards.Add(1)
		h.a.log.Warn("refused a forwarded master copy", "from", m.From, "file", m.File, "index", m.Index,
			"version", m.Version, "why", why)
		return false
	}
	h.prov.put(m.Cap)
	return true
}

// checkForwarded compares a forwarded block with the server's digest of
// it at version v.
func (h *hintsClient) checkForwarded(ctx context.Context, id block.ID, v uint64, cp *wire.Capability, data []byte) bool {
	k := digestKey{id.File, v, id.Index}
	h.mu.Lock()
	sum, ok := h.digests[k]
	h.mu.Unlock()
	if !ok {
		h.askDigestsCap(ctx, id, v, cp)
		h.mu.Lock()
		sum, ok = h.digests[k]
		h.mu.Unlock()
	}
	return ok && wire.DigestMatches(data, sum)
}

// askDigestsCap asks the server for the digests of the run of blocks
// around id at version v of a file this client may not hold open, showing
// the forwarded copy's capability instead of a handle.
func (h *hintsClient) askDigestsCap(ctx context.Context, id block.ID, v uint64, cp *wire.Capability) {
	count := uint32(digestRun - id.Index%digestRun)
	key := "digests-cap:" + strconv.FormatUint(id.File, 10) + ":" + strconv.FormatUint(v, 10) + ":" + strconv.FormatUint(id.Index, 10)
	h.a.flights.Do(key, func() (any, error) {
		h.stats.digestRequests.Add(1)
		r, _, err := h.a.sess.call(ctx, &wire.HintsDigest{File: id.File, Index: id.Index, Version: v, Count: count, Cap: *cp}, true)
		h.keepDigests(id.File, v, r, err)
		return nil, err
	})
}

// provenance is the capability shown with a master copy of version v of
// file sent on: the server's to this client, else the one it came with.
func (h *hintsClient) provenance(file, v uint64) wire.Capability {
	if c := h.a.ownCaps.get(file, v); c.Valid() {
		return c
	}
	return h.prov.get(file, v)
}
