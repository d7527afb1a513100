package fusefs

import (
	"context"
	"errors"
	"slices"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/coopfs/coopfs/internal/wire"
)

// Hard links. The kernel names a file to the adapter by inode; the adapter
// names it to the backend by path, and go-fuse's tree gives the name the
// node was last looked up (or linked) by. Another client may have removed
// that name, or given it to another file, while the kernel still reaches
// the file by one of its other names: a change by path would then act on
// the other file. So every change by path names the file it is meant for
// (vfs.SetAttrIn.Ino/Gen; the server refuses with ESTALE when the path
// names another file), a getattr by path checks the file it got, and on a
// mismatch (or ENOENT: the name is gone) the operation is tried through
// the node's other names. When no
// name of the node leads to it any more, ESTALE goes to the kernel: a
// path-based system call then looks its path up again (LOOKUP_REVAL) and
// retries on what the fresh lookup finds.

// maxLinks bounds the names a node remembers besides go-fuse's own.
const maxLinks = 8

// link is one name a node was handed to the kernel by.
type link struct {
	parent *fs.Inode
	name   string
}

// links is the names of a node (beyond the one go-fuse's tree names).
type links struct {
	mu sync.Mutex
	l  []link
}

// add remembers that the node is parent's child name (the newest name
// first; the oldest goes past maxLinks).
func (s *links) add(parent *fs.Inode, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := link{parent, name}
	if len(s.l) > 0 && s.l[0] == l {
		return // the common case: looked up again by the same name
	}
	s.l = slices.DeleteFunc(s.l, func(o link) bool { return o == l })
	s.l = slices.Insert(s.l, 0, l)
	if len(s.l) > maxLinks {
		s.l = s.l[:maxLinks]
	}
}

// otherPaths returns the node's paths besides first (go-fuse's): the other
// names that go-fuse's tree still gives to this node. Names the tree gives
// to another node (or none) are forgotten.
func (n *node) otherPaths(first string) []string {
	ps := []string{first}
	n.links.mu.Lock()
	ls := slices.Clone(n.links.l)
	n.links.mu.Unlock()
	var gone []link
	for _, l := range ls {
		pn, ok := l.parent.Operations().(*node)
		if !ok || l.parent.GetChild(l.name) != &n.Inode {
			gone = append(gone, l)
			continue
		}
		if p, ok := pn.childPath(l.name); ok && !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	if len(gone) > 0 {
		n.links.mu.Lock()
		n.links.l = slices.DeleteFunc(n.links.l, func(o link) bool { return slices.Contains(gone, o) })
		n.links.mu.Unlock()
	}
	return ps[1:]
}

// identity is the (ino, gen) a change by path names; (0, 0) for the root,
// which has only one name.
func (n *node) identity() (ino, gen uint64) {
	if n.IsRoot() {
		return 0, 0
	}
	sa := n.StableAttr()
	return sa.Ino, sa.Gen
}

// isNode reports whether attr describes the node's file (a generation of 0
// on either side matches any: not every answer carries one).
func (n *node) isNode(attr wire.Attr) bool {
	ino, gen := n.identity()
	return ino == 0 || attr.Ino == ino && (gen == 0 || attr.Gen == 0 || attr.Gen == gen)
}

// errOtherFile is a path's answer describing another file than the node's.
var errOtherFile = errors.New("the name now denotes another file")

// byPaths runs op on the node's paths in turn while it answers ESTALE (or
// errOtherFile: the path named another file) or ENOENT (the name is gone,
// the file the kernel holds may not be). It returns the path of the last
// try and its error, ESTALE when every name failed so (the kernel then
// looks the caller's path up again, and a file really gone answers that
// lookup's ENOENT); ENOENT when the node has no path at all. The other
// names are only looked for after the first fails.
func (n *node) byPaths(ctx context.Context, op func(ctx context.Context, p string) error) (string, error) {
	p, ok := n.path()
	if !ok {
		return "", syscall.ENOENT
	}
	stale := func(err error) bool {
		return errors.Is(err, syscall.ESTALE) || errors.Is(err, errOtherFile) || errors.Is(err, syscall.ENOENT)
	}
	try := func(p string) error { return n.a.run(ctx, func(ctx context.Context) error { return op(ctx, p) }) }
	err := try(p)
	if !stale(err) {
		return p, err
	}
	for _, o := range n.otherPaths(p) {
		if p, err = o, try(o); !stale(err) {
			return p, err
		}
	}
	return p, syscall.ESTALE
}
