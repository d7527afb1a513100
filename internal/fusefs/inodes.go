package fusefs

import (
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
)

// The kernel's inodes by the server's inode number. A callback break names
// inodes, and it must reach every inode the kernel caches under that
// number, whether or not the backend still caches the object itself: the
// backend forgets objects (a listing that raced with a break, the subtree
// of a directory whose entries all broke) that the kernel keeps for the
// attribute timeout, or for the covered timeout of an earlier answer.
//
// The table also numbers the breaks, so that an answer read before a break
// of the object it hands out is not cached by the kernel (breakSeq,
// brokeSince): when the break came before the kernel knew the inode, the
// kernel had nothing to forget, and would otherwise cache the stale answer
// for the attribute timeout.

// maxBrokeMemory bounds kernelInodes.broke; past it the table forgets and
// raises its floor (answers begun before count as raced).
const maxBrokeMemory = 1 << 16

// The retries of a break's invalidation the kernel answered ENOENT for an
// inode the adapter has just handed it (the reply carrying the inode may
// still be on its way into the kernel): after 1 ms, then five times longer
// each time, up to lateNotifyLast (1, 5, 25, 125 ms).
const (
	lateNotifyFirst = time.Millisecond
	lateNotifyLast  = 125 * time.Millisecond
)

// recentHandout is how recently a node must have been handed to the kernel
// for an ENOENT of its invalidation to be retried (and for the table to
// keep it while the kernel does not know it).
const recentHandout = time.Second

// handedRecently reports whether n was handed to the kernel within
// recentHandout.
func (n *node) handedRecently() bool {
	return time.Since(time.Unix(0, n.handed.Load())) < recentHandout
}

// kernelInodes is the adapter's table of inodes by number.
//
// INVARIANT: every node in byIno[i] has StableAttr().Ino == i, and no
// byIno[i] is empty.
type kernelInodes struct {
	mu    sync.Mutex
	byIno map[uint64][]*node
	seq   uint64            // breaks so far
	floor uint64            // answers begun before this count as raced
	broke map[uint64]uint64 // inode → seq of its last break
}

func newKernelInodes() *kernelInodes {
	return &kernelInodes{byIno: make(map[uint64][]*node), broke: make(map[uint64]uint64)}
}

// find returns a node of the table with identity sa the kernel has not
// forgotten, nil if none.
func (k *kernelInodes) find(sa fs.StableAttr) *node {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, n := range k.byIno[sa.Ino] {
		if got := n.StableAttr(); got.Gen == sa.Gen && got.Mode == sa.Mode && !n.Forgotten() {
			return n
		}
	}
	return nil
}

// add registers n (just made; go-fuse may still pick another node of the
// same identity). Nodes of the same number that the kernel forgot long
// enough ago are pruned (go-fuse's losers of a race never hear OnForget).
func (k *kernelInodes) add(n *node) {
	ino := n.StableAttr().Ino
	k.mu.Lock()
	defer k.mu.Unlock()
	list := k.byIno[ino]
	if slices.Contains(list, n) {
		return
	}
	list = slices.DeleteFunc(list, func(o *node) bool { return o.Forgotten() && !o.handedRecently() })
	k.byIno[ino] = append(list, n)
}

// remove drops n (the kernel forgot it).
func (k *kernelInodes) remove(n *node) {
	ino := n.StableAttr().Ino
	k.mu.Lock()
	defer k.mu.Unlock()
	list := slices.DeleteFunc(k.byIno[ino], func(o *node) bool { return o == n })
	if len(list) == 0 {
		delete(k.byIno, ino)
	} else {
		k.byIno[ino] = list
	}
}

// nodes returns the nodes of number ino.
func (k *kernelInodes) nodes(ino uint64) []*node {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*node(nil), k.byIno[ino]...)
}

// begin returns the break sequence number to pass to brokeSince; take it
// before asking the backend for what will be handed to the kernel.
func (k *kernelInodes) begin() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.seq
}

// noteBreak records a break of ino.
func (k *kernelInodes) noteBreak(ino uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seq++
	if len(k.broke) >= maxBrokeMemory {
		clear(k.broke)
		k.floor = k.seq
	}
	k.broke[ino] = k.seq
}

// noteBreakAll records a break of everything.
func (k *kernelInodes) noteBreakAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seq++
	clear(k.broke)
	k.floor = k.seq
}

// brokeSince reports whether ino broke after sequence number since.
func (k *kernelInodes) brokeSince(ino, since uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return since < k.floor || k.broke[ino] > since
}

// OnForget implements fs.NodeOnForgetter: the kernel no longer holds the
// node, no break needs to find it.
func (n *node) OnForget() { n.a.inodes.remove(n) }

var _ fs.NodeOnForgetter = (*node)(nil)

// notifyAttr drops the kernel's attributes of n. ENOENT for a node the
// kernel was just handed means the reply that hands it over may not have
// reached the kernel yet: retried in the background a few times.
func (a *adapter) notifyAttr(n *node) {
	if n.NotifyContent(-1, 0) != syscall.ENOENT || !n.handedRecently() {
		return
	}
	go func() {
		for d := lateNotifyFirst; d <= lateNotifyLast; d *= 5 {
			time.Sleep(d)
			if n.NotifyContent(-1, 0) != syscall.ENOENT {
				return
			}
		}
	}()
}
