package fusefs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/wire"
)

// Directory listings with attributes. The kernel lists a directory with
// READDIRPLUS: every entry comes with what a LOOKUP of it would return.
// go-fuse answers that by calling a lookup per entry, one after the other;
// a Lookup message per entry would make `ls -l`, `find` and `du` cost a
// round trip per file. The directory handle below instead lists the
// directory once with ReadDirPlus (each entry's attributes from the
// server) and answers go-fuse's per-entry lookup from that reply, as the
// node's Lookup would: same inode (ino, generation; hard links are one
// inode), same attributes, same timeouts. An entry without attributes
// (the server could not stat it), an entry of a listing older than the
// attribute or entry timeout, and the name of an open just answered ESTALE
// (whose lookup must pin the file, stale.go) go through Lookup.

// DirPlusReader is an optional Backend interface: a directory's entries
// with their attributes (HasAttr false for an entry the server could not
// stat).
type DirPlusReader interface {
	ReadDirPlus(ctx context.Context, path string) ([]wire.DirEntryPlus, error)
}

var (
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.FileReaddirenter   = (*dirHandle)(nil)
	_ fs.FileLookuper       = (*dirHandle)(nil)
	_ fs.FileSeekdirer      = (*dirHandle)(nil)
	_ fs.FileReleasedirer   = (*dirHandle)(nil)
)

// dirHandle is an open directory: its listing, read on the first
// readdir (and again after a rewind), and where the reader is in it.
type dirHandle struct {
	n *node

	mu     sync.Mutex
	loaded bool
	at     time.Time // when the listing was read
	since  uint64    // the break sequence number before it was read (inodes.go)
	ents   []wire.DirEntryPlus
	pos    int // index of the next entry to hand out
}

// OpendirHandle implements fs.NodeOpendirHandler.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{n: n}, 0, 0
}

// load lists the directory through the backend.
func (d *dirHandle) load(ctx context.Context) syscall.Errno {
	n := d.n
	p, ok := n.path()
	if !ok {
		return syscall.ENOENT
	}
	var ents []wire.DirEntryPlus
	since := n.a.breakSeq()
	err := n.a.run(ctx, func(ctx context.Context) (err error) {
		if dp, ok := n.a.b.(DirPlusReader); ok {
			ents, err = dp.ReadDirPlus(ctx, p)
			return err
		}
		plain, err := n.a.b.ReadDir(ctx, p)
		ents = make([]wire.DirEntryPlus, len(plain))
		for i, e := range plain {
			ents[i].DirEntry = e
		}
		return err
	})
	if err != nil {
		return n.a.errno("readdir", p, err)
	}
	d.ents = d.ents[:0]
	for _, e := range ents {
		if e.Name != "." && e.Name != ".." {
			d.ents = append(d.ents, e)
		}
	}
	d.loaded, d.pos, d.at, d.since = true, 0, time.Now(), since
	return 0
}

// Readdirent implements fs.FileReaddirenter.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.loaded {
		if errno := d.load(ctx); errno != 0 {
			return nil, errno
		}
	}
	if d.pos >= len(d.ents) {
		return nil, 0
	}
	e := &d.ents[d.pos]
	d.pos++
	return &fuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: e.Mode & syscall.S_IFMT, Off: uint64(d.pos)}, 0
}

// Seekdir implements fs.FileSeekdirer. A rewind lists the directory
// afresh (rewinddir(3) must see entries added or removed since); a seek
// elsewhere (seekdir(3) to a telldir(3) position) goes to that entry of
// the listing, read first if a rewind dropped it.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off == 0 {
		d.loaded, d.pos = false, 0
		return 0
	}
	if !d.loaded {
		if errno := d.load(ctx); errno != 0 {
			return errno
		}
	}
	if off > uint64(len(d.ents)) {
		return syscall.EINVAL
	}
	d.pos = int(off)
	return 0
}

// Releasedir implements fs.FileReleasedirer.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {}

// Lookup implements fs.FileLookuper: go-fuse's lookup of the entry just
// handed out by Readdirent, for READDIRPLUS.
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n := d.n
	e, at, since, ok := d.entry(name)
	if !ok || !e.HasAttr || time.Since(at) > n.a.listingTTL {
		// Not in the listing, or older than the kernel may cache
		// attributes (a big directory read slowly): ask the server.
		return n.Lookup(ctx, name, out)
	}
	if n.a.inodes.brokeSince(e.Attr.Ino, since) {
		return n.Lookup(ctx, name, out) // the listing's attributes are stale
	}
	p, ok := n.childPath(name)
	if !ok {
		return nil, syscall.ENOENT
	} else if _, stale := n.a.stale.since(p); stale {
		return n.Lookup(ctx, name, out) // the retry's lookup pins the file
	}
	in := n.newChild(ctx, name, e.Attr, out)
	n.a.coveredEntry(p, &n.Inode, since, out)
	lookedUpNow(in)
	return in, 0
}

// entry finds name in the listing, looking first at the entry handed out
// last (go-fuse looks up each entry right after reading it), and returns
// it with when the listing was read and the break sequence number before.
func (d *dirHandle) entry(name string) (wire.DirEntryPlus, time.Time, uint64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i := d.pos - 1; i >= 0 && i < len(d.ents) && d.ents[i].Name == name {
		return d.ents[i], d.at, d.since, true
	}
	for i, e := range d.ents {
		if e.Name == name {
			d.n.a.dirScans.Add(int64(i + 1))
			return e, d.at, d.since, true
		}
	}
	d.n.a.dirScans.Add(int64(len(d.ents)))
	return wire.DirEntryPlus{}, d.at, d.since, false
}
