package agent

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Opens that bring the data (wire.OpenRead, issue 9). A cold read of a
// small file was three round trips: the Open, the kernel's getattr of the
// open file (the open drops the attributes the kernel had) and a
// ReadBlock. An open for reading now goes as OpenRead, whose reply carries
// the attributes and, for a file of at most inlineMax bytes, the whole
// file at the version the attributes name; the bytes enter the tiers as a
// fetched block does (counted where the server found them; under the
// directory policy the server records the holder, and leaves a block a
// peer holds to the ReadBlock it forwards; under hints no data comes
// along: peers first), and the getattr is answered from the attributes,
// which the open's callback covers (file.Attr). With callbacks live, a file that
// came whole keeps no server handle: it is read from the tiers, and from
// the bytes the open brought (pinned while it is open, up to pinMax for
// all such files) should the tiers drop them; it is reopened by path
// only if it needs a handle (fstat after a break), as a file opened from
// the cache is (cached.go). No handle, no release either.

// DefaultOpenDataMax is the largest file whose bytes an open brings along
// (Config.OpenDataMax): 99 % of the files of Go's source tree, and what the
// kernel's first read of a file asks for (128 KiB) — a program that opens
// a file mostly reads it.
const DefaultOpenDataMax = 128 << 10

const (
	// pinMax bounds the bytes that open files without a server handle
	// keep pinned; past it, opens take a handle.
	pinMax = 64 << 20
)

// inlineLimiter is a policy that bounds the files whose data an open may
// bring: the policies that decide where blocks come from (a peer) take
// them from the server only below a size.
type inlineLimiter interface {
	inlineLimit() int64
}

// openReadable reports whether an open with flags goes as OpenRead.
func (a *Agent) openReadable(flags uint32) bool {
	return a.fastMeta.Load() && a.writePolicy() != cache.WriteBack &&
		flags&syscall.O_ACCMODE == syscall.O_RDONLY && flags&(syscall.O_TRUNC|syscall.O_CREAT) == 0
}

// inlineMax is the largest file whose bytes an open asks for: one block
// at most, and what the policy allows.
func (a *Agent) inlineMax() uint32 {
	m := min(a.cfg.OpenDataMax, int64(a.BlockSize()))
	if l, ok := a.policy().(inlineLimiter); ok {
		m = min(m, l.inlineLimit())
	}
	return uint32(max(m, 0))
}

// openRead opens p for reading with OpenRead.
func (a *Agent) openRead(ctx context.Context, p string, flags uint32) (*file, wire.Attr, error) {
	lazy := a.liveGen() != 0 && a.pinned.Load() < pinMax
	tok := a.cbs.token()
	m := &wire.OpenRead{Path: p, Flags: flags, Max: a.inlineMax(), Lazy: lazy}
	r, gen, err := a.retryCap(func() (wire.Msg, uint64, error) { return a.pathCall(ctx, m, true) })
	if err != nil {
		return nil, wire.Attr{}, err
	}
	od, ok := r.(*wire.OpenData)
	if !ok {
		return nil, wire.Attr{}, fmt.Errorf("open: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	a.ownCaps.put(od.Cap)
	attr := od.Attr
	if at, ok := a.commitIno(ctx, attr.Ino); ok {
		// Another open file here held writes of it (pipe.go): they are on
		// the server now, and the bytes the reply brought are older.
		attr, od.HasData = at, false
	}
	keep := a.noteVersion(attr.Ino, attr.Version)
	a.cbs.install(ctx, tok, p, attr)
	c, _ := vfs.CallerOf(ctx)
	f := &file{a: a, path: p, flags: flags, h: od.Handle, attr: attr, keep: keep, caller: c}
	if od.Handle != 0 {
		f.gen = gen // else 0: reopened by path if it needs a handle (file.handle)
	}
	if od.HasData {
		a.admitInline(attr, od)
		if od.Handle == 0 && len(od.Data) > 0 {
			f.pin, f.pinVersion = od.Data, attr.Version
			a.pinned.Add(int64(len(od.Data)))
		}
	}
	if attr.Mode&syscall.S_IFMT == syscall.S_IFREG {
		a.policy().opened(ctx, f)
	}
	return f, attr, nil
}

// admitInline puts the data an open brought into the tiers, as a block
// fetched from the server at the file's version.
func (a *Agent) admitInline(attr wire.Attr, od *wire.OpenData) {
	if len(od.Data) == 0 {
		return
	}
	id := block.ID{File: attr.Ino, Index: 0}
	v := block.Version(attr.Version)
	a.cache.Put(id, v, od.Data)
	a.toDisk(id, v, od.Data)
	a.fresh.Store(id, struct{}{}) // counted here, not again at its first read
	layer := obs.LayerServerDisk
	if od.Layer == wire.LayerMemory {
		layer = obs.LayerServerMemory
	}
	a.metrics.CountRead(layer, len(od.Data))
}

// pinned returns block idx at version v from the bytes the open brought,
// when the file keeps them (it has no server handle to read them again).
func (f *file) pinned(idx, v uint64) ([]byte, bool) {
	if idx != 0 || f.pin == nil || v != f.pinVersion {
		return nil, false
	}
	return f.pin, true
}

// unpin lets the bytes the open brought go (the file is released).
func (f *file) unpin() {
	f.mu.Lock()
	n := len(f.pin)
	f.pin = nil
	f.mu.Unlock()
	f.a.pinned.Add(-int64(n))
}

// retryCap sends an open, and again when the server refused it at the
// per-client handle cap: files closed a moment ago make room once their
// releases reach the server, but the kernel sends a RELEASE only after
// close(2) returned, and this agent batches them (release.go). It sends
// what is queued and tries again, a few times over a short while.
func (a *Agent) retryCap(call func() (wire.Msg, uint64, error)) (wire.Msg, uint64, error) {
	r, gen, err := call()
	for try := 0; errors.Is(err, syscall.EMFILE) && try < capRetries; try++ {
		if a.releases.flushWait(true) == 0 {
			time.Sleep(capRetryWait)
		}
		r, gen, err = call()
	}
	return r, gen, err
}

// inlineLimit under hints: no data comes with an open; every block goes
// the policy's way (fetch: the hints of its master copy first, the server
// last), whose accounting (lookup messages per miss, where hits come from)
// the simulator mirrors.
func (h *hintsClient) inlineLimit() int64 { return 0 }

// inlineLimit under wholefile: files of --wholefile-min-size and more are
// fetched whole through the policy (pwholefile.go); smaller ones are read
// from the server.
func (w *wholeClient) inlineLimit() int64 { return w.a.cfg.WholeFileMinSize - 1 }
