package main

// End-to-end consistency cases (issue 2, "Tests"): two FUSE clients of one
// server, real programs (cp, diff, tar, sha256sum) working through them.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/fusefs/posixtest"
)

// newExport returns an empty directory to export, reachable by every user
// (so that the suite can act as another user through the mount).
func newExport(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// twoClients starts a server on a new export and mounts it twice, the second
// mount with extraB flags.
func twoClients(t *testing.T, extraB ...string) (srv *e2eServer, a, b *e2eMount) {
	t.Helper()
	srv = startServer(t, newExport(t))
	a = startMount(t, srv.addr, "--name", "A")
	b = startMount(t, srv.addr, append([]string{"--name", "B"}, extraB...)...)
	return srv, a, b
}

// patterned returns n bytes that differ with seed and position.
func patterned(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// wantFile reads path (open, read, close) and compares with want.
func wantFile(t *testing.T, what, path string, want []byte) {
	t.Helper()
	var got []byte
	err := within(t, 20*time.Second, "read "+path, func() error {
		var err error
		got, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Errorf("%s: read %s: %v", what, path, err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %s holds %d bytes (%s), want %d bytes (%s)", what, path, len(got), brief(got), len(want), brief(want))
	}
}

// wantFileSoon is wantFile for a change made directly in the export: the
// server notices it through inotify and breaks the callbacks a moment
// later (docs/consistency.md), so the mount must show it within a bound,
// not on the very next instruction.
func wantFileSoon(t *testing.T, what, path string, want []byte) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		got, err := os.ReadFile(path)
		if err == nil && bytes.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			wantFile(t, what+" (within 2s)", path, want)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// brief describes content for an error message.
func brief(b []byte) string {
	if len(b) <= 24 {
		return fmt.Sprintf("%q", b)
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%q… sha256 %x", b[:16], sum[:6])
}

func statSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Size()
}

// TestE2ECopyTreeDiffTar: cp -r a tree in through A, diff -r it through B
// and against the export, tar it out through B and back in through A.
func TestE2ECopyTreeDiffTar(t *testing.T) {
	needFUSE(t)
	srv, a, b := twoClients(t)
	src := filepath.Join(t.TempDir(), "tree")
	makeTree(t, src)

	runCmd(t, 30*time.Second, "cp", "-r", src, a.path("tree"))
	runCmd(t, 30*time.Second, "diff", "-r", "--no-dereference", src, b.path("tree"))
	runCmd(t, 30*time.Second, "diff", "-r", "--no-dereference", src, filepath.Join(srv.export, "tree"))

	// tar out through B into a local directory, compare with the source.
	out := t.TempDir()
	runCmd(t, 30*time.Second, "sh", "-c", fmt.Sprintf("tar -C %s -cf - tree | tar -C %s -xf -", b.dir, out))
	runCmd(t, 30*time.Second, "diff", "-r", "--no-dereference", src, filepath.Join(out, "tree"))

	// tar the source in through A under another name, check through B.
	runCmd(t, 30*time.Second, "sh", "-c", fmt.Sprintf("tar -C %s -cf - tree | tar -C %s --transform s,^tree,tree2, -xf -", filepath.Dir(src), a.dir))
	runCmd(t, 30*time.Second, "diff", "-r", "--no-dereference", src, b.path("tree2"))
	// Modes survive the round trip.
	for _, d := range []string{b.path("tree2"), filepath.Join(srv.export, "tree2")} {
		st, err := os.Stat(filepath.Join(d, "bin", "run.sh"))
		if err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("%s/bin/run.sh: mode %v (%v), want 0755", d, st.Mode(), err)
		}
	}
	// A recursive remove through B empties the export.
	runCmd(t, 30*time.Second, "rm", "-rf", b.path("tree"), b.path("tree2"))
	if ents, err := os.ReadDir(srv.export); err != nil || len(ents) != 0 {
		t.Errorf("export after rm -rf through B: %d entries (%v), want none", len(ents), err)
	}
}

// makeTree builds a small tree with nested directories, empty and
// multi-block files, a symlink and an executable.
func makeTree(t *testing.T, root string) {
	t.Helper()
	files := map[string][]byte{
		"README":           []byte("a small tree\n"),
		"empty":            nil,
		"a/b/c/deep.txt":   []byte("deep\n"),
		"a/b/sibling":      patterned(5000, 1),
		"a/big.bin":        patterned(3<<20+12345, 2), // crosses 1 MiB blocks
		"bin/run.sh":       []byte("#!/bin/sh\necho hi\n"),
		"name with spaces": []byte("spaces\n"),
		"many/f00":         []byte("0"),
		"unicode-é-漢字.txt": []byte("unicode\n"),
	}
	for i := 1; i < 40; i++ {
		files[fmt.Sprintf("many/f%02d", i)] = patterned(i*97, uint64(i))
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, p, data)
	}
	if err := os.Chmod(filepath.Join(root, "bin/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b/c/deep.txt", filepath.Join(root, "a/link")); err != nil {
		t.Fatal(err)
	}
}

// TestE2ECloseToOpen: what A wrote and closed, B sees on its next open,
// whether or not B had looked at the file (and cached its attributes or
// pages) a moment before. B1 uses the default 1s attribute timeout, B30 a
// 30s one, so that B30's cached attributes are certainly still valid when it
// reopens: open must revalidate anyway.
func TestE2ECloseToOpen(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	a := startMount(t, srv.addr, "--name", "A")
	readers := []struct {
		name string
		m    *e2eMount
	}{
		{"B1", startMount(t, srv.addr, "--name", "B1")},
		{"B30", startMount(t, srv.addr, "--name", "B30", "--attr-timeout", "30s")},
	}
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := r.m
			t.Run("NoEarlierStat", func(t *testing.T) {
				mustWrite(t, a.path(r.name+"-fresh"), []byte("written by A"))
				wantFile(t, "B opens a file A wrote", b.path(r.name+"-fresh"), []byte("written by A"))
			})
			t.Run("GrowAfterStat", func(t *testing.T) {
				p := r.name + "-grow"
				mustWrite(t, a.path(p), []byte("v1"))
				if n := statSize(t, b.path(p)); n != 2 {
					t.Fatalf("B stat: size %d, want 2", n)
				}
				v2 := []byte("version two, longer than the first")
				mustWrite(t, a.path(p), v2)
				// B's cached size is 2; open must revalidate.
				f, err := os.Open(b.path(p))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				st, err := f.Stat()
				if err != nil {
					t.Fatal(err)
				}
				if st.Size() != int64(len(v2)) {
					t.Errorf("B fstat after open: size %d, want %d (stale attributes survived open)", st.Size(), len(v2))
				}
				got, err := io.ReadAll(f)
				if err != nil || !bytes.Equal(got, v2) {
					t.Errorf("B read after open: %q, %v; want %q", got, err, v2)
				}
				if n := statSize(t, b.path(p)); n != int64(len(v2)) {
					t.Errorf("B stat by path after open: size %d, want %d", n, len(v2))
				}
			})
			t.Run("SameSizeAfterRead", func(t *testing.T) {
				p := r.name + "-same"
				old := patterned(300_000, 10)
				mustWrite(t, a.path(p), old)
				wantFile(t, "B first read", b.path(p), old) // B's page cache and block cache now hold old
				nw := patterned(300_000, 11)
				mustWrite(t, a.path(p), nw)
				wantFile(t, "B reopen after A rewrote with the same size", b.path(p), nw)
			})
			t.Run("ShrinkAfterRead", func(t *testing.T) {
				p := r.name + "-shrink"
				mustWrite(t, a.path(p), patterned(200_000, 12))
				wantFile(t, "B first read", b.path(p), patterned(200_000, 12))
				mustWrite(t, a.path(p), []byte("short"))
				wantFile(t, "B reopen after A shrank the file", b.path(p), []byte("short"))
			})
			t.Run("PartialOverwrite", func(t *testing.T) {
				// A changes 4 KiB in the middle of a 3 MiB file through an
				// open descriptor: B must not mix old cached blocks with
				// the new one.
				p := r.name + "-middle"
				data := patterned(3<<20, 13)
				mustWrite(t, a.path(p), data)
				wantFile(t, "B first read", b.path(p), data)
				f, err := os.OpenFile(a.path(p), os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				patch := bytes.Repeat([]byte{0xAB}, 4096)
				if _, err := f.WriteAt(patch, 1<<20+100); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				copy(data[1<<20+100:], patch)
				wantFile(t, "B reopen after A patched the middle", b.path(p), data)
			})
			t.Run("Fsync", func(t *testing.T) {
				// Data reaches the server no later than fsync: B sees it
				// on open while A still holds the file open.
				p := r.name + "-fsync"
				f, err := os.Create(a.path(p))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := f.Write([]byte("synced")); err != nil {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
				wantFile(t, "B open after A's fsync", b.path(p), []byte("synced"))
			})
			t.Run("NewNameAfterMiss", func(t *testing.T) {
				// B looks up a missing name; A creates it; B finds it.
				p := r.name + "-late"
				if _, err := os.Stat(b.path(p)); !os.IsNotExist(err) {
					t.Fatalf("B stat of a missing file: %v, want ENOENT", err)
				}
				mustWrite(t, a.path(p), []byte("late"))
				wantFile(t, "B opens a name it missed a moment ago", b.path(p), []byte("late"))
			})
		})
	}
}

// TestE2ERenameOverOpenFile: a descriptor open on a file keeps reading its
// old content after another file is renamed over it, in the client that
// renamed and in the other one; new opens see the new file.
func TestE2ERenameOverOpenFile(t *testing.T) {
	needFUSE(t)
	_, a, b := twoClients(t)
	old, nw := patterned(2<<20+7, 20), patterned(1<<20+3, 21) // several blocks, different sizes
	mustWrite(t, a.path("target"), old)

	fa, err := os.Open(a.path("target"))
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.Open(b.path("target"))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	// B has read the first block; the rest is read after the rename.
	head := make([]byte, 4096)
	if _, err := io.ReadFull(fb, head); err != nil {
		t.Fatal(err)
	}

	mustWrite(t, a.path("target.tmp"), nw)
	if err := os.Rename(a.path("target.tmp"), a.path("target")); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		f    *os.File
	}{{"A's descriptor (same client renamed)", fa}, {"B's descriptor (other client)", fb}} {
		var got []byte
		err := within(t, 20*time.Second, "read "+c.name, func() error {
			var err error
			got = make([]byte, len(old)+10)
			n, err := c.f.ReadAt(got, 0)
			got = got[:n]
			if err == io.EOF {
				err = nil
			}
			return err
		})
		if err != nil {
			t.Errorf("%s: read after rename: %v", c.name, err)
		} else if !bytes.Equal(got, old) {
			t.Errorf("%s: read after rename got %d bytes (%s), want the old %d bytes (%s)", c.name, len(got), brief(got), len(old), brief(old))
		}
	}
	wantFile(t, "A reopens", a.path("target"), nw)
	wantFile(t, "B reopens", b.path("target"), nw)
	if _, err := os.Stat(b.path("target.tmp")); !os.IsNotExist(err) {
		t.Errorf("B stat target.tmp after rename: %v, want ENOENT", err)
	}
}

// TestE2ETruncate: A shrinks and grows a file (path truncate and ftruncate);
// B sees the new size and zeros in the grown part on each open.
func TestE2ETruncate(t *testing.T) {
	needFUSE(t)
	_, a, b := twoClients(t)
	data := patterned(3<<20, 30)
	mustWrite(t, a.path("f"), data)
	wantFile(t, "B first read", b.path("f"), data)

	if err := os.Truncate(a.path("f"), 1<<20+5); err != nil {
		t.Fatal(err)
	}
	wantFile(t, "B after A shrank to 1MiB+5", b.path("f"), data[:1<<20+5])

	if err := os.Truncate(a.path("f"), 2<<20); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{}, data[:1<<20+5]...), make([]byte, 2<<20-(1<<20+5))...)
	wantFile(t, "B after A grew to 2MiB (zeros)", b.path("f"), want)

	f, err := os.OpenFile(a.path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(5000); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want = append(append([]byte{}, data[:100]...), make([]byte, 4900)...)
	wantFile(t, "B after A's ftruncate to 100 then 5000", b.path("f"), want)

	// B truncates to zero with O_TRUNC; A sees an empty file.
	tf, err := os.OpenFile(b.path("f"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	tf.Close()
	wantFile(t, "A after B's O_TRUNC", a.path("f"), []byte{})
}

// TestE2EConcurrentReaders: eight sha256sum processes, four on each client,
// read one 64 MiB file at once and all get the export's bytes.
func TestE2EConcurrentReaders(t *testing.T) {
	needFUSE(t)
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("sha256sum not installed")
	}
	srv, a, b := twoClients(t)
	data := patterned(64<<20, 40)
	mustWrite(t, filepath.Join(srv.export, "large"), data)
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	data = nil

	var wg sync.WaitGroup
	results := make([]string, 8)
	errs := make([]error, 8)
	for i := range 8 {
		m := a
		if i%2 == 1 {
			m = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("sha256sum", m.path("large"))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				errs[i] = err
				return
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				errs[i] = err
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				<-done
				errs[i] = fmt.Errorf("still reading after 60s (hang)")
			}
			results[i], _, _ = strings.Cut(out.String(), " ")
		}()
	}
	wg.Wait()
	for i := range 8 {
		if errs[i] != nil {
			t.Errorf("reader %d: %v: %s", i, errs[i], results[i])
		} else if results[i] != want {
			t.Errorf("reader %d: sha256 %s, want %s (the export's)", i, results[i], want)
		}
	}
}

// TestE2EExportChangedDirectly: a file changed in the export directory by
// another program is seen through the mount on the next open once the
// server noticed it (inotify, within milliseconds; docs/consistency.md):
// different size; same size with new content; a new file; a removed file.
func TestE2EExportChangedDirectly(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	a := startMount(t, srv.addr)
	exp := func(name string) string { return filepath.Join(srv.export, name) }

	// Every read is "soon": the mount may know a directory's whole listing
	// (its read-ahead across files lists it), and a name made in the
	// export is found once the server's watch told it of the change.
	mustWrite(t, exp("f"), []byte("first"))
	wantFileSoon(t, "A first read", a.path("f"), []byte("first"))
	mustWrite(t, exp("f"), []byte("second, longer"))
	wantFileSoon(t, "A after the export grew", a.path("f"), []byte("second, longer"))

	same1, same2 := patterned(1<<20+50, 50), patterned(1<<20+50, 51)
	mustWrite(t, exp("g"), same1)
	wantFileSoon(t, "A first read", a.path("g"), same1)
	// Same size; make sure mtime differs even on a coarse clock.
	mustWrite(t, exp("g"), same2)
	future := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(exp("g"), future, future); err != nil {
		t.Fatal(err)
	}
	wantFileSoon(t, "A after the export was rewritten with the same size", a.path("g"), same2)

	mustWrite(t, exp("new"), []byte("made outside"))
	wantFileSoon(t, "A opens a file made in the export", a.path("new"), []byte("made outside"))

	if err := os.Remove(exp("new")); err != nil {
		t.Fatal(err)
	}
	// The kernel may keep the name for the entry timeout (1s); the open
	// must then fail, not return stale data or hang.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := within(t, 10*time.Second, "open a removed file", func() error {
			f, err := os.Open(a.path("new"))
			if err == nil {
				f.Close()
			}
			return err
		})
		if err != nil {
			if !os.IsNotExist(err) && !errors.Is(err, syscall.ESTALE) {
				t.Errorf("open after removal in the export: %v, want ENOENT", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a file removed from the export still opens through the mount after 5s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestE2EPosixSuite runs the POSIX behaviour suite against a real mount.
func TestE2EPosixSuite(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	m := startMount(t, srv.addr)
	posixtest.Run(t, m.dir)
}
