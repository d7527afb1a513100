package server

import (
	"context"
	"path"
	"syscall"

	"github.com/coopfs/coopfs/internal/wire"
)

// What each request grants and breaks (callbacks.go). serveCallbacks wraps
// the serving of one request: requests that hand out state grant the
// caller callbacks on it, requests that change state break the callbacks
// of every other holder before they are answered.

// serveCallbacks serves m through serve with its grants and breaks.
func (s *Server) serveCallbacks(ctx context.Context, c *wire.Conn, m wire.Msg, serve func() (wire.Msg, error)) (wire.Msg, error) {
	inner := m
	if as, ok := m.(*wire.As); ok {
		inner = as.Msg
	}
	var cl *client
	if c != nil {
		cl, _ = c.Value.Load().(*client)
	}
	if _, ok := inner.(*wire.CallbackRegister); ok {
		if cl == nil {
			return nil, syscall.EPROTO
		}
		s.cbs.register(cl.id, c)
		return &wire.OK{}, nil
	}
	if r, done, err := s.recalls.serve(ctx, s, cl, inner); done {
		return r, err // recall.go: write delegations
	}
	if cl == nil || !s.cbs.active() {
		return serve()
	}
	if hands, dir := handsOut(inner); hands {
		since := s.cbs.begin()
		var dirIno uint64
		if dir != "" {
			dirIno = s.inoOf(dir)
		}
		r, err := serve()
		if err == nil {
			s.cbs.grant(cl.id, since, wire.CallbackRead, grantedInos(r, dirIno)...)
		}
		if !changes(inner) {
			return r, err
		}
		if err == nil {
			s.cbs.Break(ctx, s.breakAfter(inner, r), cl.id)
		}
		return r, err
	}
	if !changes(inner) {
		return serve()
	}
	pre := s.breakBefore(inner)
	r, err := serve()
	if err == nil {
		s.cbs.Break(ctx, append(pre, s.breakAfter(inner, r)...), cl.id)
	}
	return r, err
}

// handsOut reports whether m hands out state its caller may cache, and the
// listed directory's path for a listing (whose reply does not name it).
func handsOut(m wire.Msg) (bool, string) {
	switch m := m.(type) {
	case *wire.Lookup, *wire.LookupPinned, *wire.GetAttr, *wire.Open, *wire.OpenPinned, *wire.Create:
		return true, ""
	case *wire.ReadDirPlus:
		return true, cleanOrRoot(m.Path)
	case *wire.ReadDir:
		return true, cleanOrRoot(m.Path)
	}
	return false, ""
}

func cleanOrRoot(p string) string {
	c, err := clean(p)
	if err != nil {
		return "."
	}
	return c
}

// changes reports whether m may change what some client caches.
func changes(m wire.Msg) bool {
	switch m := m.(type) {
	case *wire.Open:
		return m.Flags&syscall.O_TRUNC != 0
	case *wire.SetXattr, *wire.RemoveXattr:
		return true
	}
	return wire.Mutates(m)
}

// grantedInos lists the objects a reply hands out.
func grantedInos(r wire.Msg, dir uint64) []uint64 {
	switch r := r.(type) {
	case *wire.AttrReply:
		return []uint64{r.Attr.Ino}
	case *wire.OpenReply:
		return []uint64{r.Attr.Ino}
	case *wire.ReadDirPlusReply:
		inos := make([]uint64, 0, len(r.Entries)+1)
		inos = append(inos, dir)
		for i := range r.Entries {
			if e := &r.Entries[i]; e.HasAttr {
				inos = append(inos, e.Attr.Ino)
			}
		}
		return inos
	case *wire.ReadDirReply:
		return []uint64{dir}
	}
	return nil
}

// inoOf is the inode number of p in the export, 0 if it cannot be found.
func (s *Server) inoOf(p string) uint64 {
	c, err := clean(p)
	if err != nil {
		return 0
	}
	fi, err := s.root.Lstat(c)
	if err != nil {
		return 0
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// entryItem is the break of entry name p in its directory.
func (s *Server) entryItem(p string) wire.BreakItem {
	c, err := clean(p)
	if err != nil || c == "." {
		return wire.BreakItem{}
	}
	dir, name := path.Split(c)
	return wire.BreakItem{Ino: s.inoOf(dir), Name: name}
}

// breakBefore is what a request will break that cannot be found after it:
// the objects a removal or a rename takes away from their names.
func (s *Server) breakBefore(m wire.Msg) []wire.BreakItem {
	var items []wire.BreakItem
	add := func(p string) {
		if ino := s.inoOf(p); ino != 0 {
			items = append(items, wire.BreakItem{Ino: ino})
		}
	}
	switch m := m.(type) {
	case *wire.Unlink:
		add(m.Path)
	case *wire.Rmdir:
		add(m.Path)
	case *wire.Rename:
		add(m.Old)
		add(m.New)
	}
	return items
}

// breakAfter is what a request that succeeded broke, given its reply.
func (s *Server) breakAfter(m wire.Msg, r wire.Msg) []wire.BreakItem {
	var items []wire.BreakItem
	obj := func() {
		switch r := r.(type) {
		case *wire.AttrReply:
			items = append(items, wire.BreakItem{Ino: r.Attr.Ino})
		case *wire.OpenReply:
			items = append(items, wire.BreakItem{Ino: r.Attr.Ino})
		case *wire.WriteReply:
			items = append(items, wire.BreakItem{Ino: r.Attr.Ino})
		}
	}
	entry := func(p string) { items = append(items, s.entryItem(p)) }
	switch m := m.(type) {
	case *wire.SetAttr, *wire.Write, *wire.WriteSeq, *wire.WriteBase, *wire.Commit, *wire.Fallocate, *wire.Open:
		obj()
	case *wire.Create:
		obj()
		entry(m.Path)
	case *wire.Mkdir:
		entry(m.Path)
	case *wire.Symlink:
		entry(m.Path)
	case *wire.Mknod:
		entry(m.Path)
	case *wire.Link:
		obj()
		entry(m.New)
	case *wire.Unlink:
		entry(m.Path)
	case *wire.Rmdir:
		entry(m.Path)
	case *wire.Rename:
		entry(m.Old)
		entry(m.New)
	case *wire.SetXattr:
		items = append(items, wire.BreakItem{Ino: s.inoOf(m.Path)})
	case *wire.RemoveXattr:
		items = append(items, wire.BreakItem{Ino: s.inoOf(m.Path)})
	}
	out := items[:0]
	for _, it := range items {
		if it.Ino != 0 {
			out = append(out, it)
		}
	}
	return out
}
