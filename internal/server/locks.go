package server

import (
	"context"
	"fmt"
	"sync"
	"syscall"

	"github.com/coopfs/coopfs/internal/wire"
)

// Advisory locks across clients. The server holds every fcntl byte-range
// lock and every flock lock taken through any mount, in a table keyed by
// file (inode number) and owner (client connection, the client kernel's
// lock owner id). Locks live in the server only: a program on the server
// machine that locks the export's file directly does not see them, and they
// do not see its locks (docs/protocol.md, "Locks", says why).
//
// A lock is dropped when its owner unlocks it, when the owner closes a
// descriptor of the file (fcntl locks, LockRelease from the client's
// FLUSH), when the open file it was taken through is released (flock and
// OFD locks), and when the client's connection ends (the client died or
// lost the server: its locks are gone, as NFSv3's are without lockd's
// reclaim).

// lockOwner is who holds a lock: a client connection and the lock owner id
// its kernel gave.
type lockOwner struct {
	client uint32
	owner  uint64
}

// heldLock is one lock in the table.
type heldLock struct {
	owner  lockOwner
	flock  bool   // flock(2) lock space: whole file; else fcntl byte ranges
	typ    uint32 // wire.LockRead or wire.LockWrite
	start  uint64
	end    uint64 // inclusive
	pid    uint32
	handle uint64 // the server handle it was taken through
}

func (l *heldLock) overlaps(start, end uint64) bool { return l.start <= end && start <= l.end }

// fileLocks is the locks of one file.
type fileLocks struct {
	locks   []heldLock
	waiters int
	wake    chan struct{} // closed and replaced whenever a lock goes away or weakens
}

// lockTable is every lock the server holds, in shards by inode: each has
// its own mutex, so that a change to one file's lock list (rebuilt on each
// change) holds up only the files of its shard. It does no I/O and owns no
// goroutine; blocked requests wait on a file's wake channel.
//
// INVARIANT: no two locks of different owners in one lock space of a file
// conflict (overlap with at least one write lock); a file with neither
// locks nor waiters has no entry; total is the number of locks in all
// shards and held[c] those of client c.
type lockTable struct {
	shards     [lockShards]lockShard
	maxWaiting int

	// cmu guards the counts; it is taken inside a shard's mutex, never
	// the other way round.
	cmu     sync.Mutex
	waiting map[uint32]int // blocked requests per client
	// held counts the locks of each client and total those of all: a
	// client past maxHeld, or the server past maxTotal, gets ENOLCK, so
	// that no file's list grows without bound.
	held              map[uint32]int
	total             int
	maxHeld, maxTotal int
}

// lockShards is the number of shards of the lock table.
const lockShards = 64

type lockShard struct {
	mu      sync.Mutex
	files   map[uint64]*fileLocks
	cancels map[waitKey]map[chan struct{}]struct{} // blocked requests, by who waits where
}

type waitKey struct {
	ino   uint64
	owner lockOwner
}

func newLockTable(maxWaiting int) *lockTable {
	t := &lockTable{waiting: make(map[uint32]int), maxWaiting: maxWaiting, held: make(map[uint32]int)}
	for i := range t.shards {
		t.shards[i].files = make(map[uint64]*fileLocks)
		t.shards[i].cancels = make(map[waitKey]map[chan struct{}]struct{})
	}
	return t
}

func (t *lockTable) shard(ino uint64) *lockShard { return &t.shards[ino%lockShards] }

// each calls f with every file's locks, one shard locked at a time.
func (t *lockTable) each(f func(ino uint64, fl *fileLocks)) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for ino, fl := range sh.files {
			f(ino, fl)
		}
		sh.mu.Unlock()
	}
}

// counts returns the locks held and the requests waiting, in all.
func (t *lockTable) counts() (held, waiting int) {
	t.cmu.Lock()
	defer t.cmu.Unlock()
	for _, w := range t.waiting {
		waiting += w
	}
	return t.total, waiting
}

// count adds delta locks to client's (the shard's mu held).
func (t *lockTable) count(client uint32, delta int) {
	t.cmu.Lock()
	defer t.cmu.Unlock()
	t.total += delta
	if t.held[client] += delta; t.held[client] <= 0 {
		delete(t.held, client)
	}
}

// room says whether client may hold delta more locks (the shard's mu held).
func (t *lockTable) room(client uint32, delta int) bool {
	t.cmu.Lock()
	defer t.cmu.Unlock()
	return (t.maxHeld <= 0 || t.held[client]+delta <= t.maxHeld) && (t.maxTotal <= 0 || t.total+delta <= t.maxTotal)
}

// setLocked applies o's lock lk to f unless it would take o or the server
// past its cap (sh.mu held).
func (t *lockTable) setLocked(sh *lockShard, ino uint64, f *fileLocks, o lockOwner, flock bool, lk wire.Lock, handle uint64) error {
	old := f.locks
	changed := f.apply(o, flock, lk, handle) // leaves old as it was
	delta := len(f.locks) - len(old)
	if delta > 0 && !t.room(o.client, delta) {
		f.locks = old
		sh.tidy(ino, f, false)
		return syscall.ENOLCK
	}
	t.count(o.client, delta)
	sh.tidy(ino, f, changed)
	return nil
}

func (sh *lockShard) file(ino uint64) *fileLocks {
	f := sh.files[ino]
	if f == nil {
		f = &fileLocks{wake: make(chan struct{})}
		sh.files[ino] = f
	}
	return f
}

// tidy drops an unused entry and wakes the waiters of a changed one (sh.mu held).
func (sh *lockShard) tidy(ino uint64, f *fileLocks, changed bool) {
	if changed {
		close(f.wake)
		f.wake = make(chan struct{})
	}
	if len(f.locks) == 0 && f.waiters == 0 {
		delete(sh.files, ino)
	}
}

// conflict returns the first lock of another owner that conflicts with lk.
func conflict(f *fileLocks, o lockOwner, flock bool, lk wire.Lock) *heldLock {
	if f == nil {
		return nil
	}
	for i := range f.locks {
		l := &f.locks[i]
		if l.flock != flock || l.owner == o || !l.overlaps(lk.Start, lk.End) {
			continue
		}
		if l.typ == wire.LockWrite || lk.Type == wire.LockWrite {
			return l
		}
	}
	return nil
}

// apply sets o's lock lk (or unlocks the range) without conflict checks,
// splitting o's locks that the range cuts. It reports whether a lock went
// away or weakened (waiters may go on).
func (f *fileLocks) apply(o lockOwner, flock bool, lk wire.Lock, handle uint64) bool {
	changed := false
	kept := f.locks[:0:0]
	for _, l := range f.locks {
		if l.owner != o || l.flock != flock || !l.overlaps(lk.Start, lk.End) {
			kept = append(kept, l)
			continue
		}
		if l.typ == wire.LockWrite || lk.Type == wire.LockUnlock {
			changed = true
		}
		if l.start < lk.Start {
			left := l
			left.end = lk.Start - 1
			kept = append(kept, left)
		}
		if l.end > lk.End {
			right := l
			right.start = lk.End + 1
			kept = append(kept, right)
		}
	}
	if lk.Type != wire.LockUnlock {
		kept = append(kept, heldLock{owner: o, flock: flock, typ: lk.Type, start: lk.Start,
			end: lk.End, pid: lk.Pid, handle: handle})
	}
	f.locks = kept
	return changed
}

// wholeFile is the range of a flock lock.
func wholeFile(lk wire.Lock) wire.Lock {
	lk.Start, lk.End = 0, wire.LockEOF
	return lk
}

// test returns the lock that would conflict with lk, or an F_UNLCK lock.
func (t *lockTable) test(ino uint64, o lockOwner, flock bool, lk wire.Lock) wire.Lock {
	if flock {
		lk = wholeFile(lk)
	}
	sh := t.shard(ino)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := conflict(sh.files[ino], o, flock, lk)
	if c == nil {
		return wire.Lock{Type: wire.LockUnlock}
	}
	r := wire.Lock{Type: c.typ, Start: c.start, End: c.end}
	if c.owner.client == o.client {
		r.Pid = c.pid // a pid means nothing on another client's machine
	}
	return r
}

// set takes or drops a lock. Without wait a conflict is EAGAIN; with wait
// it waits until the lock is free, ctx ends (ETIMEDOUT: the caller asks
// again) or the request is cancelled (EINTR).
func (t *lockTable) set(ctx context.Context, ino uint64, o lockOwner, flock, wait bool, lk wire.Lock, handle uint64) error {
	if flock {
		lk = wholeFile(lk)
	}
	key := waitKey{ino, o}
	var cancel chan struct{}
	sh := t.shard(ino)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for {
		f := sh.files[ino]
		if lk.Type == wire.LockUnlock || conflict(f, o, flock, lk) == nil {
			return t.setLocked(sh, ino, sh.file(ino), o, flock, lk, handle)
		}
		if !wait {
			return syscall.EAGAIN
		}
		if cancel == nil {
			if cancel = t.addWaiter(sh, key, f); cancel == nil {
				return syscall.ENOLCK
			}
			defer t.dropWaiter(sh, key, cancel)
		}
		wake := f.wake
		sh.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-cancel:
			err = syscall.EINTR
		case <-ctx.Done():
			err = syscall.ETIMEDOUT
		}
		sh.mu.Lock()
		if err != nil {
			return err
		}
	}
}

// addWaiter registers a blocked request (sh.mu held), or returns nil when
// its client has maxWaiting already.
func (t *lockTable) addWaiter(sh *lockShard, key waitKey, f *fileLocks) chan struct{} {
	t.cmu.Lock()
	if t.waiting[key.owner.client] >= t.maxWaiting {
		t.cmu.Unlock()
		return nil
	}
	t.waiting[key.owner.client]++
	t.cmu.Unlock()
	ch := make(chan struct{})
	if sh.cancels[key] == nil {
		sh.cancels[key] = make(map[chan struct{}]struct{})
	}
	sh.cancels[key][ch] = struct{}{}
	f.waiters++
	return ch
}

// dropWaiter unregisters a blocked request that ended (sh.mu held).
func (t *lockTable) dropWaiter(sh *lockShard, key waitKey, ch chan struct{}) {
	if set := sh.cancels[key]; set != nil {
		delete(set, ch)
		if len(set) == 0 {
			delete(sh.cancels, key)
		}
	}
	t.cmu.Lock()
	if t.waiting[key.owner.client]--; t.waiting[key.owner.client] <= 0 {
		delete(t.waiting, key.owner.client)
	}
	t.cmu.Unlock()
	f := sh.files[key.ino]
	f.waiters--
	sh.tidy(key.ino, f, false)
}

// cancel ends o's blocked requests on file ino, if there are any.
func (t *lockTable) cancel(ino uint64, o lockOwner) {
	sh := t.shard(ino)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for ch := range sh.cancels[waitKey{ino, o}] {
		close(ch)
	}
	delete(sh.cancels, waitKey{ino, o})
}

// dropWhere removes the locks of file ino (every file when all) that match.
func (t *lockTable) dropWhere(ino uint64, all bool, match func(*heldLock) bool) int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		if !all && sh != t.shard(ino) {
			continue
		}
		sh.mu.Lock()
		for fi, f := range sh.files {
			if !all && fi != ino {
				continue
			}
			kept := f.locks[:0:0]
			for _, l := range f.locks {
				if match(&l) {
					n++
					t.count(l.owner.client, -1)
					continue
				}
				kept = append(kept, l)
			}
			changed := len(kept) != len(f.locks)
			f.locks = kept
			sh.tidy(fi, f, changed)
		}
		sh.mu.Unlock()
	}
	return n
}

// releaseOwner drops o's locks on a file: its fcntl locks (a descriptor
// was closed), or with flock its flock locks.
func (t *lockTable) releaseOwner(ino uint64, o lockOwner, flock bool) int {
	return t.dropWhere(ino, false, func(l *heldLock) bool { return l.owner == o && l.flock == flock })
}

// releaseHandle drops the locks taken through a handle that is closed.
func (t *lockTable) releaseHandle(ino uint64, client uint32, handle uint64) int {
	return t.dropWhere(ino, false, func(l *heldLock) bool { return l.owner.client == client && l.handle == handle })
}

// releaseClient drops every lock of a client whose connection ended.
func (t *lockTable) releaseClient(client uint32) int {
	return t.dropWhere(0, true, func(l *heldLock) bool { return l.owner.client == client })
}

// serveLock answers the lock messages of a client connection.
func (s *Server) serveLock(ctx context.Context, c *wire.Conn, m wire.Msg) (wire.Msg, error) {
	cl, _ := c.Value.Load().(*client)
	if cl == nil {
		return nil, syscall.EPROTO
	}
	var handle uint64
	switch m := m.(type) {
	case *wire.LockSet:
		handle = m.Handle
	case *wire.LockTest:
		handle = m.Handle
	case *wire.LockRelease:
		handle = m.Handle
	case *wire.LockCancel:
		handle = m.Handle
	}
	of := s.handles.get(handle, c)
	if of == nil {
		return nil, syscall.EBADF
	}
	switch m := m.(type) {
	case *wire.LockSet:
		if !validLock(m.Lock) {
			return nil, syscall.EINVAL
		}
		o := lockOwner{cl.id, m.Owner}
		if !m.Wait {
			return nil, s.locks.set(ctx, of.ino, o, m.Flock, false, m.Lock, handle)
		}
		wctx, cancel := context.WithTimeout(ctx, s.cfg.Limits.LockWait)
		defer cancel()
		err := s.locks.set(wctx, of.ino, o, m.Flock, true, m.Lock, handle)
		if err == syscall.ETIMEDOUT {
			err = syscall.EINPROGRESS // not yet: ask again
		}
		return nil, err
	case *wire.LockTest:
		if !validLock(m.Lock) {
			return nil, syscall.EINVAL
		}
		return &wire.LockReply{Lock: s.locks.test(of.ino, lockOwner{cl.id, m.Owner}, m.Flock, m.Lock)}, nil
	case *wire.LockRelease:
		s.locks.releaseOwner(of.ino, lockOwner{cl.id, m.Owner}, m.Flock)
		return &wire.OK{}, nil
	case *wire.LockCancel:
		s.locks.cancel(of.ino, lockOwner{cl.id, m.Owner})
		return &wire.OK{}, nil
	}
	return nil, syscall.ENOSYS
}

func validLock(l wire.Lock) bool {
	return l.Type <= wire.LockUnlock && l.Start <= l.End
}

// release closes a handle and drops the locks taken through it (flock and
// OFD locks belong to the open file).
func (s *Server) release(c *wire.Conn, h uint64) (wire.Msg, error) {
	of := s.handles.get(h, c)
	if of == nil || !s.handles.release(h, c) {
		return nil, fmt.Errorf("release of unknown handle %d: %w", h, syscall.EBADF)
	}
	if cl, _ := c.Value.Load().(*client); cl != nil {
		s.locks.releaseHandle(of.ino, cl.id, h)
	}
	return &wire.OK{}, nil
}
