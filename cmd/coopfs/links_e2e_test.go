package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestE2EHardLinkActsOnItsInode: an operation on a file the kernel reached
// by one of its links acts on that file, even when the link the mount saw
// last now names another file. Mount A makes a file with links a and b
// (b is the name it saw last); mount B replaces b by another file; A's
// truncation, chmod or open with O_TRUNC through a, and its fchmod and
// ftruncate through a descriptor, must leave B's new file alone (they used
// to go to b's path: silent corruption of another file).
func TestE2EHardLinkActsOnItsInode(t *testing.T) {
	needFUSE(t)
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	ops := []struct {
		name string
		do   func(t *testing.T, path string, f *os.File) error
	}{
		{"truncate", func(t *testing.T, p string, _ *os.File) error { return os.Truncate(p, 1) }},
		{"chmod", func(t *testing.T, p string, _ *os.File) error { return os.Chmod(p, 0o600) }},
		{"open O_TRUNC", func(t *testing.T, p string, _ *os.File) error {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"utimes", func(t *testing.T, p string, _ *os.File) error { return os.Chtimes(p, past, past) }},
		{"stat", func(t *testing.T, p string, _ *os.File) error {
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err != nil {
				return err
			}
			if st.Size != int64(len("linked file")) {
				t.Errorf("stat of a on mount A: size %d, the other file's?", st.Size)
			}
			return nil
		}},
		{"link", func(t *testing.T, p string, _ *os.File) error {
			c := filepath.Join(filepath.Dir(p), "c")
			if err := os.Link(p, c); err != nil {
				return err
			}
			if got, err := os.ReadFile(c); err != nil || string(got) != "linked file" {
				t.Errorf("link of a on mount A: the new link reads %q, %v", got, err)
			}
			return nil
		}},
		{"setxattr", func(t *testing.T, p string, _ *os.File) error {
			return unix.Setxattr(p, "user.which", []byte("linked"), 0)
		}},
		{"ftruncate", func(t *testing.T, _ string, f *os.File) error { return f.Truncate(1) }},
		{"fchmod", func(t *testing.T, _ string, f *os.File) error { return f.Chmod(0o600) }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			srv := startServer(t, newExport(t))
			ma := startMount(t, srv.addr, "--name", "A")
			mb := startMount(t, srv.addr, "--name", "B")
			for _, d := range []string{"d1", "d2"} {
				if err := os.Mkdir(ma.path(d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			mustWrite(t, ma.path("d1/a"), []byte("linked file"))
			if err := os.Link(ma.path("d1/a"), ma.path("d2/b")); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"d1/a", "d2/b"} {
				if _, err := os.Stat(ma.path(n)); err != nil {
					t.Fatal(err)
				}
			}
			f, err := os.OpenFile(ma.path("d1/a"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// B gives the name b to another file.
			if err := os.Remove(mb.path("d2/b")); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, mb.path("d2/b"), []byte("another file"))
			if err := os.Chmod(mb.path("d2/b"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := op.do(t, ma.path("d1/a"), f); err != nil {
				t.Fatalf("%s through a: %v", op.name, err)
			}
			got, err := os.ReadFile(mb.path("d2/b"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "another file" {
				t.Errorf("%s of a on mount A changed the other file at b: %q", op.name, got)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(mb.path("d2/b"), &st); err != nil {
				t.Fatal(err)
			}
			if _, err := unix.Getxattr(mb.path("d2/b"), "user.which", make([]byte, 64)); err == nil {
				t.Errorf("%s of a on mount A set an attribute of the other file at b", op.name)
			}
			if time.Unix(st.Mtim.Unix()).Equal(past) {
				t.Errorf("%s of a on mount A changed the times of the other file at b", op.name)
			}
			if st.Mode&0o777 != 0o644 {
				t.Errorf("%s of a on mount A changed the mode of the other file at b: %o", op.name, st.Mode&0o777)
			}
			if err := syscall.Stat(ma.path("d1/a"), &st); err != nil {
				t.Fatalf("stat a: %v", err)
			}
			switch op.name {
			case "truncate", "ftruncate":
				if st.Size != 1 {
					t.Errorf("%s of a: a has size %d, want 1", op.name, st.Size)
				}
			case "open O_TRUNC":
				if st.Size != 0 {
					t.Errorf("%s of a: a has size %d, want 0", op.name, st.Size)
				}
			case "utimes":
				if !time.Unix(st.Mtim.Unix()).Equal(past) {
					t.Errorf("%s of a: a has mtime %v, want %v", op.name, time.Unix(st.Mtim.Unix()), past)
				}
			case "stat", "link":
			case "setxattr":
				v := make([]byte, 64)
				// Read through B: a read of an attribute through A still goes
				// by A's last-seen name.
				if n, err := unix.Getxattr(mb.path("d1/a"), "user.which", v); err != nil || string(v[:n]) != "linked" {
					t.Errorf("%s of a: a has user.which %q, %v", op.name, v[:max(n, 0)], err)
				}
			default:
				if st.Mode&0o777 != 0o600 {
					t.Errorf("%s of a: a has mode %o, want 600", op.name, st.Mode&0o777)
				}
			}
		})
	}
}
