package agent

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Entry changes answered here, sent later (issue 9: `rm -rf`, `tar x`).
// Under a directory's delegation (deleg.go) with the server's verdict for
// the caller, the outcome of an unlink of a name the agent knows (its
// listing under the delegation; a file with one link) is certain: nobody
// else can change the directory meanwhile, and the caller may remove
// entries there. Such an unlink is answered at once and queued, as is a
// file created into a reserved inode (newfile.go). The queue is sent in
// order: removals in EntryBatch messages — a few milliseconds after the
// first is queued, when 256 wait, before an rmdir of their directory (in
// the same batch, whose outcome the rmdir waits for and returns), and
// before any request of this agent that names a path a queued change
// touches (the server must see them first) or that a recall of the
// delegation waits for; a created file with its close (CommitNew).
//
// An rmdir is always waited for: it is the directory's synchronous point.
// What the verdict cannot foresee — a change made directly in the export
// meanwhile, a disk error — fails a queued removal on the server: the
// failure is logged, counted, and returned by the next rmdir of that
// directory through this mount (rm -rf's own next step), or by the next
// synchronous operation in it; it is never dropped silently.

const (
	deferDelay = 5 * time.Millisecond // how long a queued removal may wait
	batchMax   = 256                  // removals per EntryBatch
)

// pendKind is what a queued change is.
type pendKind int

const (
	pendUnlink pendKind = iota
	pendRmdir
	pendCreate
)

// pendOp is one queued change.
type pendOp struct {
	seq    uint64
	kind   pendKind
	path   string
	caller vfs.Caller
	f      *file // pendCreate: the new file
	at     time.Time
	done   chan error // pendRmdir: its outcome, for the waiting rmdir
}

// pending is the agent's queue of changes answered here.
//
// INVARIANT: under mu, paths[p] counts the ops of path p queued or being
// sent (a flush holds flushMu until they are settled) and under[d] those
// of paths strictly below directory d.
type pending struct {
	a     *Agent
	delay time.Duration // how long a queued removal may wait (deferDelay)

	flushMu sync.Mutex // one flush at a time: the queue goes out in order

	mu     sync.Mutex
	ops    []*pendOp
	next   uint64
	paths  map[string]int
	under  map[string]int
	timer  *time.Timer
	failed map[string]error   // a queued change's failure, by its directory
	open   map[uint64]int     // files open here, by inode number
	files  map[*file]struct{} // the files open here (unlinkedHere)

	// counters for /metrics
	removals, creates, fails atomic.Int64
}

// metrics are the counters of the changes answered here.
func (q *pending) metrics() []prometheus.Collector {
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{
		counter("coopfs_answered_removals_total", "Unlinks and rmdirs answered before the server had them, under a directory delegation.", &q.removals),
		counter("coopfs_answered_creates_total", "Creates answered before the server had them, into reserved files of a directory delegation.", &q.creates),
		counter("coopfs_answered_failures_total", "Changes answered before the server had them that the server then refused (logged; reported by the directory's rmdir or the file's close).", &q.fails),
	}
}

func (q *pending) init(a *Agent) {
	q.a, q.delay = a, deferDelay
	q.paths = make(map[string]int)
	q.under = make(map[string]int)
	q.failed = make(map[string]error)
	q.open = make(map[uint64]int)
	q.files = make(map[*file]struct{})
}

// track counts f open (its unlink must reach the server before it is
// answered: the open file's fstat shows the link count the server has) and
// returns it; a nil f is returned as a nil vfs.File.
func (q *pending) track(f *file) vfs.File {
	if f == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	f.tracked = f.attr.Ino
	q.open[f.tracked]++
	q.files[f] = struct{}{}
	return f
}

// untrack counts f closed.
func (q *pending) untrack(f *file) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if f.tracked == 0 {
		return
	}
	if q.open[f.tracked]--; q.open[f.tracked] <= 0 {
		delete(q.open, f.tracked)
	}
	delete(q.files, f)
	f.tracked = 0
}

// unlinkedHere counts the link the unlink of path took from the files
// open here under that name: one opened without a server handle (from the
// cache, or with its data) answers fstat from what it was opened with, and
// would go on reporting the link (ext4 reports st_nlink 0 for an open file
// whose only name is gone).
func (q *pending) unlinkedHere(path string) {
	q.mu.Lock()
	fs := make([]*file, 0, len(q.files))
	for f := range q.files {
		fs = append(fs, f)
	}
	q.mu.Unlock()
	for _, f := range fs {
		f.mu.Lock()
		if f.path == path && !f.unlinked {
			f.unlinked = true
			if f.attr.Nlink > 0 {
				f.attr.Nlink--
			}
		}
		f.mu.Unlock()
	}
}

// isOpen reports whether a file of inode ino is open here.
func (q *pending) isOpen(ino uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.open[ino] > 0
}

// eachAncestor calls fn for every proper ancestor of p ("" the root).
func eachAncestor(p string, fn func(a string)) {
	for p != "" {
		p = parentOf(p)
		fn(p)
	}
}

// push queues op and returns it (mu not held).
func (q *pending) push(op *pendOp) *pendOp {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.next++
	op.seq, op.at = q.next, time.Now()
	q.ops = append(q.ops, op)
	q.paths[op.path]++
	eachAncestor(op.path, func(a string) { q.under[a]++ })
	if op.kind != pendCreate && q.timer == nil {
		q.timer = time.AfterFunc(q.delay, q.tick)
	}
	return op
}

// popThrough takes the queued ops up to seq (mu held); they count as
// pending until sent (sent).
func (q *pending) popThrough(seq uint64) []*pendOp {
	n := 0
	for n < len(q.ops) && q.ops[n].seq <= seq {
		n++
	}
	out := q.ops[:n:n]
	q.ops = q.ops[n:]
	return out
}

// sent stops counting ops, sent and settled.
func (q *pending) sent(ops []*pendOp) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, op := range ops {
		if q.paths[op.path]--; q.paths[op.path] <= 0 {
			delete(q.paths, op.path)
		}
		eachAncestor(op.path, func(a string) {
			if q.under[a]--; q.under[a] <= 0 {
				delete(q.under, a)
			}
		})
	}
}

// overlaps returns, when an op queued or being sent has a path of ps, or
// above or below one, the sequence number to flush through: a request
// naming those paths must follow it to the server. 0: none.
func (q *pending) overlaps(ps []string) uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.paths) == 0 {
		return 0
	}
	hit := false
	for _, p := range ps {
		if q.paths[p] > 0 || q.under[p] > 0 {
			hit = true
		}
		eachAncestor(p, func(a string) { hit = hit || q.paths[a] > 0 })
	}
	if !hit {
		return 0
	}
	return q.next // the ops being sent are older: the flush waits for them
}

// pendingUnder reports whether changes in or below directory dir are
// queued.
func (q *pending) pendingUnder(dir string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.under[dir] > 0
}

// tick sends the queued removals that waited deferDelay: those before the
// first queued new file not closed yet (it goes with its close) unless it
// waited longer than a second.
func (q *pending) tick() {
	q.mu.Lock()
	q.timer = nil
	var upto uint64
	for _, op := range q.ops {
		if op.kind == pendCreate && time.Since(op.at) < time.Second {
			break
		}
		upto = op.seq
	}
	rest := len(q.ops) > 0 && (upto == 0 || upto != q.ops[len(q.ops)-1].seq)
	q.mu.Unlock()
	if upto != 0 {
		q.flushThrough(context.Background(), upto)
	}
	if rest {
		q.mu.Lock()
		if q.timer == nil && len(q.ops) > 0 {
			q.timer = time.AfterFunc(q.delay, q.tick)
		}
		q.mu.Unlock()
	}
}

// flush sends everything queued.
func (q *pending) flush(ctx context.Context) {
	q.mu.Lock()
	var last uint64
	if len(q.ops) > 0 {
		last = q.ops[len(q.ops)-1].seq
	}
	q.mu.Unlock()
	if last != 0 {
		q.flushThrough(ctx, last)
	}
}

// before sends, ahead of request m, the queued changes m depends on.
func (q *pending) before(ctx context.Context, m wire.Msg) {
	if seq := q.overlaps(wire.Paths(m)); seq != 0 {
		q.flushThrough(ctx, seq)
	}
}

// flushThrough sends the queued changes up to seq, in order.
func (q *pending) flushThrough(ctx context.Context, seq uint64) {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	ops := q.popThrough(seq)
	q.mu.Unlock()
	defer q.sent(ops)
	for len(ops) > 0 {
		if ops[0].kind == pendCreate {
			q.a.materialize(ctx, ops[0].f) // newfile.go
			ops = ops[1:]
			continue
		}
		n := 1
		for n < len(ops) && n < batchMax && ops[n].kind != pendCreate && sameCaller(ops[n].caller, ops[0].caller) {
			n++
		}
		q.sendBatch(ctx, ops[:n])
		ops = ops[n:]
	}
}

// sendBatch sends removals in one EntryBatch and settles their outcome.
func (q *pending) sendBatch(ctx context.Context, ops []*pendOp) {
	for len(ops) > 0 {
		b := &wire.EntryBatch{Seq: q.a.writeSeq.Add(1), Ops: make([]wire.EntryOp, len(ops))}
		for i, op := range ops {
			b.Ops[i] = wire.EntryOp{Path: op.path, Dir: op.kind == pendRmdir}
		}
		if _, gen, ok := q.a.sess.live(); ok {
			b.Release = q.a.releases.take(gen) // closed files ride along (release.go)
		}
		cctx := vfs.WithCaller(context.WithoutCancel(ctx), ops[0].caller)
		r, _, err := q.a.sess.call(cctx, as(cctx, b), true)
		done := 0
		if d, ok := r.(*wire.EntryDone); ok && err == nil {
			done = int(d.Done)
			if done < len(ops) {
				err = fmt.Errorf("%s: %s: %w", ops[done].path, d.Msg, syscall.Errno(d.Errno))
			}
		} else if err == nil {
			err = fmt.Errorf("entry batch: unexpected reply %v: %w", r.Type(), syscall.EIO)
		}
		for _, op := range ops[:done] {
			q.settle(op, nil)
		}
		if done == len(ops) {
			return
		}
		q.settle(ops[done], err)
		ops = ops[done+1:]
	}
}

// settle records the outcome of a queued removal: a waiting rmdir gets it;
// a failure is logged and kept for the rmdir of its directory. A removal
// whose name was gone already (removed directly in the export meanwhile)
// left what it promised: no failure.
func (q *pending) settle(op *pendOp, err error) {
	if errors.Is(err, syscall.ENOENT) {
		q.a.log.Info("a removal answered before the server had it found the name gone there", "path", op.path)
		err = nil
	}
	if op.done != nil {
		op.done <- err
		if err == nil || op.kind == pendRmdir {
			return
		}
	}
	if err == nil {
		return
	}
	q.a.log.Warn("a removal answered before the server had it failed there", "path", op.path, "err", err)
	q.fails.Add(1)
	q.mu.Lock()
	if len(q.failed) > 4096 {
		clear(q.failed) // (logged above)
	}
	q.failed[parentOf(op.path)] = err
	q.mu.Unlock()
	q.a.entryChanged(q.a.cbs.token(), op.path, false, errUnknownOutcome, nil)
}

// errUnknownOutcome marks a change whose outcome the cache must not trust.
var errUnknownOutcome = errors.New("outcome unknown")

// takeFailure returns (once) the failure of a queued change in directory
// dir, for the next synchronous operation there.
func (q *pending) takeFailure(dir string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	err, ok := q.failed[dir]
	if !ok {
		return nil
	}
	delete(q.failed, dir)
	return fmt.Errorf("an earlier change in this directory, answered before the server had it, failed: %w", err)
}

// deferRemove answers an unlink (or, with dir, an rmdir) of p here when
// its outcome is certain (see above), and queues it. An rmdir waits for
// its batch and returns its outcome. ok is false when it must go to the
// server as usual.
func (a *Agent) deferRemove(ctx context.Context, p string, dir bool) (ok bool, err error) {
	if p == "" || !a.pend.enabled() {
		return false, nil
	}
	parent := parentOf(p)
	a.delegs.use.RLock() // deleg.go: the delegation stays until the removal is queued
	dl, c, may := a.delegs.may(ctx, parent, wire.MayRemove)
	if !may || !a.removable(p, dir) {
		a.delegs.use.RUnlock()
		return false, nil
	}
	op := &pendOp{kind: pendUnlink, path: p, caller: c}
	links := 0
	if dir {
		op.kind, op.done, links = pendRmdir, make(chan error, 1), -1
	}
	tok := a.cbs.token()
	a.pend.removals.Add(1)
	a.pend.push(op)
	a.entryChanged(tok, p, false, nil, nil) // names.go: gone from the listing
	a.delegs.changed(dl, links)
	a.delegs.removing(parent)
	a.delegs.use.RUnlock()
	if !dir {
		return true, nil
	}
	a.pend.flushThrough(ctx, op.seq)
	err = <-op.done
	if f := a.pend.takeFailure(p); f != nil && err != nil {
		return true, f // an unlink in it failed: why it is not empty
	}
	return true, err
}

// removable reports whether p's removal (dir: an rmdir) is certain as far
// as this agent's cache tells: p is in its directory's listing, of the
// right type; a file's attributes say it has one link (another name would
// keep showing the old link count until the server has the unlink) and it
// is not open here (its fstat would, pjdfstest unlink/14.t); a
// directory's own listing is known empty under its delegation (nobody else
// can add to it).
func (a *Agent) removable(p string, dir bool) bool {
	cb := a.cbs
	cb.mu.Lock()
	h, ok := cb.c.paths[p]
	names, full := cb.c.full[parentOf(p)]
	_, listed := names[path.Base(p)]
	sub, subFull := cb.c.full[p]
	cb.mu.Unlock()
	if !ok || !full || !listed || h.dir != dir {
		return false
	}
	if !dir {
		return h.hasAttr && h.attr.Nlink == 1 && !a.pend.isOpen(h.ino)
	}
	return subFull && len(sub) == 0 && a.delegs.held(p) != nil
}

// enabled reports whether changes may be answered here.
func (q *pending) enabled() bool {
	return q.a.delegs.enabled() && q.a.writePolicy() == cache.WriteThrough
}
