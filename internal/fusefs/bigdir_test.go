package fusefs

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/vfs"
)

// TestBigDirectoryIsLinear lists, looks up and creates in a directory of
// 100,000 entries (20,000 with -short) through a real mount and counts the
// work, not the time: one backend listing per listing, at most one lookup
// per entry, and the adapter's search of the listing for the entry the
// kernel's READDIRPLUS looks up must stay O(1) per entry — a scan of the
// listing per entry would be N² = 10¹⁰ comparisons here.
func TestBigDirectoryIsLinear(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	mem, m := mountMem(t, Config{})
	mem.mu.Lock()
	if _, err := mem.add("big", syscall.S_IFDIR|0o755, vfs.Caller{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := mem.add(fmt.Sprintf("big/f%06d", i), syscall.S_IFREG|0o644, vfs.Caller{}); err != nil {
			t.Fatal(err)
		}
	}
	mem.mu.Unlock()
	dir := filepath.Join(m.Dir(), "big")

	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil || len(names) != n {
		t.Fatalf("listing: %d names, %v; want %d", len(names), err, n)
	}
	if r := mem.readDirs.Load(); r > 2 {
		t.Errorf("one listing cost %d backend listings", r)
	}
	if s := m.a.dirScans.Load(); s > int64(n) {
		t.Errorf("the READDIRPLUS lookups compared %d listing entries for %d entries: not O(1) each", s, n)
	}
	before := mem.lookups.Load()
	for _, name := range names {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if l := mem.lookups.Load() - before; l > int64(2*n) {
		t.Errorf("lstat of %d entries cost %d backend lookups", n, l)
	}

	creates := n / 10
	for i := range creates {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("new%06d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if c := mem.creates.Load(); c != int64(creates) {
		t.Errorf("%d creates reached the backend as %d", creates, c)
	}
	scans := m.a.dirScans.Load()
	f, err = os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	names, err = f.Readdirnames(-1)
	f.Close()
	if err != nil || len(names) != n+creates {
		t.Fatalf("second listing: %d names, %v; want %d", len(names), err, n+creates)
	}
	if s := m.a.dirScans.Load() - scans; s > int64(n+creates) {
		t.Errorf("the second listing compared %d entries for %d", s, n+creates)
	}
}
