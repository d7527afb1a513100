package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"syscall"
	"time"

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
		if cl == nil && c != nil {
			cl = s.clientOf(c)
		}
		if cl == nil || s.watch == nil {
			return nil, fmt.Errorf("callbacks: the export cannot be watched for direct changes: %w", syscall.ENOSYS)
		}
		s.cbs.register(cl.id, c)
		return &wire.OK{}, nil
	}
	if dw, ok := inner.(*wire.DelegateWrite); ok && cl != nil {
		if err := s.mayDelegate(c, cl, m, dw); err != nil {
			return nil, err
		}
	}
	if r, done, err := s.recalls.serve(ctx, s, cl, inner); done {
		return r, err // recall.go: write delegations
	}
	s.recallDirs(ctx, cl, inner) // dirdeleg.go: other clients' directory delegations
	if cl == nil || !s.cbs.active() {
		return serve()
	}
	if dd, ok := inner.(*wire.DirDelegate); ok {
		return s.delegated(ctx, cl, dd, serve)
	}
	if hands, dir := handsOut(inner); hands {
		since := s.cbs.begin()
		watched, dirIno := s.watchFor(inner, dir)
		ino := s.writtenIno(c, inner)
		pre := s.breakBefore(inner, ino != 0)
		if ino != 0 {
			s.watch.busy(ino)
			defer s.watch.idle(ino)
		}
		r, err := serve()
		if err == nil {
			s.cbs.grantWatched(ctx, cl.id, since, watched, granted(r, dirIno)...)
			if changes(inner) {
				s.cbs.Break(ctx, append(pre, breakAfter(inner, r)...), cl.id)
			}
		}
		return r, err
	}
	if !changes(inner) {
		return serve()
	}
	ino := s.writtenIno(c, inner)
	pre := s.breakBefore(inner, ino != 0)
	if ino != 0 {
		s.watch.busy(ino)
		defer s.watch.idle(ino)
	}
	since := s.cbs.begin()
	r, err := serve()
	if err == nil {
		if ino != 0 {
			s.recordXattrChange(inner)
		}
		s.recordRename(inner)
		s.cbs.Break(ctx, append(pre, breakAfter(inner, r)...), cl.id)
		if mk, ok := inner.(*wire.Mkdir); ok {
			s.grantMade(ctx, cl, since, mk.Path, r)
		}
	}
	return r, err
}

// grantMade grants the client that made directory p (its reply r) a
// callback on it: the directory is new and empty, so the client knows its
// every entry and answers lookups of names in it without asking (the
// kernel looks up every name before it creates it). The directory is
// watched before it is checked empty, so no direct change in the export
// slips between; one that is not empty (a direct change came first) or
// cannot be watched is granted as raced: the client is sent a break at
// once and caches nothing of it.
func (s *Server) grantMade(ctx context.Context, cl *client, since uint64, p string, r wire.Msg) {
	ar, ok := r.(*wire.AttrReply)
	if !ok || ar.Attr.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return
	}
	c, err := clean(p)
	if err != nil || c == "." {
		return
	}
	ino, watched := s.watch.watch(c)
	if watched && (ino != ar.Attr.Ino || !s.emptyDir(c)) {
		watched = false
	}
	s.cbs.grantWatched(ctx, cl.id, since, watched, grantObj{ino: ar.Attr.Ino, kind: wire.CallbackDir})
}

// emptyDir reports whether directory p (cleaned) has no entry.
func (s *Server) emptyDir(p string) bool {
	f, err := s.openDirFile(p)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// recordRename records the new state (ctime) of a regular file that m,
// a rename through the server, moved: else the watcher takes the events
// that follow the rename on the file's new name (the close of a handle,
// say) for a direct change, and breaks every holder's callbacks on it —
// the renaming client's own write delegation too, which writes its dirty
// data back under it (and, for a file renamed over another, races the
// agent's own bookkeeping of the rename).
func (s *Server) recordRename(m wire.Msg) {
	r, ok := m.(*wire.Rename)
	if !ok {
		return
	}
	if c, err := clean(r.New); err == nil {
		if fi, err := s.lstatAny(c); err == nil && fi.Mode().IsRegular() {
			s.versions.observe(fi.Sys().(*syscall.Stat_t))
		}
	}
}

// recordXattrChange records the new state (ctime) of a regular file whose
// extended attributes m changed, so that the watcher takes the event for
// the server's own (the other requests that change a file record its
// state themselves).
func (s *Server) recordXattrChange(m wire.Msg) {
	var p string
	switch m := m.(type) {
	case *wire.SetXattr:
		p = m.Path
	case *wire.RemoveXattr:
		p = m.Path
	default:
		return
	}
	if c, err := clean(p); err == nil {
		if fi, err := s.lstatAny(c); err == nil && fi.Mode().IsRegular() {
			s.versions.observe(fi.Sys().(*syscall.Stat_t))
		}
	}
}

// clientOf waits for the handshake to record the client of c: a client
// registers in its very first request, which may be served before the
// handshake stored who it is.
func (s *Server) clientOf(c *wire.Conn) *client {
	for range 1000 {
		if cl, _ := c.Value.Load().(*client); cl != nil {
			return cl
		}
		select {
		case <-c.Done():
			return nil
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// watchFor watches, before m is served, the directory whose inotify events
// cover what m hands out: a listed directory, else the directory holding
// the object. It returns whether that worked, and a listed directory's
// inode number.
func (s *Server) watchFor(m wire.Msg, listed string) (bool, uint64) {
	if listed != "" {
		ino, ok := s.watch.watch(listed)
		return ok, ino
	}
	p := pathOf(m)
	dir := "."
	if c, err := clean(p); err == nil && c != "." {
		dir = path.Dir(c)
	}
	_, ok := s.watch.watch(dir)
	return ok, 0
}

// writtenIno is the regular file whose content or attributes m changes in
// place, if any: its inotify events while m is served are the server's own
// (watch.go).
func (s *Server) writtenIno(c *wire.Conn, m wire.Msg) uint64 {
	var h uint64
	switch m := m.(type) {
	case *wire.Write:
		h = m.Handle
	case *wire.WriteSeq:
		h = m.Handle
	case *wire.WriteBase:
		h = m.Handle
	case *wire.Commit:
		h = m.Handle
	case *wire.Fallocate:
		h = m.Handle
	case *wire.SetAttr:
		if h = m.Handle; h == 0 {
			return s.regularIno(m.Path)
		}
	case *wire.SetXattr:
		return s.regularIno(m.Path)
	case *wire.RemoveXattr:
		return s.regularIno(m.Path)
	case *wire.Open:
		return s.regularIno(m.Path) // O_TRUNC
	case *wire.Create:
		if m.Flags&syscall.O_TRUNC != 0 {
			return s.regularIno(m.Path)
		}
		return 0
	case *wire.CommitNew:
		if cl, _ := c.Value.Load().(*client); cl != nil {
			return s.ddelegs.tmpIno(cl.id, m.Token)
		}
		return 0
	default:
		return 0
	}
	if of := s.handles.get(h, c); of != nil {
		return of.ino
	}
	return 0
}

// pathOf is the path a request names.
func pathOf(m wire.Msg) string {
	switch m := m.(type) {
	case *wire.Lookup:
		return m.Path
	case *wire.LookupPinned:
		return m.Path
	case *wire.GetAttr:
		return m.Path
	case *wire.Open:
		return m.Path
	case *wire.OpenPinned:
		return m.Path
	case *wire.OpenRead:
		return m.Path
	case *wire.Create:
		return m.Path
	case *wire.CommitNew:
		return m.Path
	}
	return ""
}

// handsOut reports whether m hands out state its caller may cache, and the
// listed directory's path for a listing (whose reply does not name it).
func handsOut(m wire.Msg) (bool, string) {
	switch m := m.(type) {
	case *wire.Lookup, *wire.LookupPinned, *wire.GetAttr, *wire.Open, *wire.OpenPinned, *wire.OpenRead, *wire.Create, *wire.CommitNew, *wire.Revalidate:
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

// granted lists the objects a reply hands out.
func granted(r wire.Msg, dir uint64) []grantObj {
	switch r := r.(type) {
	case *wire.AttrReply:
		return []grantObj{grantOf(&r.Attr)}
	case *wire.OpenReply:
		return []grantObj{grantOf(&r.Attr)}
	case *wire.OpenData:
		return []grantObj{grantOf(&r.Attr)}
	case *wire.ReadDirPlusReply:
		objs := make([]grantObj, 0, len(r.Entries)+1)
		objs = append(objs, grantObj{ino: dir, kind: wire.CallbackDir})
		for i := range r.Entries {
			if e := &r.Entries[i]; e.HasAttr {
				objs = append(objs, grantOf(&e.Attr))
			}
		}
		return objs
	case *wire.ReadDirReply:
		return []grantObj{{ino: dir, kind: wire.CallbackDir}}
	case *wire.RevalidateReply:
		objs := make([]grantObj, 0, len(r.Grants))
		for i := range r.Grants {
			objs = append(objs, grantOf(&r.Grants[i].Attr))
		}
		return objs
	}
	return nil
}

func grantOf(a *wire.Attr) grantObj {
	if a.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return grantObj{ino: a.Ino, kind: wire.CallbackDir}
	}
	return grantObj{ino: a.Ino, kind: wire.CallbackRead}
}

// inoOf is the inode number of p in the export, 0 if it cannot be found.
func (s *Server) inoOf(p string) uint64 {
	c, err := clean(p)
	if err != nil {
		return 0
	}
	fi, err := s.lstatAny(c)
	if err != nil {
		return 0
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// regularIno is the inode number of p if it is a regular file, else 0.
func (s *Server) regularIno(p string) uint64 {
	c, err := clean(p)
	if err != nil {
		return 0
	}
	fi, err := s.lstatAny(c)
	if err != nil || !fi.Mode().IsRegular() {
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

// breakBefore is what a request will break that is best found before it
// is served: the objects a removal or a rename takes away from their
// names, and the entries it changes (whose directories do not change).
// The entries' inotify events are announced to the watcher: they are the
// server's own.
//
// regular says that m changes a regular file in place (writtenIno): its
// inotify events are told apart by the file's stat, not announced.
func (s *Server) breakBefore(m wire.Msg, regular bool) []wire.BreakItem {
	var items []wire.BreakItem
	obj := func(p string) {
		if ino := s.inoOf(p); ino != 0 {
			items = append(items, wire.BreakItem{Ino: ino})
		}
	}
	entry := func(p string, events int) {
		it := s.entryItem(p)
		if it.Ino == 0 {
			return
		}
		items = append(items, it)
		s.watch.expect(it.Ino, it.Name, events)
	}
	// IN_CREATE, and the IN_ATTRIB of a server that restores the mode
	// (it keeps its umask when it does not act as its callers).
	created := 1
	if !s.switchCreds {
		created = 2
	}
	switch m := m.(type) {
	case *wire.Create:
		entry(m.Path, 1)
	case *wire.CommitNew:
		entry(m.Path, 1) // the linkat
	case *wire.Mkdir:
		entry(m.Path, created)
	case *wire.Symlink:
		entry(m.Path, 1)
	case *wire.Mknod:
		entry(m.Path, created)
	case *wire.Link:
		entry(m.New, 1)
	case *wire.Unlink:
		obj(m.Path)
		entry(m.Path, 1)
	case *wire.Rmdir:
		obj(m.Path)
		entry(m.Path, 1)
	case *wire.Rename:
		obj(m.Old)
		obj(m.New)
		entry(m.Old, 1)
		entry(m.New, 1)
	case *wire.SetXattr:
		obj(m.Path)
	case *wire.RemoveXattr:
		obj(m.Path)
	}
	switch m.(type) {
	case *wire.SetAttr, *wire.SetXattr, *wire.RemoveXattr:
		if regular {
			break
		}
		// The IN_ATTRIB events of a directory's or a symlink's attributes
		// (a regular file's are told apart by its stat, versions.go): on
		// its parent's watch, and on a directory's own.
		it := s.entryItem(pathOf2(m))
		s.watch.expect(it.Ino, it.Name, 4)
		if ino := s.inoOf(pathOf2(m)); ino != 0 {
			s.watch.expect(ino, wire.BreakAttr, 4)
		}
	}
	return items
}

func pathOf2(m wire.Msg) string {
	switch m := m.(type) {
	case *wire.SetAttr:
		return m.Path
	case *wire.SetXattr:
		return m.Path
	case *wire.RemoveXattr:
		return m.Path
	}
	return ""
}

// breakAfter is what a request that succeeded broke, given its reply.
func breakAfter(m wire.Msg, r wire.Msg) []wire.BreakItem {
	var ino uint64
	switch r := r.(type) {
	case *wire.AttrReply:
		ino = r.Attr.Ino
	case *wire.OpenReply:
		ino = r.Attr.Ino
	case *wire.WriteReply:
		ino = r.Attr.Ino
	}
	switch m.(type) {
	case *wire.SetAttr, *wire.Write, *wire.WriteSeq, *wire.WriteBase, *wire.Commit, *wire.CommitNew, *wire.Fallocate, *wire.Open, *wire.Create, *wire.Link:
		if ino != 0 {
			return []wire.BreakItem{{Ino: ino}}
		}
	}
	return nil
}
