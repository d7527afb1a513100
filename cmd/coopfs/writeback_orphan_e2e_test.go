package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2EWriteBackOrphan: a dirty file removed while it is still open on a
// write-back mount (an orphan) keeps its data for the open file — read
// back, written more — and is never written back: not by a flush, not at
// its close, and not after the mount is killed with the file open and
// mounted again on the same cache (the orphan's journal record survives
// the crash and sends its frames to the stale list).
func TestE2EWriteBackOrphan(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--block-size", "64KiB")
	cacheDir := filepath.Join(t.TempDir(), "cache")
	m := wbMount(t, srv, cacheDir, "--write-back-delay", "1h")

	orphan := func(name string, seed uint64) (*os.File, []byte) {
		fh, err := os.OpenFile(m.path(name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		data := patterned(200000, seed)
		if _, err := fh.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(m.path(name)); err != nil {
			t.Fatal(err)
		}
		more := patterned(70000, seed+1)
		if _, err := fh.WriteAt(more, 150000); err != nil {
			t.Fatalf("write to %s after its unlink: %v", name, err)
		}
		want := append(data[:150000:150000], more...)
		got := make([]byte, len(want)+10)
		n, _ := fh.ReadAt(got, 0)
		if !bytes.Equal(got[:n], want) {
			t.Fatalf("read back %s after its unlink: %d bytes, not the %d written", name, n, len(want))
		}
		return fh, want
	}
	fh, _ := orphan("a", 1)
	flushMount(t, m)
	if _, ok := exportFile(t, srv, "a"); ok {
		t.Error("an open file removed while dirty reached the export at a flush")
	}
	fh.Close()
	flushMount(t, m)
	if _, ok := exportFile(t, srv, "a"); ok {
		t.Error("an open file removed while dirty reached the export after its close")
	}

	// Killed with the orphan open: the next mount drops it.
	orphan("b", 3)
	writeFile(t, m.path("kept"), []byte("kept"))
	m.cmd.Process.Kill()
	<-m.done
	exec.Command("fusermount3", "-u", "-z", m.dir).Run()
	m2 := wbMount(t, srv, cacheDir)
	flushMount(t, m2)
	if _, ok := exportFile(t, srv, "b"); ok {
		t.Error("an orphan reached the export after a crash and a new mount")
	}
	wantExport(t, srv, "kept", []byte("kept"))
	if s := m2.stderr.String(); strings.Contains(s, "no journal record") {
		t.Errorf("the new mount found dirty blocks without a record:\n%s", s)
	}
}
