package agent

import (
	"context"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// A directory's attributes after this agent's own entry changes in it
// (issue 9, creation-heavy work). The kernel drops a directory's
// attributes whenever a create, mkdir, unlink or rmdir in it succeeds, and
// asks for them again at the next permission check, i.e. before the next
// create or unlink in it: a GetAttr round trip per file for `tar x` and
// `rm -rf`. The agent asks the server to add the directory's attributes to
// the replies of its entry changes (wire.ParentAttrs, wire.EntryReply) and
// answers those getattrs from them for up to the mount's attribute timeout
// — what the kernel itself would have cached them for, had it not dropped
// them because it knew they changed. Any other change the agent makes to a
// directory (setattr, xattrs, a rename anywhere, a break of the server's
// callbacks, a new connection) forgets what it knew, and an answer is only
// kept when no other change of the same directory by this agent started
// while it was on its way.

// dirAttrsMax bounds the directories remembered; past it the expired ones go.
const dirAttrsMax = 4096

// dirAttrs is the agent's directory attributes from entry changes.
type dirAttrs struct {
	on  atomic.Bool // the server answers ParentAttrs
	ttl time.Duration

	mu   sync.Mutex
	all  uint64 // bumped by clear: answers begun before are not kept
	dirs map[string]*dirState
}

// dirState is one directory's: changes of it in flight and what the last
// one's reply said.
type dirState struct {
	busy  int    // changes in flight
	epoch uint64 // changes begun and ended
	attr  wire.Attr
	until time.Time // zero: nothing known
}

// dirTicket is a change begun: its reply is kept if the directory saw no
// other change since.
type dirTicket struct {
	dir        string
	epoch, all uint64
	ok         bool
}

// pipeline asks the server for parent attributes on connection c (a new
// connection: nothing known from the last one is kept). A server that
// answers it knows Commit too: files hold their writes back (pipe.go) only
// then; a server or proxy that does not (ENOSYS) gets every write at once.
func (a *Agent) pipeline(ctx context.Context, c *wire.Conn) {
	a.dirs.clear()
	_, err := c.Call(ctx, &wire.ParentAttrs{})
	a.dirs.on.Store(err == nil && a.dirs.ttl > 0)
	a.holds.noCommit.Store(err != nil)
	// A server that knows ParentAttrs knows the types 160–169 too; a proxy
	// answers ENOSYS (it follows the opens it relays).
	a.fastMeta.Store(err == nil)
}

// parentDir is the path of the directory holding p ("" for the root).
func parentDir(p string) string {
	d := path.Dir(p)
	if d == "." || d == "/" {
		return ""
	}
	return d
}

// begin notes that a change of directory dir is being sent.
func (d *dirAttrs) begin(dir string) dirTicket {
	if !d.on.Load() {
		return dirTicket{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dirs == nil {
		d.dirs = make(map[string]*dirState)
	}
	st := d.dirs[dir]
	if st == nil {
		st = &dirState{}
		d.dirs[dir] = st
	}
	st.busy++
	st.epoch++
	st.until = time.Time{}
	return dirTicket{dir: dir, epoch: st.epoch, all: d.all, ok: true}
}

// end notes the reply r of the change t (nil if it failed), keeps the
// directory's attributes it carries, and returns the usual reply.
func (d *dirAttrs) end(t dirTicket, r wire.Msg) wire.Msg {
	er, entry := r.(*wire.EntryReply)
	if t.ok {
		d.mu.Lock()
		if st := d.dirs[t.dir]; st != nil {
			// Kept only if the directory saw no other change begin or end
			// since this one began: the server may serve concurrent
			// changes in any order.
			alone := st.epoch == t.epoch && d.all == t.all
			st.epoch++
			st.busy--
			if entry && er.HasParent && st.busy == 0 && alone {
				st.attr, st.until = er.Parent, time.Now().Add(d.ttl)
				d.prune()
			}
			if st.busy == 0 && st.until.IsZero() {
				delete(d.dirs, t.dir)
			}
		}
		d.mu.Unlock()
	}
	if entry {
		return er.Usual()
	}
	return r
}

// prune drops expired directories past dirAttrsMax; under mu.
func (d *dirAttrs) prune() {
	if len(d.dirs) <= dirAttrsMax {
		return
	}
	now := time.Now()
	for p, st := range d.dirs {
		if st.busy == 0 && !now.Before(st.until) {
			delete(d.dirs, p)
		}
	}
}

// get returns directory dir's attributes when a change of it by this agent
// gave them a moment ago.
func (d *dirAttrs) get(dir string) (wire.Attr, bool) {
	if !d.on.Load() {
		return wire.Attr{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.dirs[dir]
	if st == nil || st.busy > 0 || !time.Now().Before(st.until) {
		return wire.Attr{}, false
	}
	return st.attr, true
}

// forget drops what is known of directory dir's attributes.
func (d *dirAttrs) forget(dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.dirs[dir]; st != nil {
		st.until = time.Time{}
		if st.busy == 0 {
			delete(d.dirs, dir)
		}
	}
}

// clear drops everything known.
func (d *dirAttrs) clear() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all++
	for p, st := range d.dirs {
		st.until = time.Time{}
		if st.busy == 0 {
			delete(d.dirs, p)
		}
	}
}

// entryCall sends an entry change of path (a create, mkdir, symlink, mknod,
// link, unlink or rmdir) and keeps the parent directory's attributes its
// reply carries; the reply returned is the usual one.
func (a *Agent) entryCall(ctx context.Context, m wire.Msg, p string, idempotent bool) (wire.Msg, uint64, error) {
	a.pend.before(ctx, m) // defer.go
	return a.entrySend(ctx, m, p, idempotent)
}

// entrySend is entryCall without waiting for the changes answered here: the
// queue's own flush sends them so (defer.go), in order.
func (a *Agent) entrySend(ctx context.Context, m wire.Msg, p string, idempotent bool) (wire.Msg, uint64, error) {
	t := a.dirs.begin(parentDir(p))
	r, gen, err := a.sess.call(ctx, as(ctx, m), idempotent)
	if err != nil {
		a.dirs.end(t, nil)
		return nil, gen, err
	}
	if er, ok := r.(*wire.EntryReply); ok && er.HasParent {
		a.delegs.serverAttr(parentDir(p), er.Parent) // deleg.go
	}
	return a.dirs.end(t, r), gen, nil
}
