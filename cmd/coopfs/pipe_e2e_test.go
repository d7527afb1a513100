package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Creation-heavy work pipelined (internal/agent/pipe.go): a file the mount
// creates holds its writes and its owner's chmod/chown/utimens back and
// sends them in one Commit at close.

// pipeTree writes a source tree of files with assorted sizes, modes, times
// and owners; it returns the regular files' relative paths.
func pipeTree(t *testing.T, src string) []string {
	t.Helper()
	modes := []os.FileMode{0o644, 0o600, 0o755, 0o444, 0o640, 0o700}
	sizes := []int{0, 1, 100, 4095, 4096, 10240, 10241, 70000, 300000}
	var files []string
	for i := 0; i < 48; i++ {
		rel := filepath.Join(fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%02d", i))
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte{byte('a' + i%26), byte(i)}, sizes[i%len(sizes)]/2+1)[:sizes[i%len(sizes)]]
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 1000+i%3, 2000+i%2); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, modes[i%len(modes)]); err != nil {
			t.Fatal(err)
		}
		mt := time.Unix(1_600_000_000+int64(i)*3600, 0)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	if err := os.Link(filepath.Join(src, files[1]), filepath.Join(src, "d1", "hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../d0/f00", filepath.Join(src, "d2", "sym")); err != nil {
		t.Fatal(err)
	}
	return files
}

// sameFile compares a file as the tar source has it with the extracted one.
func sameFile(t *testing.T, want, got string) {
	t.Helper()
	wd, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	gd, err := os.ReadFile(got)
	if err != nil {
		t.Errorf("%s: %v", got, err)
		return
	}
	if !bytes.Equal(wd, gd) {
		t.Errorf("%s: %d bytes differ from the %d written", got, len(gd), len(wd))
	}
	var ws, gs syscall.Stat_t
	if err := syscall.Lstat(want, &ws); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(got, &gs); err != nil {
		t.Fatal(err)
	}
	if ws.Mode != gs.Mode || ws.Uid != gs.Uid || ws.Gid != gs.Gid || ws.Size != gs.Size || ws.Mtim != gs.Mtim {
		t.Errorf("%s: mode %o uid %d gid %d size %d mtime %v; want %o %d %d %d %v", got,
			gs.Mode, gs.Uid, gs.Gid, gs.Size, gs.Mtim, ws.Mode, ws.Uid, ws.Gid, ws.Size, ws.Mtim)
	}
}

func TestE2ETarHoldsWritesAndAttrsUntilClose(t *testing.T) {
	needFUSE(t)
	src := t.TempDir()
	files := pipeTree(t, src)
	tarball := filepath.Join(t.TempDir(), "tree.tar")
	runCmd(t, time.Minute, "tar", "-C", src, "-cf", tarball, ".")

	srv := startServer(t, newExport(t))
	metrics := e2eFreeAddr(t)
	m1 := startMount(t, srv.addr, "--metrics", metrics)
	if err := os.Mkdir(m1.path("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := scrapeMessages(t, metrics)
	runCmd(t, 2*time.Minute, "tar", "-C", m1.path("x"), "-xf", tarball) // as root: owners too
	sent := sentSince(before, scrapeMessages(t, metrics))
	t.Logf("tar x of %d files: %v", len(files), sent)

	// Through the writing mount and through a second one, whose kernel and
	// agent never saw the files: content, mode, owner and mtime are tar's.
	m2 := startMount(t, srv.addr)
	for _, m := range []*e2eMount{m1, m2} {
		for _, rel := range append(files, filepath.Join("d1", "hard")) {
			sameFile(t, filepath.Join(src, rel), m.path("x", rel))
		}
		if l, err := os.Readlink(m.path("x", "d2", "sym")); err != nil || l != "../d0/f00" {
			t.Errorf("symlink: %q, %v", l, err)
		}
	}

	// One Commit per file with data or attributes — a CommitNew for a file
	// created under its directory's delegation (agent/newfile.go), whose
	// create is no message of its own — no write or setattr message of a
	// file's own (the directories' setattrs remain).
	if sent["WriteSeq"] != 0 || sent["Write"] != 0 {
		t.Errorf("%v WriteSeq messages: want none (the writes go with the close)", sent["WriteSeq"])
	}
	if n := sent["Commit"] + sent["CommitNew"]; n < float64(len(files)) {
		t.Errorf("%v Commit and CommitNew messages for %d files: want one each", n, len(files))
	}
	if sent["Create"]+sent["CommitNew"] > float64(len(files))+2 {
		t.Errorf("%v Create and %v CommitNew for %d files: a file created under a delegation sends no Create", sent["Create"], sent["CommitNew"], len(files))
	}
	// x and d0–d3 get a chown, a chmod and a utimens each, the symlink a chown.
	const dirs = 5.0
	if sent["SetAttr"] > 3*dirs+1 {
		t.Errorf("%v SetAttr messages: want at most 3 per directory and 1 for the symlink, none per file", sent["SetAttr"])
	}
	// The kernel's getattr of a directory after each create in it is
	// answered from the create's reply (internal/agent/dirattrs.go).
	if sent["GetAttr"] > 3*dirs {
		t.Errorf("%v GetAttr messages: want a few per directory, none per file", sent["GetAttr"])
	}

	// rm -rf: one Unlink per file, no GetAttr of the directory per unlink.
	before = scrapeMessages(t, metrics)
	runCmd(t, time.Minute, "rm", "-rf", m1.path("x"))
	sent = sentSince(before, scrapeMessages(t, metrics))
	t.Logf("rm -rf: %v", sent)
	if sent["GetAttr"] > 3*dirs {
		t.Errorf("rm -rf: %v GetAttr messages: want a few per directory, none per file", sent["GetAttr"])
	}
	if _, err := os.Stat(filepath.Join(srv.export, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("x after rm -rf: %v", err)
	}
}

// TestE2EHeldWriteFailureReachesTheProgram: a server that cannot take the
// data (its file size limit) fails the close that sends the held writes,
// or the fsync before it; a later small file is unaffected.
func TestE2EHeldWriteFailureReachesTheProgram(t *testing.T) {
	needFUSE(t)
	if _, err := os.Stat("/usr/bin/prlimit"); err != nil {
		t.Skip("prlimit missing: apt-get install util-linux")
	}
	export := newExport(t)
	srv := startServerVia(t, []string{"prlimit", "--fsize=8192", "--"}, e2eFreeAddr(t), export)
	m := startMount(t, srv.addr)
	chunk := bytes.Repeat([]byte("x"), 4096)

	f, err := os.Create(m.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		if _, err := f.Write(chunk); err != nil {
			t.Fatalf("write %d: %v (held writes are answered at once)", i, err)
		}
	}
	if err := f.Close(); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("close after writes beyond the server's file size limit: %v, want EFBIG", err)
	}

	f, err = os.Create(m.path("big2"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		f.Write(chunk)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("fsync after writes beyond the limit: %v, want EFBIG", err)
	}
	f.Close()

	small := []byte("fits\n")
	if err := os.WriteFile(m.path("small"), small, 0o640); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(export, "small")); err != nil || !bytes.Equal(got, small) {
		t.Errorf("small file in the export: %q, %v", got, err)
	}
}
