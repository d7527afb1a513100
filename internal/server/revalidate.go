package server

import (
	"github.com/coopfs/coopfs/internal/wire"
)

// revalidate answers a client's bulk revalidation (wire.Revalidate): a
// client restarted on its disk cache names the paths it kept with the
// inode and version it knew, and learns in one message which still hold.
// Each path is looked up as a Lookup would be (as the request's identity);
// the reply vouches for every object it answers for (Grants), on which
// serveCallbacks grants callbacks as for a lookup.
func (s *Server) revalidate(m *wire.Revalidate) (*wire.RevalidateReply, error) {
	r := &wire.RevalidateReply{Status: make([]uint8, len(m.Items)), Grants: make([]wire.RevalidGrant, 0, len(m.Items))}
	for i, it := range m.Items {
		ar, err := s.lstat(it.Path)
		if err != nil {
			r.Status[i] = wire.RevalidGone
			continue
		}
		a := ar.Attr
		same := a.Ino == it.Ino && a.Version == it.Version && a.Mtime == it.Mtime && a.Ctime == it.Ctime
		if same {
			r.Status[i] = wire.RevalidSame
		} else {
			r.Status[i] = wire.RevalidChanged
			r.Attrs = append(r.Attrs, a)
		}
		r.Grants = append(r.Grants, wire.RevalidGrant{Attr: a, List: it.List && same})
	}
	return r, nil
}
