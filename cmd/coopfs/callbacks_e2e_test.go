package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Callbacks end to end (internal/server/callbacks.go): two mounts of one
// server; what one of them (or a program writing the export) changes is
// seen by the other at its next open, and an unchanged tree is read again
// without a message per file.

// callbackTree makes dirs × files small files in export/tree.
func callbackTree(t *testing.T, export string, dirs, files int) []string {
	t.Helper()
	var rel []string
	for d := range dirs {
		dir := filepath.Join("tree", fmt.Sprintf("d%d", d))
		if err := os.MkdirAll(filepath.Join(export, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range files {
			p := filepath.Join(dir, fmt.Sprintf("f%02d", f))
			mustWrite(t, filepath.Join(export, p), fmt.Appendf(nil, "file %s\n", p))
			rel = append(rel, p)
		}
	}
	return rel
}

// readAll reads every file of rel under mount m, checking each against
// the export.
func readAll(t *testing.T, m *e2eMount, export string, rel []string) {
	t.Helper()
	for _, p := range rel {
		want, err := os.ReadFile(filepath.Join(export, p))
		if err != nil {
			t.Fatal(err)
		}
		wantFile(t, "read through the mount", m.path(p), want)
	}
}

func TestE2ECallbacksOpenWithoutMessages(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	rel := callbackTree(t, export, 3, 20)
	srv := startServer(t, export)
	metrics := e2eFreeAddr(t)
	a := startMount(t, srv.addr, "--name", "A")
	b := startMount(t, srv.addr, "--name", "B", "--metrics", metrics)

	readAll(t, b, export, rel) // B fetches everything once
	runCmd(t, time.Minute, "grep", "-rc", "file", b.path("tree"))
	time.Sleep(100 * time.Millisecond) // the batched releases of those opens go out
	before := scrapeMessages(t, metrics)
	readAll(t, b, export, rel) // and again: the callbacks hold
	runCmd(t, time.Minute, "grep", "-rc", "file", b.path("tree"))
	sent := sentSince(before, scrapeMessages(t, metrics))
	t.Logf("messages for reading %d unchanged files again (open, read, close; then grep -r): %v", len(rel), sent)
	delete(sent, "StatFsReq") // grep's statfs of the mount, not per file
	if len(sent) != 0 {
		t.Errorf("reading an unchanged tree sent %v, want no message", sent)
	}

	// A change through A is seen by B's next open, and only the changed
	// file costs B messages.
	mustWrite(t, a.path(rel[5]), []byte("changed through A"))
	// A listing (ls -l) shows the new size: B's cached listing carried
	// the old attributes.
	ents, err := os.ReadDir(b.path("tree/d0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == filepath.Base(rel[5]) {
			if fi, err := e.Info(); err != nil || fi.Size() != int64(len("changed through A")) {
				t.Errorf("B's listing after A's change: size %v, %v; want %d", fi.Size(), err, len("changed through A"))
			}
		}
	}
	wantFile(t, "B after A's close", b.path(rel[5]), []byte("changed through A"))
	// A new file, a removal and a rename in one of B's directories.
	mustWrite(t, a.path("tree/d1/new"), []byte("new through A"))
	wantFile(t, "B opens a file A made", b.path("tree/d1/new"), []byte("new through A"))
	if err := os.Remove(a.path(rel[25])); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.path(rel[25])); !os.IsNotExist(err) {
		t.Errorf("B stat of a file A removed: %v, want ENOENT", err)
	}
	if err := os.Rename(a.path(rel[26]), a.path(rel[27])); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(export, rel[27]))
	wantFile(t, "B opens the name A renamed a file over", b.path(rel[27]), want)
	if err := os.Chmod(a.path(rel[28]), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(b.path(rel[28])); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("B stat after A's chmod: %v, %v; want mode 0600", fi.Mode(), err)
	}
	time.Sleep(100 * time.Millisecond) // the batched releases of the opens above go out
	before = scrapeMessages(t, metrics)
	readAll(t, b, export, rel[6:20]) // d0 but the file A changed: untouched
	if sent := sentSince(before, scrapeMessages(t, metrics)); len(sent) != 0 {
		t.Errorf("re-reading an unchanged directory after changes elsewhere sent %v", sent)
	}
}

func TestE2ECallbacksDirectExportChange(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	rel := callbackTree(t, export, 1, 3)
	srv := startServer(t, export)
	b := startMount(t, srv.addr)
	readAll(t, b, export, rel)
	// A program writes the export directly: the server notices (inotify)
	// and breaks B's callback. How long until B sees it:
	var took []time.Duration
	for i := range 5 {
		body := fmt.Appendf(nil, "written directly, round %d", i)
		start := time.Now()
		mustWrite(t, filepath.Join(export, rel[0]), body)
		for {
			got, _ := os.ReadFile(b.path(rel[0]))
			if string(got) == string(body) {
				break
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("B still reads %q 5s after the export was written directly", got)
			}
			time.Sleep(100 * time.Microsecond)
		}
		took = append(took, time.Since(start))
	}
	t.Logf("a direct write to the export was seen through the mount after %v", took)
	// A file made and one removed directly.
	mustWrite(t, filepath.Join(export, "tree/d0/direct"), []byte("made outside"))
	wantFileSoon(t, "B opens a file made in the export", b.path("tree/d0/direct"), []byte("made outside"))
	if err := os.Remove(filepath.Join(export, rel[1])); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, err := os.Stat(b.path(rel[1])); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a file removed from the export is still seen through the mount after 2s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestE2ECallbacksServerRestart: a mount whose server restarts treats all
// its callbacks as broken: what changed while the server was away is seen.
func TestE2ECallbacksServerRestart(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	rel := callbackTree(t, export, 1, 3)
	addr := e2eFreeAddr(t)
	srv := startServerAt(t, addr, export)
	b := startMount(t, addr, "--reconnect-timeout", "20s")
	readAll(t, b, export, rel)
	if !srv.stop(5 * time.Second) {
		t.Fatal("server did not stop")
	}
	// Changed while no server watches the export.
	mustWrite(t, filepath.Join(export, rel[0]), []byte("changed while the server was down"))
	startServerAt(t, addr, export)
	wantFile(t, "B after the server restarted", b.path(rel[0]), []byte("changed while the server was down"))
	readAll(t, b, export, rel)
}

// TestE2ECallbacksSilentHolder: a holder that does not acknowledge a break
// (its process is stopped) holds the writer up only for --callback-timeout,
// is disconnected, and sees the change once it runs again.
func TestE2ECallbacksSilentHolder(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	rel := callbackTree(t, export, 1, 2)
	srv := startServer(t, export, "--callback-timeout", "500ms")
	a := startMount(t, srv.addr, "--name", "A")
	b := startMount(t, srv.addr, "--name", "B")
	readAll(t, b, export, rel)
	b.signal(syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			b.signal(syscall.SIGCONT)
		}
	}()
	start := time.Now()
	err := within(t, 20*time.Second, "write through A while B is stopped", func() error {
		return os.WriteFile(a.path(rel[0]), []byte("written while B was stopped"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the writer waited %v for the silent holder (bound 500ms)", time.Since(start))
	b.signal(syscall.SIGCONT)
	stopped = false
	// B learns that its connection was closed as soon as it runs (its
	// reader sees the close); until then it may answer from its cache.
	wantFileSoon(t, "B once it runs again", b.path(rel[0]), []byte("written while B was stopped"))
}

// TestE2EVersionsSurviveServerRestart: a file that did not change keeps
// its version across a server restart, so a mount's cached blocks of it
// are used again (no ReadBlock), while a file changed during the restart
// is read afresh.
func TestE2EVersionsSurviveServerRestart(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	rel := callbackTree(t, export, 1, 2)
	big := patterned(3<<20, 7)
	mustWrite(t, filepath.Join(export, "big"), big)
	addr := e2eFreeAddr(t)
	srv := startServerAt(t, addr, export)
	metrics := e2eFreeAddr(t)
	b := startMount(t, addr, "--metrics", metrics, "--reconnect-timeout", "20s")
	wantFile(t, "first read", b.path("big"), big)
	readAll(t, b, export, rel)
	if !srv.stop(5 * time.Second) {
		t.Fatal("server did not stop")
	}
	mustWrite(t, filepath.Join(export, rel[0]), []byte("changed while the server was down"))
	startServerAt(t, addr, export)
	before := scrapeMessages(t, metrics)
	wantFile(t, "an unchanged file after the server restarted", b.path("big"), big)
	if n := sentSince(before, scrapeMessages(t, metrics))["ReadBlock"]; n != 0 {
		t.Errorf("reading an unchanged file after a server restart fetched %v blocks, want 0 (its version changed)", n)
	}
	wantFile(t, "a file changed while the server was down", b.path(rel[0]), []byte("changed while the server was down"))
}
