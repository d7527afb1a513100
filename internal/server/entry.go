package server

import (
	"path"

	"github.com/coopfs/coopfs/internal/wire"
)

// withParent turns the reply r of a successful entry change m into an
// EntryReply with the parent directory's attributes after the change, for
// a client that asked for them (wire.ParentAttrs). The stat is the
// server's own (no identity: the caller just changed an entry of the
// directory, so it may see it).
func (s *Server) withParent(c *wire.Conn, m, r wire.Msg) wire.Msg {
	if c == nil {
		return r
	}
	if cl, _ := c.Value.Load().(*client); cl == nil || !cl.parents.Load() {
		return r
	}
	if as, ok := m.(*wire.As); ok {
		m = as.Msg
	}
	var p string
	switch m := m.(type) {
	case *wire.Create:
		p = m.Path
	case *wire.CommitNew:
		p = m.Path
	case *wire.Mkdir:
		p = m.Path
	case *wire.Symlink:
		p = m.Path
	case *wire.Mknod:
		p = m.Path
	case *wire.Link:
		p = m.New
	case *wire.Unlink:
		p = m.Path
	case *wire.Rmdir:
		p = m.Path
	default:
		return r
	}
	er := &wire.EntryReply{}
	switch r := r.(type) {
	case *wire.OpenReply:
		er.Open, er.HasAttr, er.Handle, er.Attr = true, true, r.Handle, r.Attr
	case *wire.AttrReply:
		er.HasAttr, er.Attr = true, r.Attr
	case *wire.OK, nil:
	default:
		return r
	}
	if c, err := clean(p); err == nil && c != "." {
		if pr, err := s.lstat(path.Dir(c)); err == nil {
			er.HasParent, er.Parent = true, pr.Attr
		}
	}
	return er
}
