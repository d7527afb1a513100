package server

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSequentialWindow(t *testing.T) {
	for _, c := range []struct {
		last, index uint64
		want        bool
	}{
		{0, 0, false}, // the first read of a handle
		{0, 5, false},
		{1, 1, true},  // block 0, then 1
		{1, 0, true},  // the same block again
		{6, 9, true},  // out of order within the window
		{10, 3, true}, // an earlier request arriving late
		{1, 100, false},
		{200, 3, false},
		{^uint64(0), 3, false}, // no wrap-around
	} {
		if got := sequential(c.last, c.index); got != c.want {
			t.Errorf("sequential(last %d, index %d) = %v, want %v", c.last, c.index, got, c.want)
		}
	}
}

// TestWillNeedBounds: the hint is given for blocks at and past the end of
// a real file without error, and the handle remembers the last block.
func TestWillNeedBounds(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 3<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	of := &openFile{f: f}
	for _, idx := range []uint64{0, 1, 2, 7} {
		of.willNeed(idx, 1<<10, 3<<10)
		if got := of.lastRead.Load(); got != idx+1 {
			t.Fatalf("after block %d lastRead = %d, want %d", idx, got, idx+1)
		}
	}
	f.Close()
	of.willNeed(0, 1<<10, 3<<10) // a closed file: ignored
}
