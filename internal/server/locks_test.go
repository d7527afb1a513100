package server

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

func rng(typ uint32, start, end uint64) wire.Lock {
	return wire.Lock{Type: typ, Start: start, End: end}
}

// checkNoConflict checks the table's invariant.
func checkNoConflict(t *testing.T, tb *lockTable) {
	t.Helper()
	tb.each(func(ino uint64, f *fileLocks) {
		for i, a := range f.locks {
			for _, b := range f.locks[i+1:] {
				if a.owner != b.owner && a.flock == b.flock && a.overlaps(b.start, b.end) &&
					(a.typ == wire.LockWrite || b.typ == wire.LockWrite) {
					t.Fatalf("file %d: conflicting locks %+v and %+v", ino, a, b)
				}
			}
		}
		if len(f.locks) == 0 && f.waiters == 0 {
			t.Fatalf("file %d: empty entry kept", ino)
		}
	})
}

func TestLockTableRangesAndOwners(t *testing.T) {
	tb := newLockTable(4)
	ctx := context.Background()
	a, b := lockOwner{1, 10}, lockOwner{2, 10} // same owner id, other client
	if err := tb.set(ctx, 7, a, false, false, rng(wire.LockWrite, 0, 99), 1); err != nil {
		t.Fatal(err)
	}
	if err := tb.set(ctx, 7, b, false, false, rng(wire.LockRead, 50, 60), 2); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("overlapping lock of another client: %v, want EAGAIN", err)
	}
	if err := tb.set(ctx, 7, b, false, false, rng(wire.LockWrite, 100, wire.LockEOF), 2); err != nil {
		t.Fatalf("disjoint range: %v", err)
	}
	// Unlocking the middle splits a's lock in two.
	if err := tb.set(ctx, 7, a, false, false, rng(wire.LockUnlock, 40, 59), 1); err != nil {
		t.Fatal(err)
	}
	if got := tb.test(7, b, false, rng(wire.LockWrite, 40, 59)); got.Type != wire.LockUnlock {
		t.Fatalf("unlocked middle still conflicts: %+v", got)
	}
	if got := tb.test(7, b, false, rng(wire.LockRead, 30, 45)); got.Type != wire.LockWrite || got.End != 39 || got.Pid != 0 {
		t.Fatalf("left part: %+v", got)
	}
	// flock and fcntl locks are separate spaces.
	if err := tb.set(ctx, 7, b, true, false, rng(wire.LockWrite, 0, 0), 2); err != nil {
		t.Fatalf("flock beside fcntl locks: %v", err)
	}
	checkNoConflict(t, tb)
	if n := tb.releaseClient(2); n != 2 {
		t.Fatalf("released %d locks of client 2, want 2", n)
	}
	if n := tb.releaseOwner(7, a, false); n != 2 {
		t.Fatalf("released %d locks of a, want 2", n)
	}
	left := 0
	tb.each(func(uint64, *fileLocks) { left++ })
	if held, _ := tb.counts(); left != 0 || held != 0 {
		t.Fatalf("%d entries and %d locks counted left", left, held)
	}
}

func TestLockTableWaitWakeCancel(t *testing.T) {
	tb := newLockTable(1)
	ctx := context.Background()
	a, b := lockOwner{1, 1}, lockOwner{2, 1}
	tb.set(ctx, 3, a, true, false, rng(wire.LockWrite, 0, 0), 1)
	got := make(chan error, 1)
	go func() { got <- tb.set(ctx, 3, b, true, true, rng(wire.LockWrite, 0, 0), 2) }()
	waitFor(t, func() bool { tb.cmu.Lock(); defer tb.cmu.Unlock(); return tb.waiting[2] == 1 })
	if err := tb.set(ctx, 3, b, false, true, rng(wire.LockWrite, 0, 0), 2); err != nil {
		t.Fatalf("fcntl lock while the flock waits: %v", err)
	}
	if err := tb.set(ctx, 4, lockOwner{2, 2}, true, true, rng(wire.LockWrite, 0, 0), 2); err != nil {
		t.Fatalf("a free lock needs no wait slot: %v", err)
	}
	tb.set(ctx, 5, a, true, false, rng(wire.LockWrite, 0, 0), 1)
	if err := tb.set(ctx, 5, lockOwner{2, 3}, true, true, rng(wire.LockWrite, 0, 0), 2); !errors.Is(err, syscall.ENOLCK) {
		t.Fatalf("second waiter past the cap: %v, want ENOLCK", err)
	}
	tb.releaseHandle(3, 1, 1) // a's open file is closed
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	// a now waits for b and is cancelled.
	go func() { got <- tb.set(ctx, 3, a, true, true, rng(wire.LockRead, 0, 0), 1) }()
	waitFor(t, func() bool { tb.cmu.Lock(); defer tb.cmu.Unlock(); return tb.waiting[1] == 1 })
	tb.cancel(3, a)
	if err := <-got; !errors.Is(err, syscall.EINTR) {
		t.Fatalf("cancelled waiter: %v, want EINTR", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := tb.set(tctx, 3, a, true, true, rng(wire.LockRead, 0, 0), 1); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("waiter past its slice: %v, want ETIMEDOUT", err)
	}
	checkNoConflict(t, tb)
	tb.releaseClient(1)
	tb.releaseClient(2)
	files, cancels := 0, 0
	for i := range tb.shards {
		files, cancels = files+len(tb.shards[i].files), cancels+len(tb.shards[i].cancels)
	}
	if files != 0 || cancels != 0 || len(tb.waiting) != 0 || tb.total != 0 || len(tb.held) != 0 {
		t.Fatalf("left behind: files %d cancels %d waiting %v locks %d %v", files, cancels, tb.waiting, tb.total, tb.held)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not reached in 5s")
}
