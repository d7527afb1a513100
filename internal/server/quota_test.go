package server

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/wire"
)

// A member takes byte-range locks until refused: it gets ENOLCK at the
// per-connection cap (DefaultLimits.MaxLocks), and an unlock gives room
// back. Without the cap every lock grew the file's list, which is rebuilt
// on each change.
func TestLockCapPerConnection(t *testing.T) {
	_, addr := testServer(t, Config{})
	c := dial(t, addr, 1)
	r, err := call(t, c, &wire.Create{Path: "f", Flags: uint32(os.O_RDWR), Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	h := r.(*wire.OpenReply).Handle
	lock := func(i uint64, typ uint32) error {
		_, err := call(t, c, &wire.LockSet{Handle: h, Owner: 1, Lock: wire.Lock{Type: typ, Start: 2 * i, End: 2 * i}})
		return err
	}
	n := uint64(DefaultLimits.MaxLocks)
	for i := range n {
		if err := lock(i, wire.LockWrite); err != nil {
			t.Fatalf("lock %d: %v", i, err)
		}
	}
	if err := lock(n, wire.LockWrite); !errors.Is(err, syscall.ENOLCK) {
		t.Fatalf("lock %d past the cap: %v, want ENOLCK", n, err)
	}
	if err := lock(0, wire.LockUnlock); err != nil {
		t.Fatal(err)
	}
	if err := lock(n, wire.LockWrite); err != nil {
		t.Fatalf("a lock after an unlock: %v", err)
	}
}

// A member opens many connections from one address, each holding its
// per-connection cap of handles: together they stop at the per-address cap,
// not at connections × the per-connection cap.
func TestHandleCapPerAddress(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("x"), 0o644)
	_, addr := testServer(t, Config{Export: export, Limits: Limits{MaxHandles: 8, MaxHandlesPerAddr: 20}})
	opened := 0
	for range 5 {
		c := dial(t, addr, 1)
		for range 8 {
			if _, err := call(t, c, &wire.Open{Path: "f"}); err == nil {
				opened++
			} else if !errors.Is(err, syscall.EMFILE) {
				t.Fatal(err)
			}
		}
	}
	if opened != 20 {
		t.Fatalf("%d handles opened from one address over 5 connections, want the per-address cap 20", opened)
	}
}
