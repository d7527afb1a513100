package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// The agent's metadata paths under callbacks (callbacks.go): lookups,
// getattrs, listings and read-only opens answered from what the server's
// callbacks keep true, and the agent's own changes, which the server does
// not break for their maker.

// maxLazyBlocks is the largest file (in blocks) a cached open may serve
// without a server handle: the file must be in the local tiers whole.
const maxLazyBlocks = 64

// live reports whether the callbacks of connection generation gen still
// hold: the connection is up.
func (a *Agent) liveGen() uint64 {
	if a.cfg.WritePolicy == cache.WriteBack {
		// A write-back mount's own dirty files change under its cache
		// (writeback.go): it answers nothing from callbacks and asks the
		// server, which recalls other clients' dirty data.
		return 0
	}
	_, gen, ok := a.sess.live()
	if !ok {
		return 0
	}
	return gen
}

// cachedAttr returns the cached attributes of p if a callback covers them.
func (a *Agent) cachedAttr(p string) (wire.Attr, bool) {
	gen := a.liveGen()
	cb := a.cbs
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if gen == 0 || cb.c.gen != gen {
		return wire.Attr{}, false
	}
	return cb.c.attr(p)
}

// attrOf answers a lookup or getattr of p from the cache, or sends m and
// caches its reply.
func (a *Agent) attrOf(ctx context.Context, p string, m wire.Msg) (wire.Attr, error) {
	_, lookup := m.(*wire.Lookup)
	for try := 0; ; try++ {
		attr, ok, missing := a.cachedAttrOrMissing(p)
		switch {
		case ok:
			a.cbs.hits.Add(1)
			return attr, nil
		case missing:
			a.cbs.hits.Add(1)
			return wire.Attr{}, fmt.Errorf("%s: %w", p, syscall.ENOENT)
		}
		// names.go: the directory's listing answers this lookup and the
		// next ones.
		if try > 0 || !lookup || !a.listForLookup(ctx, p) {
			break
		}
	}
	a.cbs.misses.Add(1)
	tok := a.cbs.token()
	attr, err := a.attrCall(ctx, m, true)
	switch {
	case err == nil:
		a.cbs.install(ctx, tok, p, attr)
	case errors.Is(err, syscall.ENOENT):
		a.cbs.mu.Lock()
		a.cbs.c.installMissing(tok, p)
		a.cbs.mu.Unlock()
	}
	return attr, err
}

// cachedAttrOrMissing is cachedAttr that also reports a name known missing.
func (a *Agent) cachedAttrOrMissing(p string) (attr wire.Attr, ok, missing bool) {
	gen := a.liveGen()
	cb := a.cbs
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if gen == 0 || cb.c.gen != gen {
		return wire.Attr{}, false, false
	}
	attr, ok = cb.c.attr(p)
	return attr, ok, !ok && cb.c.missing(p)
}

// install caches p's attributes read after tok and, when they are cached,
// keeps them on disk too (metadisk.go) as the identity of ctx.
func (cb *callbacks) install(ctx context.Context, tok cbToken, p string, attr wire.Attr) {
	cb.mu.Lock()
	ok := cb.c.install(tok, p, attr)
	over := cb.c.overflowed
	cb.c.overflowed = false
	cb.mu.Unlock()
	if over {
		cb.invalidateAll()
	}
	if ok {
		cb.disk.put(ctx, metaAttr, p, attr, nil)
	}
}

// cachedList returns the cached listing of directory p.
func (a *Agent) cachedList(p string) ([]wire.DirEntryPlus, bool) {
	gen := a.liveGen()
	cb := a.cbs
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if gen == 0 || cb.c.gen != gen {
		return nil, false
	}
	ents, ok := cb.c.lists[p]
	return slices.Clone(ents), ok
}

// installList caches directory p's listing read after tok and keeps it
// on disk too (metadisk.go) when it is cached.
func (cb *callbacks) installList(ctx context.Context, tok cbToken, p string, ents []wire.DirEntryPlus) {
	cb.mu.Lock()
	cb.c.installList(tok, p, ents)
	_, ok := cb.c.lists[p]
	over := cb.c.overflowed
	cb.c.overflowed = false
	cb.mu.Unlock()
	if over {
		cb.invalidateAll()
	}
	if ok {
		cb.disk.put(ctx, metaList, p, wire.Attr{}, ents)
	}
}

var _ vfs.Callbacks = (*Agent)(nil)

// metrics are the counters of the agent's callbacks.
func (cb *callbacks) metrics() []prometheus.Collector {
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	return []prometheus.Collector{
		counter("coopfs_callback_cache_hits_total", "Lookups, getattrs, listings and opens answered from the cache under a callback.", func() float64 { return float64(cb.hits.Load()) }),
		counter("coopfs_callback_cache_misses_total", "Lookups, getattrs and listings that went to the server.", func() float64 { return float64(cb.misses.Load()) }),
		counter("coopfs_callback_breaks_received_total", "CallbackBreak messages received from the server.", func() float64 { return float64(cb.breaks.Load()) }),
	}
}

// Covered implements vfs.Callbacks: whether a callback covers what the
// agent just answered for p (the kernel may then cache it long).
func (a *Agent) Covered(p string) bool {
	_, ok := a.cachedAttr(p)
	return ok
}

// SetInvalidator implements vfs.Callbacks.
func (a *Agent) SetInvalidator(inv Invalidator) {
	if inv == nil {
		a.cbs.inv.Store(nil)
		return
	}
	a.cbs.inv.Store(&invalidatorBox{inv})
}

// openCached opens p for reading without a message when a callback covers
// its attributes and the whole file at that version is in the local tiers:
// close-to-open holds (the server would have broken the callback before
// any change was answered). The file gets a server handle only if it needs
// one later (a block evicted meanwhile, fstat after a break).
func (a *Agent) openCached(ctx context.Context, p string, flags uint32) (*file, wire.Attr, bool) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_CREAT) != 0 {
		return nil, wire.Attr{}, false
	}
	attr, ok := a.cachedAttr(p)
	if !ok || attr.Mode&syscall.S_IFMT != syscall.S_IFREG || !(a.wholeLocal(attr) || a.heldWhole(attr)) {
		return nil, wire.Attr{}, false
	}
	keep := a.noteVersion(attr.Ino, attr.Version)
	c, _ := vfs.CallerOf(ctx)
	return &file{a: a, path: p, flags: flags, attr: attr, keep: keep, caller: c}, attr, true
}

// wholeLocal reports whether every block of the file attr describes is in
// memory or on the local disk at attr's version.
func (a *Agent) wholeLocal(attr wire.Attr) bool {
	bs := uint64(a.BlockSize())
	if bs == 0 {
		return false
	}
	n := (attr.Size + bs - 1) / bs
	if n > maxLazyBlocks {
		return false
	}
	for i := range n {
		id := block.ID{File: attr.Ino, Index: i}
		if a.cache.Contains(id, block.Version(attr.Version)) {
			continue
		}
		if v, ok := a.diskPeek(id); !ok || uint64(v) != attr.Version {
			return false
		}
	}
	return true
}

// changedHere notes changes this agent made through paths ps; gone says
// the names no longer denote what they did (removed, renamed, replaced).
func (a *Agent) changedHere(gone bool, ps ...string) {
	cb := a.cbs
	cb.mu.Lock()
	for _, p := range ps {
		if h, ok := cb.c.paths[p]; ok && gone {
			cb.c.changedIno(h.ino) // its other names' link count
		}
		cb.c.changedHere(p, gone)
	}
	cb.mu.Unlock()
}

// setAttrHere notes this agent's own setattr of p, whose reply (read after
// tok) gave attributes at, or failed with err: what was cached of p and
// its directory's listing goes, and p's new attributes are cached while
// p's callback holds and still names that object — the kernel asks for
// them again after a chown (tar's fstat of each directory it sets up).
func (a *Agent) setAttrHere(tok cbToken, p string, at wire.Attr, err error) {
	cb := a.cbs
	cb.mu.Lock()
	defer cb.mu.Unlock()
	c := cb.c
	par, parOK := c.paths[parentOf(p)]
	parFresh := p != "" && parOK && c.fresh(tok, par.ino) // before this change's own mark (changedHere)
	c.changedHere(p, false)
	if h, ok := c.paths[p]; ok && err == nil && parFresh && h.ino == at.Ino && c.fresh(tok, at.Ino) {
		c.put(p, at)
	}
}

// Changed implements vfs.Callbacks.
func (a *Agent) Changed(ino uint64) { a.changedIno(ino) }

// changedIno notes a change of object ino made by this agent.
func (a *Agent) changedIno(ino uint64) {
	cb := a.cbs
	cb.mu.Lock()
	cb.c.changedIno(ino)
	cb.mu.Unlock()
}
