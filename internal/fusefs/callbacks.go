package fusefs

import (
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/vfs"
)

// The kernel's caches under callbacks. A backend that holds the server's
// callbacks (vfs.Callbacks) says which answers a callback covers; the
// kernel caches those for Config.CoveredTimeout (long) instead of the
// attribute and entry timeouts, and the backend tells the adapter when a
// callback breaks (vfs.Invalidator). A break names an inode; the adapter
// finds the kernel's inodes by number (inodes.go), whatever the backend
// still caches, and an answer read before a break of what it hands out is
// not cached by the kernel at all (the break may have come before the
// kernel knew the inode). A break makes the kernel forget:
//
//   - an object's attributes: FUSE_NOTIFY_INVAL_INODE without a range,
//     which only bumps the inode's attribute version (it takes no lock a
//     running operation may hold, so it is done before the break is
//     acked; the kernel also drops a racing reply's attributes);
//   - a directory entry that changed: FUSE_NOTIFY_INVAL_ENTRY, which may
//     wait for the directory's lock, held by an operation that may itself
//     wait for the server, which may wait for this very ack: it is given
//     entryNotifyWait, then finishes in the background;
//   - "every entry" of a directory, and everything after a lost
//     connection: the entries of files are invalidated, not those of
//     directories (invalidating a directory's entry unhashes it: a process
//     whose working directory it is would find it deleted); the page
//     caches of files are dropped by the next open, whose version check
//     fails.

// DefaultCoveredTimeout is how long the kernel caches attributes and
// entries that a callback covers.
const DefaultCoveredTimeout = time.Hour

// uncached is the timeout of an answer the kernel must not cache: go-fuse
// replaces 0 with the mount's default; the kernel rounds this up to one
// clock tick.
const uncached = time.Nanosecond

// entryNotifyWait is how long a break waits for the kernel to drop an
// entry before it is acked anyway.
const entryNotifyWait = 50 * time.Millisecond

// kernelCache is the adapter's side of callbacks.
type kernelCache struct {
	cbs     vfs.Callbacks // nil: the backend holds no callbacks
	covered time.Duration
	root    *fs.Inode
	rootIno uint64        // the server's number of the root
	inodes  *kernelInodes // the kernel's inodes by number (inodes.go)
}

var _ vfs.Invalidator = (*adapter)(nil)

// inodesOf returns the kernel's inodes of the server's number ino.
func (a *adapter) inodesOf(ino uint64) []*fs.Inode {
	var out []*fs.Inode
	if ino == a.rootIno && a.root != nil {
		out = append(out, a.root)
	}
	for _, n := range a.inodes.nodes(ino) {
		out = append(out, &n.Inode)
	}
	return out
}

// Invalidate implements vfs.Invalidator.
func (a *adapter) Invalidate(ino uint64, name string) {
	a.inodes.noteBreak(ino)
	for _, in := range a.inodesOf(ino) {
		if n, ok := in.Operations().(*node); ok {
			a.notifyAttr(n)
		} else {
			in.NotifyContent(-1, 0)
		}
		if !in.IsDir() {
			continue
		}
		switch name {
		case "":
		case "/":
			names := childFiles(in)
			a.childAttrs(in, names)
			a.notifyEntries(in, names)
		default:
			a.childAttrs(in, []string{name})
			a.notifyEntries(in, []string{name})
		}
	}
}

// childAttrs drops the attributes of entries names of dir at once (it
// takes no lock, unlike an entry's invalidation, which may finish after
// the break is acked): a stat of a name whose entry the kernel still holds
// then asks the mount, whose cache of the name is gone — a removal made
// under another client's delegation (agent/defer.go) is then heard of by
// the server's recall, not missed.
func (a *adapter) childAttrs(dir *fs.Inode, names []string) {
	for _, name := range names {
		if ch := dir.GetChild(name); ch != nil {
			ch.NotifyContent(-1, 0)
		}
	}
}

// InvalidateAll implements vfs.Invalidator.
func (a *adapter) InvalidateAll() {
	if a.root == nil {
		return
	}
	a.inodes.noteBreakAll()
	var dirs []*fs.Inode
	var walk func(in *fs.Inode)
	walk = func(in *fs.Inode) {
		in.NotifyContent(-1, 0)
		if !in.IsDir() {
			return
		}
		dirs = append(dirs, in)
		for _, ch := range in.Children() {
			walk(ch)
		}
	}
	walk(a.root)
	go func() {
		for _, d := range dirs {
			for _, name := range childFiles(d) {
				d.NotifyEntry(name)
			}
		}
	}()
}

// childFiles lists the names of dir's children that are not directories.
func childFiles(dir *fs.Inode) []string {
	var names []string
	for name, ch := range dir.Children() {
		if ch.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFDIR {
			names = append(names, name)
		}
	}
	return names
}

// notifyEntries drops entries names of dir from the kernel, waiting at
// most entryNotifyWait.
func (a *adapter) notifyEntries(dir *fs.Inode, names []string) {
	if len(names) == 0 {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, name := range names {
			dir.NotifyEntry(name)
		}
	}()
	select {
	case <-done:
	case <-time.After(entryNotifyWait):
	}
}

// coveredEntry sets the timeouts of an entry answered for path p, in
// directory dir, read after break sequence number since (kernelInodes.begin):
// long when a callback covers p; none for what broke since it was read
// (the break may have come before the kernel knew the inode, so that
// nothing was forgotten); the entry and attribute timeouts otherwise, in
// which a break of the object still reaches the kernel (Invalidate).
func (a *adapter) coveredEntry(p string, dir *fs.Inode, since uint64, out *fuse.EntryOut) {
	if a.cbs == nil {
		return
	}
	dirBroke := a.inodes.brokeSince(dir.StableAttr().Ino, since)
	if a.inodes.brokeSince(out.Attr.Ino, since) {
		out.SetAttrTimeout(uncached)
		out.SetEntryTimeout(uncached)
		return
	}
	if dirBroke {
		out.SetEntryTimeout(uncached)
		return
	}
	if a.cbs.Covered(p) {
		out.SetEntryTimeout(a.covered)
		out.SetAttrTimeout(a.covered)
	}
}

// coveredAttr is coveredEntry for the attributes of p.
func (a *adapter) coveredAttr(p string, since uint64, out *fuse.AttrOut) {
	if a.cbs == nil {
		return
	}
	if a.inodes.brokeSince(out.Attr.Ino, since) {
		out.SetTimeout(uncached)
	} else if a.cbs.Covered(p) {
		out.SetTimeout(a.covered)
	}
}

// breakSeq is kernelInodes.begin.
func (a *adapter) breakSeq() uint64 { return a.inodes.begin() }

// childInos is the inode number of entry name of n, if the kernel knows it.
func (n *node) childInos(name string) []uint64 {
	if n.a.cbs == nil {
		return nil
	}
	if ch := n.GetChild(name); ch != nil {
		return []uint64{ch.StableAttr().Ino}
	}
	return nil
}

// changedChildren tells the backend that objects changed through this
// mount (a removal or rename changes their link count or ctime under
// their other names too).
func (a *adapter) changedChildren(inos []uint64) {
	for _, ino := range inos {
		a.cbs.Changed(ino)
	}
}
