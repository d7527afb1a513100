package agent

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Directory delegations, the client side (internal/server/dirdeleg.go). A
// delegation makes this agent the only client that reads or changes a
// directory's entries until the server recalls it or the agent gives it
// back; with it and the server's verdict for the caller's identity, the
// agent knows the outcome of its own creates and removals in the
// directory and answers them itself (defer.go, newfile.go). It asks for
// one when it makes a directory (tar: every file follows), and before its
// first entry change in a directory whose listing it knows (rm -rf: the
// first removal in each directory waits for the server, the rest do not),
// in the same round trip as that change.

const (
	// reserveFirst and reserveMax are how many new files a delegation
	// reserves at first and at most per request (it asks for more, twice
	// as many, when three quarters are used). Each costs the server an
	// inode made and, unused, freed again: half of Go's source
	// directories hold two files or fewer.
	reserveFirst = 4
	reserveMax   = 64
	// delegIdle is how long a delegation without deferred changes is kept;
	// then it is given back (another client's access costs a recall).
	delegIdle = 2 * time.Second
	// delegAskWait bounds how long a change waits for a delegation asked
	// a moment ago (a round trip) before it goes to the server itself.
	delegAskWait = 50 * time.Millisecond
	// delegRetry is how long a directory is not asked for again after a
	// refusal or a recall.
	delegRetry = time.Second
)

// deleg is one directory's delegation.
type deleg struct {
	path string
	ino  uint64
	gen  uint64 // the session generation it was granted in
	// verdicts and reserved files, by identity (idKey): what that caller
	// may do without asking, and the new files it may create into.
	verdicts map[string]uint32
	reserved map[string][]wire.Reserved
	asked    map[string]uint32 // the last reservation asked per identity
	// attr is the directory's attributes as this agent's changes leave
	// them (the server's, updated by the changes answered here), when
	// attrOK: the kernel asks for them before every create and removal.
	// They are not known at the grant (a change of this agent's may have
	// crossed it); the first getattr asks the server, after the changes
	// queued in the directory.
	attr   wire.Attr
	attrOK bool
	used   time.Time
}

// delegs is the agent's table of directory delegations.
type delegs struct {
	a *Agent
	// use is held (read) by a change answered under a delegation, from
	// the check of the delegation to its place in the queue, and
	// (write) by the end of a delegation, which sends the queue first.
	use sync.RWMutex

	mu      sync.Mutex
	byPath  map[string]*deleg
	byIno   map[uint64]*deleg
	asking  map[string]chan struct{} // requests in flight, by path
	refused map[string]time.Time     // requests refused, by path
	removed map[string]time.Time     // when this agent last removed an entry, by directory
	epoch   uint64                   // recalls and returns so far
	stop    chan struct{}
	stopped sync.Once
}

func (d *delegs) init(a *Agent) {
	d.a = a
	d.byPath = make(map[string]*deleg)
	d.byIno = make(map[uint64]*deleg)
	d.asking = make(map[string]chan struct{})
	d.refused = make(map[string]time.Time)
	d.removed = make(map[string]time.Time)
	d.stop = make(chan struct{})
	go d.sweep()
}

// idKey names a caller's identity.
func idKey(c vfs.Caller) string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(uint64(c.UID), 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(uint64(c.GID), 10))
	for _, g := range c.Groups {
		b.WriteByte(',')
		b.WriteString(strconv.FormatUint(uint64(g), 10))
	}
	return b.String()
}

// enabled reports whether the agent may hold delegations now: the server
// knows them and the callbacks of the current connection hold.
func (d *delegs) enabled() bool {
	return d.a.fastMeta.Load() && d.a.liveGen() != 0 && !d.a.cfg.NoCallbacks
}

// held returns dir's delegation, valid in the current connection.
func (d *delegs) held(dir string) *deleg {
	gen := d.a.liveGen()
	d.mu.Lock()
	defer d.mu.Unlock()
	dl := d.byPath[dir]
	if dl == nil || dl.gen != gen || gen == 0 {
		return nil
	}
	return dl
}

// ask asks the server, in the background, for dir's delegation as the
// caller of ctx, with reserve new files; nothing when one is held for that
// identity with files to spare, or a request is in flight.
func (d *delegs) ask(ctx context.Context, dir string, reserve uint32) {
	if !d.enabled() {
		return
	}
	c, ok := vfs.CallerOf(ctx)
	if !ok || !c.HasUmask && reserve > 0 {
		reserve = 0 // a create's mode needs the caller's umask: none deferred
	}
	key := idKey(c)
	d.mu.Lock()
	if _, busy := d.asking[dir]; busy || time.Since(d.refused[dir]) < delegRetry {
		d.mu.Unlock()
		return
	}
	if dl := d.byPath[dir]; dl != nil && dl.gen == d.a.liveGen() {
		_, known := dl.verdicts[key]
		left := len(dl.reserved[key])
		if known && (reserve == 0 || dl.verdicts[key]&wire.MayCreate == 0 || uint32(left)*4 > dl.asked[key]) {
			d.mu.Unlock()
			return
		}
		reserve = min(max(reserve, 2*dl.asked[key]), reserveMax)
	}
	done := make(chan struct{})
	d.asking[dir] = done
	epoch := d.epoch
	d.mu.Unlock()
	cctx := vfs.WithCaller(context.WithoutCancel(ctx), c)
	go func() {
		defer close(done)
		d.request(cctx, dir, key, reserve, epoch)
	}()
}

// askBefore asks for dir's delegation before a change in it that goes to
// the server, when the agent knows dir's listing (the changes after it
// can then be answered here).
func (d *delegs) askBefore(ctx context.Context, dir string, reserve uint32) {
	if !d.enabled() {
		return
	}
	cb := d.a.cbs
	cb.mu.Lock()
	_, known := cb.c.full[dir]
	cb.mu.Unlock()
	if known {
		d.ask(ctx, dir, reserve)
	}
}

// removing notes that this agent removes an entry of directory dir.
func (d *delegs) removing(dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.removed) > 4096 {
		clear(d.removed)
	}
	d.removed[dir] = time.Now()
}

// listing asks for the delegation of directory dir, about to be listed
// from the server, when this agent removed an entry of a directory above
// it a moment ago: `rm -rf` lists a directory before it removes its
// entries, and with the delegation asked with the listing, the first
// removal need not wait for the server either.
func (d *delegs) listing(ctx context.Context, dir string) {
	if dir == "" || !d.enabled() {
		return
	}
	recent := false
	d.mu.Lock()
	eachAncestor(dir, func(a string) {
		if at, ok := d.removed[a]; ok && time.Since(at) < delegIdle {
			recent = true
		}
	})
	d.mu.Unlock()
	if recent {
		d.ask(ctx, dir, 0)
	}
}

// request sends one DirDelegate and records its answer. An answer that
// crossed a recall or a return (epoch moved) is not used: what it granted
// may be gone already (the server then holds a delegation this agent does
// not know of, which a recall or the connection's end clears).
func (d *delegs) request(ctx context.Context, dir, key string, reserve uint32, epoch uint64) {
	r, gen, err := d.a.sess.call(ctx, as(ctx, &wire.DirDelegate{Path: dir, Reserve: reserve}), true)
	g, ok := r.(*wire.DirDelegated)
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.asking, dir)
	if d.epoch != epoch {
		return
	}
	if err != nil || !ok || !g.Granted {
		d.refused[dir] = time.Now()
		if len(d.refused) > 4096 {
			clear(d.refused)
		}
		return
	}
	dl := d.byPath[dir]
	if dl == nil || dl.gen != gen {
		dl = &deleg{path: dir, ino: g.Attr.Ino, gen: gen, verdicts: make(map[string]uint32),
			reserved: make(map[string][]wire.Reserved), asked: make(map[string]uint32)}
		// Attributes the callbacks cache holds now are current: a change by
		// anyone else, or by this agent, would have dropped them.
		if at, ok := d.a.cachedAttr(dir); ok && at.Ino == dl.ino {
			dl.attr, dl.attrOK = at, true
		}
		d.dropLocked(d.byPath[dir])
		d.byPath[dir], d.byIno[dl.ino] = dl, dl
	}
	dl.verdicts[key] = g.Verdict
	dl.reserved[key] = append(dl.reserved[key], g.Reserved...)
	dl.asked[key] = max(reserve, uint32(len(g.Reserved)))
	dl.used = time.Now()
}

// wait waits a moment for a request for dir in flight.
func (d *delegs) wait(dir string) {
	d.mu.Lock()
	ch := d.asking[dir]
	d.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-time.After(delegAskWait):
	}
}

// may reports whether the caller of ctx may make a change of kind (a
// wire.MayCreate or MayRemove) in dir without asking, and returns the
// delegation.
func (d *delegs) may(ctx context.Context, dir string, kind uint32) (*deleg, vfs.Caller, bool) {
	c, ok := vfs.CallerOf(ctx)
	if !ok {
		return nil, c, false
	}
	dl := d.held(dir)
	if dl == nil {
		d.wait(dir)
		if dl = d.held(dir); dl == nil {
			return nil, c, false
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return dl, c, dl.verdicts[idKey(c)]&kind != 0
}

// takeReserved hands out one of the caller's reserved files of dl,
// waiting a moment for more when a request for them is on its way.
func (d *delegs) takeReserved(dl *deleg, c vfs.Caller) (wire.Reserved, bool) {
	key := idKey(c)
	d.mu.Lock()
	if len(dl.reserved[key]) == 0 && d.asking[dl.path] != nil {
		d.mu.Unlock()
		d.wait(dl.path)
		d.mu.Lock()
	}
	defer d.mu.Unlock()
	rs := dl.reserved[key]
	if len(rs) == 0 || d.byPath[dl.path] != dl {
		return wire.Reserved{}, false
	}
	r := rs[len(rs)-1]
	dl.reserved[key] = rs[:len(rs)-1]
	return r, true
}

// changed applies a change answered here to dl's attributes: the times,
// and the link count (links: +1 for a directory made, -1 for one removed).
func (d *delegs) changed(dl *deleg, links int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now().UnixNano()
	dl.attr.Mtime, dl.attr.Ctime = now, now
	dl.attr.Nlink = uint32(int(dl.attr.Nlink) + links)
	dl.used = time.Now()
	d.a.dirs.forget(dl.path) // dirattrs.go: a reply's attributes predate it
}

// dirAttr returns directory p's attributes while this agent holds its
// delegation (the server's lag behind the changes answered here).
func (d *delegs) dirAttr(p string) (wire.Attr, bool) {
	dl := d.held(p)
	if dl == nil {
		return wire.Attr{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return dl.attr, dl.attrOK
}

// serverAttr notes directory p's attributes as the server gave them in a
// reply, when this agent holds its delegation; with changes of it queued,
// they lag behind, and the next getattr asks again (after them).
func (d *delegs) serverAttr(p string, at wire.Attr) {
	dl := d.held(p)
	if dl == nil {
		return
	}
	lag := d.a.pend.pendingUnder(p)
	d.mu.Lock()
	defer d.mu.Unlock()
	dl.attr, dl.attrOK = at, dl.ino == at.Ino && !lag
}

// forgetAttr notes a change of directory p the agent cannot tell the
// outcome of on its attributes (a rename, an ACL): the next getattr asks.
func (d *delegs) forgetAttr(p string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dl := d.byPath[p]; dl != nil {
		dl.attrOK = false
	}
}

// dropLocked forgets dl (mu held).
func (d *delegs) dropLocked(dl *deleg) {
	if dl == nil || d.byPath[dl.path] != dl {
		return
	}
	delete(d.byPath, dl.path)
	delete(d.byIno, dl.ino)
}

// recalled serves a break that names delegated directories: a recall
// (kind CallbackWrite) or a change made by anyone else (a direct change in
// the export). Everything answered here is sent first, then the
// delegations are forgotten — given back, when the server did not recall
// them itself. It runs before the break is acked.
func (d *delegs) recalled(ctx context.Context, m *wire.CallbackBreak) {
	if m.All {
		d.use.Lock()
		defer d.use.Unlock()
		d.a.pend.flush(ctx)
		d.returnAll(ctx, m.Kind != wire.CallbackWrite)
		return
	}
	var hit []*deleg
	d.mu.Lock()
	if m.Kind == wire.CallbackWrite {
		// A recall may name a delegation whose grant is still on its way
		// here (the reply and the recall cross): that grant is void.
		d.epoch++
	}
	for _, it := range m.Items {
		if dl := d.byIno[it.Ino]; dl != nil {
			hit = append(hit, dl)
		}
	}
	d.mu.Unlock()
	d.end(ctx, hit, m.Kind != wire.CallbackWrite)
}

// end ends the delegations hit, after sending what was answered under
// them, and gives them back when give is set (the server did not end them
// itself).
func (d *delegs) end(ctx context.Context, hit []*deleg, give bool) {
	if len(hit) == 0 {
		return
	}
	d.use.Lock() // no change answered under them begins or ends meanwhile
	defer d.use.Unlock()
	d.a.pend.flush(ctx)
	d.mu.Lock()
	d.epoch++
	var inos []uint64
	for _, dl := range hit {
		if d.byPath[dl.path] == dl {
			d.dropLocked(dl)
			inos = append(inos, dl.ino)
		}
		if !give {
			// Recalled: another client works in it too. Asked again at
			// once, it would be recalled at that client's next look.
			d.refused[dl.path] = time.Now()
		}
	}
	d.mu.Unlock()
	if give {
		d.give(inos)
	}
}

// invalidate gives back the delegations of directory p and of those below
// it, after sending what was answered under them: this agent is about to
// change p's permissions or ACLs, on which their verdicts rest. It returns
// done, to call once the change is answered: a delegation asked for before
// then (a request in flight, or one sent meanwhile) may carry a verdict
// the server gave before the change, and is not used.
func (d *delegs) invalidate(ctx context.Context, p string) (done func()) {
	d.mu.Lock()
	var hit []*deleg
	for dp, dl := range d.byPath {
		if p == "" || dp == p || strings.HasPrefix(dp, p+"/") {
			hit = append(hit, dl)
		}
	}
	d.epoch++ // requests in flight
	d.mu.Unlock()
	d.end(ctx, hit, true)
	return func() {
		d.mu.Lock()
		d.epoch++ // requests sent during the change
		d.mu.Unlock()
	}
}

// returnAll forgets every delegation, giving them back when tell is set.
func (d *delegs) returnAll(ctx context.Context, tell bool) {
	d.mu.Lock()
	d.epoch++
	var inos []uint64
	for _, dl := range d.byPath {
		inos = append(inos, dl.ino)
		d.dropLocked(dl)
	}
	d.mu.Unlock()
	if tell {
		d.give(inos)
	}
}

// give sends the server the delegations given back (one-way).
func (d *delegs) give(inos []uint64) {
	if len(inos) == 0 {
		return
	}
	if c, _, ok := d.a.sess.live(); ok {
		if err := c.Send(&wire.DirReturn{Inos: inos}); err != nil {
			d.a.log.Debug("giving directory delegations back", "dirs", len(inos), "err", err)
		}
	}
}

// connected forgets the delegations of an earlier connection (the server
// dropped them with it).
func (d *delegs) connected() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.epoch++
	clear(d.byPath)
	clear(d.byIno)
	clear(d.refused)
}

// sweep gives back, once a second, the delegations idle for delegIdle
// with nothing pending in them.
func (d *delegs) sweep() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.mu.Lock()
		var idle []*deleg
		for _, dl := range d.byPath {
			if time.Since(dl.used) > delegIdle {
				idle = append(idle, dl)
			}
		}
		d.mu.Unlock()
		d.giveIdle(idle)
	}
}

// giveIdle gives back the delegations of idle with nothing queued in them.
func (d *delegs) giveIdle(idle []*deleg) {
	if len(idle) == 0 {
		return
	}
	d.use.Lock()
	defer d.use.Unlock()
	var inos []uint64
	for _, dl := range idle {
		if d.a.pend.pendingUnder(dl.path) {
			continue
		}
		d.mu.Lock()
		if d.byPath[dl.path] == dl {
			d.dropLocked(dl)
			d.epoch++
			inos = append(inos, dl.ino)
		}
		d.mu.Unlock()
	}
	slices.Sort(inos)
	d.give(inos)
}

// close gives every delegation back and stops the sweep.
func (d *delegs) close() {
	d.stopped.Do(func() {
		close(d.stop)
		d.returnAll(context.Background(), true)
	})
}
