package agent

import (
	"context"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// The client side of callbacks (internal/server/callbacks.go). On every
// connection the agent registers for callbacks before it sends anything
// else; from then on, whatever the server hands it (attributes of a
// lookup or getattr, a directory's listing) stays true until the server
// breaks the callback, so the agent answers lookups, getattrs, listings
// and read-only opens from its cache without a message. A break drops what
// the agent cached of the objects (for a directory, the whole subtree
// below it: a path's resolution depends on every directory above it) and
// tells the kernel to forget its own cache of them (Invalidator). A lost
// connection breaks everything: nothing cached under one connection is
// used under the next.
//
// What the agent may cache, and for how long, is cbCache: an I/O-free
// state machine keyed by path (the protocol names files by path), indexed
// by inode (breaks name inodes).

// Invalidator is the kernel's cache of the mount (vfs.Invalidator).
type Invalidator = vfs.Invalidator

// maxCachedPaths bounds the paths the agent caches; past it the cache is
// emptied (the server's callbacks then only cost breaks nobody needs).
const maxCachedPaths = 1 << 20

// cbToken is taken before a request whose reply may be cached: the reply
// is installed only if nothing it covers broke since.
type cbToken struct{ gen, seq uint64 }

// held is one cached path: the object it names, and its attributes when
// they are cached (a change the agent made itself drops the attributes
// but not the name: the server's callback still holds).
type held struct {
	ino     uint64
	dir     bool
	hasAttr bool
	attr    wire.Attr
}

// cbCache is what the agent caches under callbacks.
//
// INVARIANT: for every path p in paths: p's parent is in paths (or p is
// the root ""), p is in kids[parent(p)] and in byIno[paths[p].ino]; lists
// only holds directories in paths.
type cbCache struct {
	gen   uint64 // the session generation the callbacks belong to; 0: none
	seq   uint64 // breaks so far
	floor uint64 // tokens older than this are stale (everything broke since)
	broke map[uint64]uint64
	paths map[string]*held
	kids  map[string]map[string]struct{}
	byIno map[uint64]map[string]struct{}
	lists map[string][]wire.DirEntryPlus
	// neg is the names known missing, by directory: a directory's
	// callback covers its entries, so an entry break (or a create by this
	// agent) is heard of before the name could appear.
	neg    map[string]map[string]struct{}
	negLen int
	// full is, per directory whose every entry is known (a listing, or a
	// directory this agent made, under the directory's callback), the
	// names of its entries: a name not in it is missing (names.go).
	full    map[string]map[string]struct{}
	fullLen int
	// overflowed is set when install emptied the cache (maxCachedPaths):
	// the kernel must forget everything too.
	overflowed bool
}

func newCBCache() *cbCache {
	c := &cbCache{}
	c.clear()
	return c
}

func (c *cbCache) clear() {
	c.broke = make(map[uint64]uint64)
	c.paths = make(map[string]*held)
	c.kids = make(map[string]map[string]struct{})
	c.byIno = make(map[uint64]map[string]struct{})
	c.lists = make(map[string][]wire.DirEntryPlus)
	c.neg = make(map[string]map[string]struct{})
	c.negLen = 0
	c.full = make(map[string]map[string]struct{})
	c.fullLen = 0
}

// reset starts over for session generation gen (0: not registered).
func (c *cbCache) reset(gen uint64) {
	c.seq++
	c.floor = c.seq
	c.gen = gen
	c.clear()
}

func (c *cbCache) token() cbToken { return cbToken{gen: c.gen, seq: c.seq} }

// fresh reports whether state read after tok may be cached for ino.
func (c *cbCache) fresh(tok cbToken, ino uint64) bool {
	return tok.gen != 0 && tok.gen == c.gen && tok.seq >= c.floor && c.broke[ino] <= tok.seq
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// install caches the attributes of path p read after tok; the name is
// cached only while its directory's callback holds.
func (c *cbCache) install(tok cbToken, p string, a wire.Attr) bool {
	if !c.fresh(tok, a.Ino) {
		return false
	}
	if p != "" {
		par, ok := c.paths[parentOf(p)]
		if !ok || !par.dir || !c.fresh(tok, par.ino) {
			return false
		}
	}
	return c.put(p, a)
}

// put caches the attributes of path p, whose parent is cached.
func (c *cbCache) put(p string, a wire.Attr) bool {
	if len(c.paths) >= maxCachedPaths {
		c.reset(c.gen)
		c.overflowed = true
		return false
	}
	c.unmiss(p)
	h := c.paths[p]
	if h != nil && h.ino != a.Ino {
		c.drop(p) // the name denotes another object now
		h = nil
	}
	if h == nil {
		h = &held{ino: a.Ino}
		c.paths[p] = h
		if p != "" {
			par := parentOf(p)
			if c.kids[par] == nil {
				c.kids[par] = make(map[string]struct{})
			}
			c.kids[par][path.Base(p)] = struct{}{}
		}
		if c.byIno[a.Ino] == nil {
			c.byIno[a.Ino] = make(map[string]struct{}, 1)
		}
		c.byIno[a.Ino][p] = struct{}{}
	}
	h.dir = a.Mode&syscall.S_IFMT == syscall.S_IFDIR
	h.attr, h.hasAttr = a, true
	return true
}

// installList caches the listing of directory p read after tok, and every
// entry's attributes. The listing itself is kept only if every entry's
// attributes were: one of an entry that broke since tok (the server's
// break of a raced grant comes before its reply) would be handed out again
// by the next listing, long after the break that said it is stale.
func (c *cbCache) installList(tok cbToken, p string, ents []wire.DirEntryPlus) {
	h, ok := c.paths[p]
	if !ok || !h.dir || !c.fresh(tok, h.ino) {
		return
	}
	whole := true
	for _, e := range ents {
		if e.HasAttr && e.Name != "." && e.Name != ".." {
			if !c.install(tok, join(p, e.Name), e.Attr) {
				whole = false
			}
		}
	}
	if _, still := c.paths[p]; still {
		c.setFull(p, ents)
		if whole {
			c.lists[p] = ents
		}
	}
}

// maxMissing bounds the names known missing; past it they are forgotten.
const maxMissing = 1 << 18

// installMissing notes that name p did not exist after tok (a lookup
// answered ENOENT), if its directory's callback holds.
func (c *cbCache) installMissing(tok cbToken, p string) {
	if p == "" {
		return
	}
	dir := parentOf(p)
	par, ok := c.paths[dir]
	if !ok || !par.dir || !c.fresh(tok, par.ino) {
		return
	}
	if c.negLen >= maxMissing {
		c.neg = make(map[string]map[string]struct{})
		c.negLen = 0
	}
	if c.neg[dir] == nil {
		c.neg[dir] = make(map[string]struct{})
	}
	if _, ok := c.neg[dir][path.Base(p)]; !ok {
		c.neg[dir][path.Base(p)] = struct{}{}
		c.negLen++
	}
}

// missing reports whether p is known not to exist: a lookup said so, or
// its directory's every entry is known and p is not one (names.go).
func (c *cbCache) missing(p string) bool {
	if p == "" {
		return false
	}
	dir, name := parentOf(p), path.Base(p)
	if _, ok := c.neg[dir][name]; ok {
		return true
	}
	if len(name) > nameMax {
		return false // the server's ENAMETOOLONG, not ENOENT
	}
	names, ok := c.full[dir]
	if !ok {
		return false
	}
	_, there := names[name]
	return !there
}

// unmiss forgets that p was missing.
func (c *cbCache) unmiss(p string) {
	dir := parentOf(p)
	if s, ok := c.neg[dir]; ok {
		if _, ok := s[path.Base(p)]; ok {
			delete(s, path.Base(p))
			c.negLen--
		}
	}
}

// unmissAll forgets the missing names of directory p.
func (c *cbCache) unmissAll(p string) {
	c.negLen -= len(c.neg[p])
	delete(c.neg, p)
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// attr returns the cached attributes of p.
func (c *cbCache) attr(p string) (wire.Attr, bool) {
	if h, ok := c.paths[p]; ok && h.hasAttr {
		return h.attr, true
	}
	return wire.Attr{}, false
}

// drop forgets p and everything below it.
func (c *cbCache) drop(p string) {
	h, ok := c.paths[p]
	if !ok {
		return
	}
	for k := range c.kids[p] {
		c.drop(join(p, k))
	}
	c.unmissAll(p)
	c.dropFull(p)
	delete(c.kids, p)
	delete(c.paths, p)
	delete(c.lists, p)
	if s := c.byIno[h.ino]; s != nil {
		delete(s, p)
		if len(s) == 0 {
			delete(c.byIno, h.ino)
		}
	}
	if p != "" {
		par := parentOf(p)
		if s := c.kids[par]; s != nil {
			delete(s, path.Base(p))
			if len(s) == 0 {
				delete(c.kids, par)
			}
		}
	}
}

// breakItems applies a server's break. A file's attributes go (its
// callback is revoked); a directory keeps its callback and its name, and
// loses its attributes, its listing and the subtree of the entry that
// changed. (The kernel is told by inode, not from here: it may hold what
// this cache forgot.)
func (c *cbCache) breakItems(items []wire.BreakItem) {
	c.seq++
	for _, it := range items {
		c.broke[it.Ino] = c.seq
		for p := range c.byIno[it.Ino] {
			h := c.paths[p]
			if h == nil {
				continue // dropped with an entry broken above
			}
			h.hasAttr = false
			if p != "" {
				delete(c.lists, parentOf(p)) // the listing carries its attributes
			}
			if !h.dir || it.Name == wire.BreakAttr {
				continue
			}
			c.dropFull(p) // an entry changed: added or removed, who knows
			delete(c.lists, p)
			if it.Name != wire.BreakEntries {
				c.unmiss(join(p, it.Name))
				c.drop(join(p, it.Name))
				continue
			}
			c.unmissAll(p)
			for k := range c.kids[p] {
				c.drop(join(p, k))
			}
		}
	}
	if len(c.broke) > 4*maxCachedPaths {
		c.broke = make(map[uint64]uint64)
		c.floor = c.seq
	}
}

// changedHere notes a change the agent made itself through path p (the
// server does not break the changer's callbacks): the directory's listing
// and attributes, and p's subtree when p is removed or renamed.
func (c *cbCache) changedHere(p string, gone bool) {
	par := parentOf(p)
	c.unmiss(p)
	delete(c.lists, par)
	if h, ok := c.paths[par]; ok {
		h.hasAttr = false
		// What a request in flight read of the directory (its listing, a
		// missing name) may predate the change: not installed (fresh).
		c.seq++
		c.broke[h.ino] = c.seq
	}
	if gone {
		c.drop(p)
	} else if h, ok := c.paths[p]; ok {
		h.hasAttr = false
		delete(c.lists, p)
	}
}

// changedIno notes that object ino changed through this agent (a write).
func (c *cbCache) changedIno(ino uint64) {
	for p := range c.byIno[ino] {
		c.paths[p].hasAttr = false
		if p != "" {
			delete(c.lists, parentOf(p))
		}
	}
}

// callbacks is the agent's callback state: the cache, its lock, and the
// kernel to tell.
type callbacks struct {
	mu   sync.Mutex
	c    *cbCache
	inv  atomic.Pointer[invalidatorBox]
	disk metaDiskPtr // what is cached is kept on disk too (metadisk.go); nil: not

	hits, misses, breaks atomic.Int64
}

type invalidatorBox struct{ Invalidator }

func newCallbacks() *callbacks { return &callbacks{c: newCBCache()} }

func (cb *callbacks) token() cbToken {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.c.token()
}

// connected starts the callbacks of a new connection (registered or not):
// nothing cached before is used again.
func (cb *callbacks) connected(gen uint64, registered bool) {
	if !registered {
		gen = 0
	}
	cb.mu.Lock()
	cb.c.reset(gen)
	cb.mu.Unlock()
	cb.invalidateAll()
}

// lost is called when connection generation gen ended.
func (cb *callbacks) lost(gen uint64) {
	cb.mu.Lock()
	if cb.c.gen != gen {
		cb.mu.Unlock()
		return
	}
	cb.c.reset(0)
	cb.mu.Unlock()
	cb.invalidateAll()
}

func (cb *callbacks) invalidateAll() {
	if b := cb.inv.Load(); b != nil {
		b.InvalidateAll()
	}
}

// serveBreak applies a CallbackBreak and returns the ack. The kernel is
// told after the agent's own cache is clean: an operation the kernel is
// running may hold the locks its invalidation needs, and it may be waiting
// for the very request whose break this is.
func (cb *callbacks) serveBreak(m *wire.CallbackBreak) wire.Msg {
	cb.breaks.Add(1)
	cb.mu.Lock()
	if m.All {
		cb.c.reset(cb.c.gen)
	} else {
		cb.c.breakItems(m.Items)
	}
	cb.mu.Unlock()
	if b := cb.inv.Load(); b != nil {
		if m.All {
			b.InvalidateAll()
		}
		// By inode, not by the paths this cache still holds: the kernel
		// may hold objects it forgot or never held.
		for _, it := range m.Items {
			b.Invalidate(it.Ino, it.Name)
		}
	}
	return &wire.OK{}
}

// register asks the server, on a new connection, for callbacks. A server
// that does not know them answers ENOSYS: nothing is then cached.
func register(ctx context.Context, c *wire.Conn) bool {
	_, err := c.Call(ctx, &wire.CallbackRegister{})
	return err == nil
}
