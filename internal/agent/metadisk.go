package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Attributes and lookups on disk (seed 003; issue 11). What the callbacks
// cache holds (callbacks.go) — the attributes of paths and the listings of
// directories — is also written to the disk cache directory (`meta`, a
// disk.MetaStore), as the identity that looked it up. A restarted agent
// reads it back and revalidates it in bulk (wire.Revalidate: a path, the
// inode and version it knew, a thousand to a message); what the server
// vouches for is installed in the callbacks cache under the new
// connection's callbacks, so a warm restart costs the revalidation, not a
// lookup, getattr, listing and open per object. Nothing is trusted without
// the server's word: the store only says what to ask about.

// metaName is the store's file in the disk cache directory.
const metaName = "meta"

// revalidateBatch is the most items one Revalidate carries.
const revalidateBatch = 1024

// maxRevalidate bounds the entries a restart revalidates.
const maxRevalidate = 1 << 18

// Record kinds of the store.
const (
	metaAttr = 1 // a path's attributes
	metaList = 2 // a directory's listing
)

// metaDisk is the agent's persistent copy of its callbacks cache.
type metaDisk struct {
	m *disk.MetaStore

	mu      sync.Mutex
	written int64 // records written since open (for tests and logs)
}

// metaKey is a record's key: the hash of its kind and path (the record
// holds the path, so a collision only overwrites).
func metaKey(kind byte, p string) uint64 {
	h := fnv.New64a()
	h.Write([]byte{kind})
	h.Write([]byte(p))
	return h.Sum64()
}

// metaRecord is one stored record.
type metaRecord struct {
	kind   byte
	path   string
	caller vfs.Caller
	attr   wire.Attr           // metaAttr
	ents   []wire.DirEntryPlus // metaList
}

// encode is kind u8 | uid u32 | gid u32 | groups u16 + u32 each | path
// length u32 + path | the wire encoding of the attributes or entries.
func (r *metaRecord) encode() []byte {
	groups := r.caller.Groups
	if len(groups) > 64 {
		groups = groups[:64]
	}
	b := []byte{r.kind}
	b = binary.LittleEndian.AppendUint32(b, r.caller.UID)
	b = binary.LittleEndian.AppendUint32(b, r.caller.GID)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(groups)))
	for _, g := range groups {
		b = binary.LittleEndian.AppendUint32(b, g)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.path)))
	b = append(b, r.path...)
	if r.kind == metaAttr {
		return append(b, wire.EncodeAttr(&r.attr)...)
	}
	return append(b, wire.EncodeEntries(r.ents)...)
}

var errMetaRecord = errors.New("malformed metadata record")

func decodeMetaRecord(b []byte) (*metaRecord, error) {
	if len(b) < 11 {
		return nil, errMetaRecord
	}
	r := &metaRecord{kind: b[0]}
	r.caller.UID = binary.LittleEndian.Uint32(b[1:])
	r.caller.GID = binary.LittleEndian.Uint32(b[5:])
	n := int(binary.LittleEndian.Uint16(b[9:]))
	b = b[11:]
	if len(b) < 4*n+4 {
		return nil, errMetaRecord
	}
	for i := 0; i < n; i++ {
		r.caller.Groups = append(r.caller.Groups, binary.LittleEndian.Uint32(b[4*i:]))
	}
	b = b[4*n:]
	pl := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	if pl > len(b) {
		return nil, errMetaRecord
	}
	r.path, b = string(b[:pl]), b[pl:]
	var err error
	switch r.kind {
	case metaAttr:
		var rest []byte
		r.attr, rest, err = wire.DecodeAttr(b)
		if err == nil && len(rest) != 0 {
			err = errMetaRecord
		}
	case metaList:
		r.ents, err = wire.DecodeEntries(b)
	default:
		err = errMetaRecord
	}
	return r, err
}

// openMetaDisk opens the store in the disk cache directory dir.
func openMetaDisk(dir string) (*metaDisk, error) {
	m, err := disk.OpenMeta(filepath.Join(dir, metaName))
	if err != nil {
		return nil, fmt.Errorf("open the metadata cache: %w", err)
	}
	return &metaDisk{m: m}, nil
}

// metaDiskPtr is the callbacks' pointer to the store, set once it is open.
type metaDiskPtr struct{ p atomic.Pointer[metaDisk] }

// put stores what the callbacks cache installed for path p (attributes, or
// a listing) as the identity of ctx; nothing without a store.
func (mp *metaDiskPtr) put(ctx context.Context, kind byte, p string, attr wire.Attr, ents []wire.DirEntryPlus) {
	md := mp.p.Load()
	if md == nil {
		return
	}
	c, _ := vfs.CallerOf(ctx)
	md.putRecord(&metaRecord{kind: kind, path: p, caller: vfs.Caller{UID: c.UID, GID: c.GID, Groups: c.Groups}, attr: attr, ents: ents})
}

// putRecord stores r; errors only cost a lookup after the next restart.
func (md *metaDisk) putRecord(r *metaRecord) {
	if md == nil {
		return
	}
	if err := md.m.SetAttr(metaKey(r.kind, r.path), r.encode()); err == nil {
		md.mu.Lock()
		md.written++
		md.mu.Unlock()
	}
}

// forget drops path p's records (its attributes and listing).
func (md *metaDisk) forget(p string) {
	if md == nil {
		return
	}
	md.m.DeleteAttr(metaKey(metaAttr, p))
	md.m.DeleteAttr(metaKey(metaList, p))
}

// records returns every stored record (malformed ones are skipped).
func (md *metaDisk) records() []*metaRecord {
	var out []*metaRecord
	for _, b := range md.m.Attrs() {
		if r, err := decodeMetaRecord(b); err == nil {
			out = append(out, r)
		}
	}
	return out
}

func (md *metaDisk) close() error {
	if md == nil {
		return nil
	}
	return md.m.Close()
}

// depth orders paths parents first ("" is the root).
func depth(p string) int {
	if p == "" {
		return -1
	}
	return strings.Count(p, "/")
}

// callerKey groups items by identity.
func callerKey(c vfs.Caller) string { return fmt.Sprint(c.UID, c.GID, c.Groups) }

// revalItem is one path to revalidate, and what the store knew of it.
type revalItem struct {
	path    string
	caller  vfs.Caller
	attr    wire.Attr
	list    []wire.DirEntryPlus // the listing kept, if any
	hasList bool
}

// revalidateDisk revalidates what the store kept, in bulk, and installs
// what the server vouches for into the callbacks cache. It returns the
// entries installed.
func (a *Agent) revalidateDisk(ctx context.Context) (int, error) {
	items := a.meta.items()
	if len(items) == 0 {
		return 0, nil
	}
	tok := a.cbs.token()
	if tok.gen == 0 {
		return 0, nil // no callbacks on this connection: nothing can be kept
	}
	groups := map[string][]*revalItem{}
	for _, it := range items {
		k := callerKey(it.caller)
		groups[k] = append(groups[k], it)
	}
	fresh := map[string]wire.Attr{} // path → attributes vouched for
	same := map[string]bool{}
	for _, g := range groups {
		for start := 0; start < len(g); start += revalidateBatch {
			batch := g[start:min(start+revalidateBatch, len(g))]
			if err := a.revalidateBatch(ctx, batch, fresh, same); err != nil {
				return 0, err
			}
		}
	}
	return a.installRevalidated(tok, items, fresh, same), nil
}

// revalidateBatch sends one Revalidate and records the answers.
func (a *Agent) revalidateBatch(ctx context.Context, batch []*revalItem, fresh map[string]wire.Attr, same map[string]bool) error {
	m := &wire.Revalidate{Items: make([]wire.RevalidateItem, len(batch))}
	for i, it := range batch {
		m.Items[i] = wire.RevalidateItem{Path: it.path, Ino: it.attr.Ino, Version: it.attr.Version,
			Mtime: it.attr.Mtime, Ctime: it.attr.Ctime, List: it.hasList}
	}
	r, _, err := a.sess.call(ctx, as(vfs.WithCaller(ctx, batch[0].caller), m), true)
	if err != nil {
		return fmt.Errorf("revalidate the metadata cache: %w", err)
	}
	rr, ok := r.(*wire.RevalidateReply)
	if !ok || len(rr.Status) != len(batch) {
		return fmt.Errorf("revalidate the metadata cache: unexpected reply %v", r.Type())
	}
	changed := rr.Attrs
	for i, it := range batch {
		switch rr.Status[i] {
		case wire.RevalidSame:
			fresh[it.path], same[it.path] = it.attr, true
		case wire.RevalidChanged:
			if len(changed) == 0 {
				return errors.New("revalidate the metadata cache: a reply with too few attributes")
			}
			fresh[it.path], changed = changed[0], changed[1:]
		default:
			a.meta.forget(it.path)
		}
	}
	return nil
}

// installRevalidated installs the vouched-for attributes, parents first,
// and the listings of unchanged directories whose entries are unchanged.
func (a *Agent) installRevalidated(tok cbToken, items []*revalItem, fresh map[string]wire.Attr, same map[string]bool) int {
	n := 0
	cb := a.cbs
	cb.mu.Lock()
	defer cb.mu.Unlock()
	for _, it := range items { // sorted parents first
		if at, ok := fresh[it.path]; ok && cb.c.install(tok, it.path, at) {
			n++
		}
	}
	for _, it := range items {
		if !it.hasList || !same[it.path] {
			continue
		}
		whole := true
		for _, e := range it.list {
			if e.HasAttr && e.Name != "." && e.Name != ".." && !same[join(it.path, e.Name)] {
				whole = false
				break
			}
		}
		if whole {
			cb.c.installList(tok, it.path, it.list)
		}
	}
	return n
}

// items turns the store's records into what to revalidate, parents first:
// every path with attributes (a listing's entries too), a listing beside
// its directory's attributes.
func (md *metaDisk) items() []*revalItem {
	if md == nil {
		return nil
	}
	byPath := map[string]*revalItem{}
	var lists []*metaRecord
	for _, r := range md.records() {
		switch r.kind {
		case metaAttr:
			byPath[r.path] = &revalItem{path: r.path, caller: r.caller, attr: r.attr}
		case metaList:
			lists = append(lists, r)
		}
	}
	for _, l := range lists {
		dir, ok := byPath[l.path]
		if !ok {
			continue // a listing without its directory's attributes
		}
		dir.list, dir.hasList = l.ents, true
		for _, e := range l.ents {
			p := join(l.path, e.Name)
			if _, ok := byPath[p]; !ok && e.HasAttr && e.Name != "." && e.Name != ".." {
				byPath[p] = &revalItem{path: p, caller: l.caller, attr: e.Attr}
			}
		}
	}
	out := make([]*revalItem, 0, len(byPath))
	for _, it := range byPath {
		out = append(out, it)
	}
	slices.SortFunc(out, func(x, y *revalItem) int {
		if d := depth(x.path) - depth(y.path); d != 0 {
			return d
		}
		return strings.Compare(x.path, y.path)
	})
	if len(out) > maxRevalidate {
		out = out[:maxRevalidate]
	}
	return out
}

// openMetaIf opens the metadata store of a disk cache directory and
// revalidates what it kept. A write-back mount answers nothing from its
// callbacks cache, and a mount without callbacks caches nothing: neither
// keeps a store. Failures only cost lookups: they are logged.
func (a *Agent) openMetaIf(ctx context.Context) {
	if a.cfg.Disk.Dir == "" || a.cfg.NoCallbacks || a.cfg.WritePolicy == cache.WriteBack {
		return
	}
	md, err := openMetaDisk(a.cfg.Disk.Dir)
	if err != nil {
		a.log.Warn("the metadata cache on disk is not used", "err", err)
		return
	}
	a.meta = md
	a.cbs.disk.p.Store(md)
	n, err := a.revalidateDisk(ctx)
	if err != nil {
		a.log.Warn("revalidating the metadata cache on disk failed: its entries are looked up again", "err", err)
		return
	}
	if n > 0 {
		a.log.Info("metadata cache on disk revalidated", "entries", n)
	}
}
