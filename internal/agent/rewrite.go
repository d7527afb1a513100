package agent

import (
	"context"
	"errors"
	"syscall"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/wire"
)

// A writer keeps its own cached blocks across its own write-through.
//
// Every write through the server starts a new version of the file, and
// blocks are cached by version, so a writer used to drop every cached
// block of a file it wrote (and read them all again). The agent now sends
// write-through writes as WriteBase, naming the version its cached blocks
// of the file belong to (Base); the server applies the write with no other
// change to the file through the server in between and answers the version
// right before it (WriteReply.Prev). When Prev is Base, nobody changed the
// file since those blocks were read (wholefile's "the counter did not move
// since open" rule): the blocks the write did not touch hold the new
// version too and are relabelled, the blocks it touched are brought up to
// date from the bytes written (or dropped when the rest of the block is
// not known here). Otherwise the file's blocks are dropped, as before.
// Other clients still see the new version at their next open
// (close-to-open is unchanged): only the writer's own copies are kept.

// writeObserver is a policy that keeps its own records of a file's blocks
// across the client's own write (policy.go): a policy without it makes the
// agent drop the file's blocks after every write, as before.
type writeObserver interface {
	// relabelled: the cached blocks of file ino at version from are now
	// at version to.
	relabelled(ino, from, to uint64)
	// written: the client wrote block id, now cached at version v (the
	// server has the same bytes).
	written(id block.ID, v uint64)
}

// writeBase is the version the cached blocks of file ino belong to (0: not
// known, or a file with dirty write-back data).
func (a *Agent) writeBase(ino uint64) uint64 {
	if a.plainWrite.Load() || a.wb.holds(ino) {
		return 0
	}
	if _, ok := a.policy().(writeObserver); !ok {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.versions[ino]
}

// writeMsg is the message of a write-through write: WriteBase, or WriteSeq
// to a server that does not know it.
func (a *Agent) writeMsg(seq, h, off, base uint64, p []byte) wire.Msg {
	if base == 0 || a.plainWrite.Load() {
		return &wire.WriteSeq{Seq: seq, Handle: h, Offset: off, Data: p}
	}
	return &wire.WriteBase{Seq: seq, Handle: h, Offset: off, Base: base, Data: p}
}

// writeUnknown reports whether err is a server's refusal of WriteBase (an
// older server, or a proxy before one): the agent sends WriteSeq from then on.
func (a *Agent) writeUnknown(err error) bool {
	if !errors.Is(err, syscall.ENOSYS) || a.plainWrite.Swap(true) {
		return false
	}
	a.log.Info("the server does not know WriteBase: a writer's cached blocks are dropped after each write")
	return true
}

// wrote records a write-through write of p at off to file ino: the file is
// at version attr.Version now; with prev == base (non-zero) the cached
// blocks are kept, else dropped.
func (a *Agent) wrote(ino, base, prev uint64, attr *wire.Attr, off uint64, p []byte) {
	v := attr.Version
	wo, ok := a.policy().(writeObserver)
	if !ok || base == 0 || prev != base || v == base {
		a.noteVersion(ino, v)
		return
	}
	bs := uint64(a.BlockSize())
	end := off + uint64(len(p))
	newLen := func(idx uint64) int { return int(min(bs, attr.Size-min(attr.Size, idx*bs))) }
	a.mu.Lock()
	if a.versions[ino] != base {
		a.mu.Unlock()
		a.noteVersion(ino, v) // a newer version came between: as before
		return
	}
	a.versions[ino] = v
	defer a.changedIno(ino) // callbacks: the server breaks others, not its maker
	// Taken out: the blocks the write touched and a short last block
	// that the write made longer (zeros or written bytes follow it now).
	take := func(idx uint64, n int) bool {
		return (idx*bs < end && (idx+1)*bs > off) || n != newLen(idx)
	}
	taken := a.cache.Relabel(ino, block.Version(base), block.Version(v), take)
	a.mu.Unlock()
	have := make(map[uint64][]byte, len(taken))
	for _, t := range taken {
		have[t.Index] = t.Data
	}
	if a.disk.c != nil {
		// The disk tier's copy moves too (a whole file larger than the
		// memory tier stays whole), once the blocks on their way there
		// have landed.
		a.diskSettled(context.Background(), ino)
		for _, t := range a.disk.c.Relabel(ino, block.Version(base), block.Version(v), take) {
			if _, ok := have[t.Index]; !ok {
				have[t.Index] = t.Data
			}
		}
	}
	wo.relabelled(ino, base, v)
	for idx := off / bs; idx*bs < end || have[idx] != nil; idx++ {
		a.keepWritten(wo, block.ID{File: ino, Index: idx}, v, newLen(idx), have[idx], off, p)
		delete(have, idx)
	}
	for idx, old := range have { // short last blocks before the write
		a.keepWritten(wo, block.ID{File: ino, Index: idx}, v, newLen(idx), old, off, p)
	}
}

// keepWritten caches block id at version v (n bytes long) after a write of
// p at off: the old bytes (the block at the version before, nil if it was
// not cached), zeros past them, the written bytes over them. A block whose
// bytes are not all known (not cached before, not covered by the write) is
// left out.
func (a *Agent) keepWritten(wo writeObserver, id block.ID, v uint64, n int, old []byte, off uint64, p []byte) {
	bs := uint64(a.BlockSize())
	start := id.Index * bs
	end := off + uint64(len(p))
	if n <= 0 || len(old) > n {
		return
	}
	if old == nil && (off > start || end < start+uint64(n)) {
		return // part of the block is neither cached nor written
	}
	data := make([]byte, n)
	copy(data, old)
	lo, hi := max(start, off), min(start+uint64(n), end)
	if lo < hi {
		copy(data[lo-start:hi-start], p[lo-off:hi-off])
	}
	wo.written(id, v)
	a.cache.Put(id, block.Version(v), data)
	a.toDisk(id, block.Version(v), data)
}

// The policies' side of a writer's write (writeObserver).

func (policyNone) relabelled(uint64, uint64, uint64) {}
func (policyNone) written(block.ID, uint64)          {}

// Under directory the server's cache directory forgot the file's blocks
// with its version; the writer's copies are its own until it evicts them.
func (c *coop) relabelled(uint64, uint64, uint64) {}
func (c *coop) written(block.ID, uint64)          {}

// Under hints the writer's copies are current (the state machine's
// Revalidate), and a written block is the master copy of the new data, as
// in the simulator (hints.Client.Write).
func (h *hintsClient) relabelled(ino, from, to uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hc != nil {
		h.hc.Revalidate(ino, block.Version(to))
	}
	if h.last[ino] == from {
		h.last[ino] = to
	}
}

func (h *hintsClient) written(id block.ID, v uint64) {
	h.mu.Lock()
	if h.hc == nil {
		h.mu.Unlock()
		return
	}
	ev := h.hc.Write(now(), id, block.Version(v))
	h.mu.Unlock()
	h.carryOut(ev)
}

// Under wholefile the writer's relabelled copy is still the whole file, at
// the new version; its close commits it (wholeClient.closing), and until
// the server takes it as valid no open of it goes without a message.
func (w *wholeClient) relabelled(ino, from, to uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if held, ok := w.holding[ino]; ok && held.v == from {
		w.holding[ino] = heldCopy{v: to}
	}
}

func (w *wholeClient) written(block.ID, uint64) {}
