package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// Directory delegations (wire.DirDelegate, issue 9). A client that holds a
// directory's delegation is the only one that reads or changes the
// directory's entries: the server recalls the delegation (a CallbackBreak
// of kind CallbackWrite naming the directory, acked once the holder sent
// what it answered on its own) before it serves another client anything
// that names a path in or below the directory, or above it for a change
// that would move it or change the permissions it is reached with (a
// rename, a removal, a setattr or an xattr change). Meanwhile the holder answers
// its own creates and removals in the directory itself and sends them
// later — removals in ordered batches (EntryBatch), a new file with its
// close (CommitNew, into a file the server reserved with O_TMPFILE so that
// its inode number is known at create) — because it knows their outcome:
// the names (its listing under the delegation), the permissions (the
// verdict the server computed as the caller's identity at the grant), and
// that nobody else can change the directory in between. What it cannot
// know — a change made directly in the export, a disk error — reaches it as
// the failure of a later batch, which it reports (agent: defer.go).
//
// Other clients' callbacks on the directory are broken at the grant (their
// cached entries go) and not granted again while it is delegated, so their
// next look at it reaches the server and recalls the delegation first.

const (
	// maxDelegDirs bounds the directories one client holds delegations of.
	maxDelegDirs = 4096
	// maxReserved bounds the reserved files one client holds (each is an
	// open descriptor of the server's), and maxReserveAsk one request.
	maxReserved   = 1024
	maxReserveAsk = 64
	// maxScanEntries is the largest directory whose entries are checked
	// for a removal verdict (one statx each).
	maxScanEntries = 10000
)

// dirDeleg is one directory's delegation.
type dirDeleg struct {
	path   string // cleaned
	ino    uint64
	holder uint32
	conn   *wire.Conn
	tmps   map[uint64]*tmpFile // reserved files by token
}

// tmpFile is a reserved, unnamed file (O_TMPFILE) of a delegation.
type tmpFile struct {
	f   *os.File
	ino uint64
	d   *dirDeleg
}

// dirDelegs is the table of directory delegations.
//
// INVARIANT: byPath[d.path] == d == byIno[d.ino] for every delegation d;
// below[p] is the number of delegations whose path is strictly below p;
// tokens[t] is in tokens[t].d.tmps and held[c] counts c's delegations and
// reserved counts its reserved files.
type dirDelegs struct {
	n atomic.Int32 // delegations: a quick "none" for every request

	mu       sync.Mutex
	byPath   map[string]*dirDeleg
	byIno    map[uint64]*dirDeleg
	below    map[string]int
	tokens   map[uint64]*tmpFile
	held     map[uint32]int
	reserved map[uint32]int
	next     uint64
}

func newDirDelegs() *dirDelegs {
	return &dirDelegs{byPath: make(map[string]*dirDeleg), byIno: make(map[uint64]*dirDeleg),
		below: make(map[string]int), tokens: make(map[uint64]*tmpFile), held: make(map[uint32]int),
		reserved: make(map[uint32]int)}
}

// ancestors calls fn for every proper ancestor of p (cleaned, not "."),
// "." included.
func ancestors(p string, fn func(a string)) {
	for {
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			fn(".")
			return
		}
		p = p[:i]
		fn(p)
	}
}

// add records delegation d (mu held).
func (t *dirDelegs) add(d *dirDeleg) {
	t.byPath[d.path] = d
	t.byIno[d.ino] = d
	ancestors(d.path, func(a string) { t.below[a]++ })
	t.held[d.holder]++
	t.n.Add(1)
}

// remove forgets delegation d and returns its reserved files to close
// (mu held).
func (t *dirDelegs) remove(d *dirDeleg) []*tmpFile {
	if t.byPath[d.path] != d {
		return nil
	}
	delete(t.byPath, d.path)
	delete(t.byIno, d.ino)
	ancestors(d.path, func(a string) {
		if t.below[a]--; t.below[a] <= 0 {
			delete(t.below, a)
		}
	})
	if t.held[d.holder]--; t.held[d.holder] <= 0 {
		delete(t.held, d.holder)
	}
	t.n.Add(-1)
	var out []*tmpFile
	for tok, tf := range d.tmps {
		delete(t.tokens, tok)
		out = append(out, tf)
	}
	if t.reserved[d.holder] -= len(out); t.reserved[d.holder] <= 0 {
		delete(t.reserved, d.holder)
	}
	return out
}

func closeTmps(tfs []*tmpFile) {
	for _, tf := range tfs {
		tf.f.Close() // an unnamed file goes with its last descriptor
	}
}

// heldElsewhere reports whether a client other than client holds the
// delegation of directory ino (callbacks.grant: its grants are raced).
func (t *dirDelegs) heldElsewhere(ino uint64, client uint32) bool {
	if t.n.Load() == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.byIno[ino]
	return d != nil && d.holder != client
}

// conflicts returns the delegations of clients other than client that a
// request naming paths ps must recall first: those of a directory a path
// is in or below, and, when moves is set (the request may move or remove
// what it names), those below a path.
func (t *dirDelegs) conflicts(client uint32, ps []string, moves bool) []*dirDeleg {
	if t.n.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*dirDeleg
	seen := func(d *dirDeleg) {
		if d != nil && d.holder != client && !containsDeleg(out, d) {
			out = append(out, d)
		}
	}
	for _, raw := range ps {
		p, err := clean(raw)
		if err != nil {
			continue
		}
		seen(t.byPath[p])
		if p != "." {
			ancestors(p, func(a string) { seen(t.byPath[a]) })
		}
		if moves && t.below[p] > 0 {
			for dp, d := range t.byPath {
				if p == "." || strings.HasPrefix(dp, p+"/") {
					seen(d)
				}
			}
		}
	}
	return out
}

func containsDeleg(ds []*dirDeleg, d *dirDeleg) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

// dirDelegate serves DirDelegate as the request's identity (dispatch):
// the grant, the verdict and the reserved files.
func (s *Server) dirDelegate(c *wire.Conn, m *wire.DirDelegate) (*wire.DirDelegated, error) {
	cl, _ := c.Value.Load().(*client)
	if cl == nil || !s.cbs.registered(cl.id) {
		return nil, fmt.Errorf("directory delegations need callbacks: register first: %w", syscall.EOPNOTSUPP)
	}
	p, err := clean(m.Path)
	if err != nil {
		return nil, err
	}
	fd, err := s.openDirFd(p)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &stx); err != nil {
		return nil, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	r := &wire.DirDelegated{Attr: s.attrOfStatx(&stx), Reserved: []wire.Reserved{}}
	t := s.ddelegs
	t.mu.Lock()
	d := t.byPath[p]
	switch {
	case d != nil && d.holder != cl.id:
		t.mu.Unlock()
		return r, nil // another client holds it: not granted
	case d == nil && t.held[cl.id] >= maxDelegDirs:
		t.mu.Unlock()
		return r, nil
	case d == nil:
		d = &dirDeleg{path: p, ino: r.Attr.Ino, holder: cl.id, conn: c, tmps: make(map[uint64]*tmpFile)}
		t.add(d)
	}
	t.mu.Unlock()
	r.Granted = true
	r.Verdict = s.verdict(fd, p, &stx)
	if r.Verdict&wire.MayCreate != 0 && m.Reserve > 0 {
		r.Reserved = s.reserve(fd, d, min(m.Reserve, maxReserveAsk))
		if len(r.Reserved) == 0 {
			r.Verdict &^= wire.MayCreate // nothing to create into (no O_TMPFILE here?)
		}
	}
	return r, nil
}

// openDirFd opens directory p (cleaned) for reading, beneath the export.
func (s *Server) openDirFd(p string) (int, error) {
	f, err := s.openDirFile(p)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// verdict is what the calling identity may do in directory p (open as fd,
// its statx stx) without asking, as far as the server can tell now:
// create, when it may write and search the directory, which is not
// immutable and has no default ACL (a new file's mode is then the mode
// asked less the umask, as the client computes it); remove, when besides
// the directory is neither sticky nor append-only and no entry of it is
// immutable, append-only or a mount point. The export is not read-only.
func (s *Server) verdict(fd int, p string, stx *unix.Statx_t) uint32 {
	const attrs = unix.STATX_ATTR_IMMUTABLE | unix.STATX_ATTR_APPEND
	if s.cfg.ReadOnly || stx.Attributes&unix.STATX_ATTR_IMMUTABLE != 0 {
		return 0
	}
	if unix.Faccessat2(fd, "", unix.W_OK|unix.X_OK, unix.AT_EACCESS|unix.AT_EMPTY_PATH) != nil {
		return 0
	}
	var v uint32
	if n, err := unix.Fgetxattr(fd, "system.posix_acl_default", nil); err != nil || n <= 0 {
		v |= wire.MayCreate
	}
	if stx.Mode&syscall.S_ISVTX == 0 && stx.Attributes&attrs == 0 && s.removable(fd, p) {
		v |= wire.MayRemove
	}
	return v
}

// removable reports whether no entry of directory fd is immutable,
// append-only or a mount point (whose removal fails).
func (s *Server) removable(fd int, p string) bool {
	dup, err := unix.Dup(fd)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(dup), p)
	defer f.Close()
	names, err := f.Readdirnames(maxScanEntries + 1)
	if (err != nil && len(names) == 0 && !errors.Is(err, io.EOF)) || len(names) > maxScanEntries {
		return false
	}
	const bad = unix.STATX_ATTR_IMMUTABLE | unix.STATX_ATTR_APPEND | unix.STATX_ATTR_MOUNT_ROOT
	for _, name := range names {
		var stx unix.Statx_t
		if err := unix.Statx(fd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, 0, &stx); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return false
		}
		if stx.Attributes&bad != 0 {
			return false
		}
	}
	return true
}

// reserve makes up to n unnamed files in delegation d's directory (fd),
// as the request's identity: the owner, group and inheritance of a file
// the identity creates there.
func (s *Server) reserve(fd int, d *dirDeleg, n uint32) []wire.Reserved {
	var out []wire.Reserved
	t := s.ddelegs
	for range n {
		t.mu.Lock()
		full := t.reserved[d.holder] >= maxReserved || t.byPath[d.path] != d
		t.mu.Unlock()
		if full {
			break
		}
		tfd, err := unix.Openat(fd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			break // no O_TMPFILE on this file system, or no room
		}
		f := os.NewFile(uintptr(tfd), path.Join(d.path, "(reserved)"))
		var stx unix.Statx_t
		if err := unix.Statx(tfd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &stx); err != nil {
			f.Close()
			break
		}
		a := s.attrOfStatx(&stx)
		t.mu.Lock()
		if t.byPath[d.path] != d {
			t.mu.Unlock()
			f.Close()
			break
		}
		t.next++
		tf := &tmpFile{f: f, ino: a.Ino, d: d}
		d.tmps[t.next] = tf
		t.tokens[t.next] = tf
		t.reserved[d.holder]++
		t.mu.Unlock()
		out = append(out, wire.Reserved{Token: t.next, Attr: a})
	}
	return out
}

// takeTmp hands client's reserved file token over to a CommitNew of path
// (cleaned), which must be in the file's directory.
func (t *dirDelegs) takeTmp(client uint32, token uint64, p string) (*tmpFile, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tf := t.tokens[token]
	switch {
	case tf == nil || tf.d.holder != client:
		return nil, fmt.Errorf("create %s: the reserved file is gone (its directory's delegation ended): %w", p, syscall.EBADF)
	case path.Dir(p) != tf.d.path:
		return nil, fmt.Errorf("create %s: the reserved file belongs to %s: %w", p, tf.d.path, syscall.EINVAL)
	}
	delete(t.tokens, token)
	delete(tf.d.tmps, token)
	if t.reserved[client]--; t.reserved[client] <= 0 {
		delete(t.reserved, client)
	}
	return tf, nil
}

// tmpIno is the inode number of client's reserved file token, 0 if none.
func (t *dirDelegs) tmpIno(client uint32, token uint64) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tf := t.tokens[token]; tf != nil && tf.d.holder == client {
		return tf.ino
	}
	return 0
}

// returned gives client's delegations of directories inos back.
func (t *dirDelegs) returned(client uint32, inos []uint64) {
	t.mu.Lock()
	var tfs []*tmpFile
	for _, ino := range inos {
		if d := t.byIno[ino]; d != nil && d.holder == client {
			tfs = append(tfs, t.remove(d)...)
		}
	}
	t.mu.Unlock()
	closeTmps(tfs)
}

// left drops every delegation of a client whose connection ended.
func (t *dirDelegs) left(client uint32) {
	if t.n.Load() == 0 {
		return
	}
	t.mu.Lock()
	var tfs []*tmpFile
	for _, d := range t.byPath {
		if d.holder == client {
			tfs = append(tfs, t.remove(d)...)
		}
	}
	t.mu.Unlock()
	closeTmps(tfs)
}

// recallDirs recalls, before m is served for client cl, the delegations of
// other clients that m's paths reach: each holder is sent a CallbackBreak
// of kind CallbackWrite naming its directory and sends what it answered
// there on its own before it acks. A holder that does not ack within the
// recall timeout is disconnected (its delegations end with it).
func (s *Server) recallDirs(ctx context.Context, cl *client, m wire.Msg) {
	t := s.ddelegs
	if t.n.Load() == 0 {
		return
	}
	var id uint32
	if cl != nil {
		id = cl.id
	}
	ds := t.conflicts(id, wire.Paths(m), reachesBelow(m))
	if len(ds) > 0 {
		wire.HandOver(ctx) // a quick lookup too waits for another client now
	}
	for _, d := range ds {
		s.recallDir(ctx, d)
	}
}

// recallDir recalls delegation d and forgets it.
func (s *Server) recallDir(ctx context.Context, d *dirDeleg) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RecallTimeout)
	defer cancel()
	_, err := d.conn.Call(cctx, &wire.CallbackBreak{Kind: wire.CallbackWrite, Items: []wire.BreakItem{{Ino: d.ino}}})
	if err != nil && d.conn.Err() == nil {
		s.log.Warn("a client did not give a directory delegation back in time: disconnecting it",
			"client", d.holder, "dir", d.path, "err", err)
		d.conn.Close()
	}
	t := s.ddelegs
	t.mu.Lock()
	tfs := t.remove(d)
	t.mu.Unlock()
	closeTmps(tfs)
}

// delegated serves a DirDelegate (serve: as its identity) and, for a grant,
// watches the directory (its direct changes recall the delegation: the
// watcher's breaks reach the holder) and breaks the other clients'
// callbacks on its entries, so that their next look at it reaches the
// server, which recalls the delegation first.
func (s *Server) delegated(ctx context.Context, cl *client, m *wire.DirDelegate, serve func() (wire.Msg, error)) (wire.Msg, error) {
	r, err := serve()
	g, ok := r.(*wire.DirDelegated)
	if err != nil || !ok || !g.Granted {
		return r, err
	}
	if _, watched := s.watch.watch(cleanOrRoot(m.Path)); !watched {
		// Direct changes would go unnoticed: no verdict (the holder keeps
		// the delegation, which changes nothing then).
		g.Verdict = 0
	}
	s.cbs.Break(ctx, []wire.BreakItem{{Ino: g.Attr.Ino, Name: wire.BreakEntries}}, cl.id)
	return g, nil
}

// reachesBelow reports whether m may change what is below what it names:
// move or remove it, or change its permissions (on which the verdicts of
// the delegations below rest).
func reachesBelow(m wire.Msg) bool {
	if as, ok := m.(*wire.As); ok {
		m = as.Msg
	}
	switch m.(type) {
	case *wire.Rename, *wire.Rmdir, *wire.Unlink, *wire.SetAttr, *wire.SetXattr, *wire.RemoveXattr:
		return true
	}
	return false
}
