package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Ordinary tools on a write-back mount: what git, shells and fio do to
// files the mount holds dirty.

// TestE2EWriteBackLinkUnlink: a dirty file published by link and unlink
// of its first name (how git stores every object) keeps its data under the
// name left, on the mount and in the export after a flush; the same holds
// when the other name was made directly in the export, unknown to the
// mount.
func TestE2EWriteBackLinkUnlink(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	m := wbMount(t, srv, filepath.Join(t.TempDir(), "cache"), "--write-back-delay", "1h")

	mustWrite(t, m.path("tmp_obj"), []byte("hello\n"))
	if err := os.Link(m.path("tmp_obj"), m.path("final")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.path("tmp_obj")); err != nil {
		t.Fatal(err)
	}
	wantFile(t, "the name left after link and unlink", m.path("final"), []byte("hello\n"))

	// The second name made in the export directly, after the data went dirty.
	mustWrite(t, m.path("x"), []byte("old"))
	flushMount(t, m)
	mustWrite(t, m.path("x"), []byte("dirty data of x"))
	if err := os.Link(filepath.Join(srv.export, "x"), filepath.Join(srv.export, "y")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.path("x")); err != nil {
		t.Fatal(err)
	}

	// Three names, two removed: the data ends under the last.
	mustWrite(t, m.path("p"), []byte("dirty data of p"))
	for _, n := range []string{"q", "r"} {
		if err := os.Link(m.path("p"), m.path(n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"p", "r"} {
		if err := os.Remove(m.path(n)); err != nil {
			t.Fatal(err)
		}
	}
	flushMount(t, m)
	wantExport(t, srv, "final", []byte("hello\n"))
	wantExport(t, srv, "y", []byte("dirty data of x"))
	wantExport(t, srv, "q", []byte("dirty data of p"))
	for _, gone := range []string{"tmp_obj", "x", "p", "r"} {
		if _, ok := exportFile(t, srv, gone); ok {
			t.Errorf("export %s exists; it was removed", gone)
		}
	}
	wantFile(t, "after the flush", m.path("final"), []byte("hello\n"))
}

// TestE2EWriteBackGit: git init, add, commit and fsck on a write-back
// mount, then fsck of the export after a flush.
func TestE2EWriteBackGit(t *testing.T) {
	needFUSE(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	srv := startServer(t, newExport(t))
	m := wbMount(t, srv, filepath.Join(t.TempDir(), "cache"), "--write-back-delay", "1h")
	repo := m.path("repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a.txt", "b.txt", "sub/c.txt"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(repo, name), patterned(1000+i*5000, uint64(i)))
	}
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com",
			"-c", "safe.directory=*"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
	}
	git(repo, "init", "-q")
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "first")
	mustWrite(t, filepath.Join(repo, "a.txt"), []byte("changed\n"))
	git(repo, "commit", "-q", "-a", "-m", "second")
	git(repo, "fsck", "--full", "--strict")
	flushMount(t, m)
	git(filepath.Join(srv.export, "repo"), "fsck", "--full", "--strict")
	git(filepath.Join(srv.export, "repo"), "log", "--oneline")
}

// TestE2EWriteBackWriteOnly: a write of part of a block the mount has not
// cached, through a write-only descriptor, completes the block from the
// server (an append by the shell), and fio's layout of a file (create with
// O_TRUNC, fallocate, ftruncate, then 4 KiB writes) works.
func TestE2EWriteBackWriteOnly(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	m := wbMount(t, srv, filepath.Join(t.TempDir(), "cache"), "--write-back-delay", "1h")
	if err := os.WriteFile(filepath.Join(srv.export, "f"), []byte("first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(m.path("f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write([]byte("more\n")); err != nil {
		t.Fatalf("append through O_WRONLY: %v", err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	wantFile(t, "after the append", m.path("f"), []byte("first\nmore\n"))

	// A write in the middle of a block through O_WRONLY.
	old := patterned(300_000, 3)
	if err := os.WriteFile(filepath.Join(srv.export, "g"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err = os.OpenFile(m.path("g"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("middle"), 150_000); err != nil {
		t.Fatalf("write in the middle through O_WRONLY: %v", err)
	}
	fh.Close()
	copy(old[150_000:], "middle")
	wantFile(t, "after the write in the middle", m.path("g"), old)

	// fio's layout.
	fh, err = os.OpenFile(m.path("fio"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 20
	if err := unix.Fallocate(int(fh.Fd()), 0, 0, size); err != nil {
		t.Fatalf("fallocate: %v", err)
	}
	if err := fh.Truncate(size); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	for _, off := range []int64{0, 8192, 500_000, size - 4096} {
		p := patterned(4096, uint64(off))
		if _, err := fh.WriteAt(p, off); err != nil {
			t.Fatalf("write 4096 at %d after fio's layout: %v", off, err)
		}
		copy(want[off:], p)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	flushMount(t, m)
	wantExport(t, srv, "f", []byte("first\nmore\n"))
	wantExport(t, srv, "g", old)
	wantExport(t, srv, "fio", want)
}

// fsxOp is one operation of an fsx-style sequence: its kind, offset and
// length (for a copy, the source; dst is where it goes).
type fsxOp struct {
	kind     string
	off, n   int64
	dst      int64
	keepSize bool
}

// applyFsx runs op on f, which must be open for reading and writing.
func applyFsx(t *testing.T, f *os.File, op fsxOp, seed uint64) []byte {
	t.Helper()
	fd := int(f.Fd())
	switch op.kind {
	case "write":
		if _, err := f.WriteAt(patterned(int(op.n), seed), op.off); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
	case "read":
		buf := make([]byte, op.n)
		n, _ := f.ReadAt(buf, op.off)
		return buf[:n]
	case "mapread":
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		m, err := unix.Mmap(fd, 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatalf("%v: mmap: %v", op, err)
		}
		out := append([]byte(nil), m[op.off:min(op.off+op.n, st.Size())]...)
		unix.Munmap(m)
		return out
	case "copy_range":
		roff, woff := op.off, op.dst
		if _, err := unix.CopyFileRange(fd, &roff, fd, &woff, int(op.n), 0); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
	case "zero_range", "punch_hole":
		mode := uint32(unix.FALLOC_FL_ZERO_RANGE)
		if op.kind == "punch_hole" {
			mode = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
		}
		if op.keepSize {
			mode |= unix.FALLOC_FL_KEEP_SIZE
		}
		if err := unix.Fallocate(fd, mode, op.off, op.n); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
	default:
		t.Fatalf("unknown fsx operation %q", op.kind)
	}
	return nil
}

// TestE2EWriteBackZeroRangeGrow: the sequence a random exerciser found,
// where a zero range without KEEP_SIZE that grows the file over dirty data
// left the old data, played on a write-back mount and on a local file
// side by side; every read must agree, and the export after a flush.
func TestE2EWriteBackZeroRangeGrow(t *testing.T) {
	needFUSE(t)
	seq := []fsxOp{
		{kind: "write", off: 0xdc5f, n: 0x2539},
		{kind: "mapread", off: 0xc8de, n: 0x38ba},
		{kind: "copy_range", off: 0x84c, n: 0xad23, dst: 0x22905},
		{kind: "write", off: 0x18623, n: 0x9a33},
		{kind: "zero_range", off: 0x15ef9, n: 0x1238, keepSize: true},
		{kind: "punch_hole", off: 0x27fa, n: 0x2b61},
		{kind: "zero_range", off: 0x3e5d0, n: 0x1a30, keepSize: true},
		{kind: "read", off: 0x11581, n: 0xb8e1},
		{kind: "punch_hole", off: 0x2794e, n: 0x5cda},
		{kind: "punch_hole", off: 0x167c1, n: 0xd28},
		{kind: "zero_range", off: 0x205fb, n: 0xef88},
		{kind: "zero_range", off: 0x7186, n: 0x8fe2},
		{kind: "read", off: 0x1b412, n: 0xbe67},
		{kind: "read", off: 0, n: 0x40000},
	}
	for _, bs := range []string{"4KiB", "64KiB", "1MiB"} {
		t.Run(bs, func(t *testing.T) {
			srv := startServer(t, newExport(t), "--block-size", bs)
			m := wbMount(t, srv, filepath.Join(t.TempDir(), "cache"), "--write-back-delay", "1h")
			ref, err := os.OpenFile(filepath.Join(t.TempDir(), "ref"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			mf, err := os.OpenFile(m.path("f"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer mf.Close()
			for i, op := range seq {
				want := applyFsx(t, ref, op, uint64(i))
				got := applyFsx(t, mf, op, uint64(i))
				if !bytes.Equal(got, want) {
					t.Fatalf("op %d %+v: the mount reads %d bytes (%s), a local file %d (%s)", i, op, len(got), brief(got), len(want), brief(want))
				}
				rst, _ := ref.Stat()
				mst, err := mf.Stat()
				if err != nil || mst.Size() != rst.Size() {
					t.Fatalf("op %d %+v: size on the mount %v (%v), locally %d", i, op, mst.Size(), err, rst.Size())
				}
			}
			want, err := os.ReadFile(ref.Name())
			if err != nil {
				t.Fatal(err)
			}
			mf.Close()
			flushMount(t, m)
			wantExport(t, srv, "f", want)
		})
	}
}
