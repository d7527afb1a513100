package fusefs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// cbMemFS is memFS under callbacks: Covered says what covered says, and
// the test plays the server's breaks through the invalidator it is handed.
type cbMemFS struct {
	*memFS
	covered atomic.Bool
	mu      sync.Mutex
	inv     vfs.Invalidator
	// duringLookup runs inside Lookup of its name, after the answer is
	// read: a break that comes before the reply reaches the kernel.
	duringLookup map[string]func(wire.Attr)
}

func (c *cbMemFS) Covered(string) bool { return c.covered.Load() }
func (c *cbMemFS) Changed(uint64)      {}
func (c *cbMemFS) SetInvalidator(inv vfs.Invalidator) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inv = inv
}

func (c *cbMemFS) Lookup(ctx context.Context, p string) (wire.Attr, error) {
	a, err := c.memFS.Lookup(ctx, p)
	c.mu.Lock()
	f := c.duringLookup[filepath.Base(p)]
	c.mu.Unlock()
	if f != nil && err == nil {
		f(a)
	}
	return a, err
}

// mountCB mounts a cbMemFS whose answers the kernel would cache for an hour.
func mountCB(t *testing.T) (*cbMemFS, *Mounted) {
	t.Helper()
	mem := &cbMemFS{memFS: newMemFS(), duringLookup: map[string]func(wire.Attr){}}
	return mem, mountBackend(t, mem, Config{AttrTimeout: time.Hour, EntryTimeout: time.Hour, CoveredTimeout: time.Hour})
}

func statSize(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestBreakReachesKernelByInode: a break reaches what the kernel caches of
// an object by its inode number, whatever the backend still caches: the
// attributes of a file, an entry of a directory.
func TestBreakReachesKernelByInode(t *testing.T) {
	mem, m := mountCB(t)
	f, g := filepath.Join(m.Dir(), "f"), filepath.Join(m.Dir(), "g")
	for _, p := range []string{f, g} {
		if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Lstat(f)
	if err != nil {
		t.Fatal(err)
	}
	ino := st.Sys().(*syscall.Stat_t).Ino
	root, err := os.Lstat(m.Dir())
	if err != nil {
		t.Fatal(err)
	}
	rootIno := root.Sys().(*syscall.Stat_t).Ino
	os.Lstat(g)

	if err := mem.replace("f", []byte("new and longer")); err != nil {
		t.Fatal(err)
	}
	if n := statSize(t, f); n != 3 {
		t.Fatalf("before the break: size %d, want the kernel's cached 3 (else this test proves nothing)", n)
	}
	mem.inv.Invalidate(ino, wire.BreakAttr)
	if n := statSize(t, f); n != 14 {
		t.Errorf("after a break of the file: size %d, want 14", n)
	}

	if err := mem.Unlink(context.Background(), "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(g); err != nil {
		t.Fatalf("before the break: %v, want the kernel's cached entry", err)
	}
	mem.inv.Invalidate(rootIno, "g")
	if _, err := os.Lstat(g); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after a break of the entry: %v, want ENOENT", err)
	}
}

// TestBreakBeforeReplyNotCached: a break of an object that comes while its
// lookup's answer is on the way (the kernel does not know the inode yet, so
// it has nothing to forget) keeps the kernel from caching that answer.
func TestBreakBeforeReplyNotCached(t *testing.T) {
	mem, m := mountCB(t)
	mem.covered.Store(true)
	f := filepath.Join(m.Dir(), "f")
	mem.memFS.mu.Lock()
	_, err := mem.add("f", syscall.S_IFREG|0o644, vfs.Caller{})
	mem.memFS.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.replace("f", []byte("old")); err != nil {
		t.Fatal(err)
	}
	mem.mu.Lock()
	mem.duringLookup["f"] = func(a wire.Attr) { mem.inv.Invalidate(a.Ino, wire.BreakAttr) }
	mem.mu.Unlock()
	if n := statSize(t, f); n != 3 {
		t.Fatalf("size %d, want 3", n)
	}
	if err := mem.replace("f", []byte("new and longer")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the kernel's shortest timeout is a clock tick
	if n := statSize(t, f); n != 14 {
		t.Errorf("an answer raced by a break was cached: size %d, want 14", n)
	}
}

func TestKernelInodesBrokeSince(t *testing.T) {
	k := newKernelInodes()
	s := k.begin()
	k.noteBreak(5)
	if !k.brokeSince(5, s) || k.brokeSince(6, s) || k.brokeSince(5, k.begin()) {
		t.Fatal("brokeSince wrong after one break")
	}
	s = k.begin()
	for i := range maxBrokeMemory + 1 {
		k.noteBreak(uint64(1000 + i))
	}
	if !k.brokeSince(7, s) {
		t.Fatal("an answer begun before the table forgot its breaks counts as fresh")
	}
	if k.brokeSince(7, k.begin()) {
		t.Fatal("an answer begun after counts as raced")
	}
	k.noteBreakAll()
	if !k.brokeSince(8, s) {
		t.Fatal("a break of everything missed")
	}
}
