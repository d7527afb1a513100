package agent_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenFileAttrAfterInodeReuse: a file replaced by one that got its
// inode number back (ext4 reuses the number of a removed file at once)
// is not the open file: fstat of the open file gives its own size, not the
// new file's whose attributes the agent caches under the same path and
// number (TestE2ERenameReplaceReaders read one version with another's
// size).
func TestOpenFileAttrAfterInodeReuse(t *testing.T) {
	export := t.TempDir()
	c := startServer(t, export, "127.0.0.1:0", nil, 0)
	a := newAgent(t, c.addr, nil)
	ctx := asRoot()
	if _, err := a.GetAttr(ctx, ""); err != nil { // the root's callback, which names hang from
		t.Fatal(err)
	}
	p := filepath.Join(export, "f")
	for try := 0; ; try++ {
		if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		f, old, err := a.Open(ctx, "f", syscall.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("new and longer"), 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Sys().(*syscall.Stat_t).Ino != old.Ino {
			f.Release(ctx)
			if try == 20 {
				t.Skip("the export's file system did not reuse an inode number")
			}
			continue
		}
		// The agent caches the new file's attributes under the path
		// (the watch's break first: wait for the new size).
		deadline := time.Now().Add(5 * time.Second)
		for {
			at, err := a.GetAttr(ctx, "f")
			if err == nil && at.Size == 14 && a.Covered("f") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the agent never saw the new file: %+v, %v", at, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		at, err := f.Attr(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if at.Size != 3 || at.Gen != old.Gen {
			t.Errorf("fstat of the open old file: size %d gen %d, want size 3 gen %d", at.Size, at.Gen, old.Gen)
		}
		f.Release(ctx)
		return
	}
}
