package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// wbSetup is a write-back arrangement under test: a mount whose writes
// complete in a write-back cache (its own, a proxy's, or both), the
// server behind, how to write everything back to the export, and how to
// SIGKILL the write-back process nearest the mount and start it again on
// the same cache directory.
type wbSetup struct {
	m     *e2eMount
	srv   *e2eServer
	flush func()
	crash func()
}

// wbSetups are the arrangements namespace operations are tested under:
// a write-back mount on the server; a plain mount behind a write-back
// proxy; a write-back mount behind a write-back proxy.
var wbSetups = []struct {
	name  string
	start func(t *testing.T) *wbSetup
}{
	{"mount", func(t *testing.T) *wbSetup {
		srv := startServer(t, newExport(t), "--block-size", "4KiB")
		cache := filepath.Join(memDir(t), "cache")
		s := &wbSetup{srv: srv, m: wbMount(t, srv, cache, "--write-back-delay", "1h")}
		s.flush = func() { flushMount(t, s.m) }
		s.crash = func() {
			s.m = crashMount(t, s.m, func(dir string) *e2eMount { return wbMountAt(t, srv.addr, dir, cache) })
		}
		return s
	}},
	{"proxy", func(t *testing.T) *wbSetup {
		srv := startServer(t, newExport(t), "--block-size", "4KiB")
		args := wbProxyArgs(filepath.Join(memDir(t), "pcache"), "--write-back-delay", "1h")
		px := startProxy(t, srv.addr, args...)
		s := &wbSetup{srv: srv, m: startMount(t, px.addr)}
		s.flush = func() { flushProxy(t, px) }
		s.crash = func() {
			px.cmd.Process.Kill()
			<-px.done
			px = startProxyAt(t, srv.addr, px.addr, px.metrics, args...)
		}
		return s
	}},
	{"proxy and mount", func(t *testing.T) *wbSetup {
		srv := startServer(t, newExport(t), "--block-size", "4KiB")
		px := startProxy(t, srv.addr, wbProxyArgs(filepath.Join(memDir(t), "pcache"), "--write-back-delay", "1h")...)
		cache := filepath.Join(memDir(t), "cache")
		s := &wbSetup{srv: srv, m: wbMountAt(t, px.addr, newMountpoint(t), cache)}
		s.flush = func() { flushMount(t, s.m); flushProxy(t, px) }
		s.crash = func() {
			s.m = crashMount(t, s.m, func(dir string) *e2eMount { return wbMountAt(t, px.addr, dir, cache) })
		}
		return s
	}},
}

// wbMountAt is wbMount on a given mount point and upstream address.
func wbMountAt(t *testing.T, addr, dir, cacheDir string) *e2eMount {
	t.Helper()
	return startMountAt(t, addr, dir, "--write-policy", "write-back", "--disk-cache", cacheDir, "--disk-cache-size", "64MiB",
		"--disk-banks", "4", "--disk-assoc", "4", "--write-back-delay", "1h")
}

// crashMount SIGKILLs m, aborts its FUSE connection, detaches its mount
// point and mounts again there with start. The abort comes before the
// wait: a thread of the killed process caught in a request to its own
// mount would wait for the answer forever, and the process would never
// finish exiting (seen once in a long run of the namespace model).
func crashMount(t *testing.T, m *e2eMount, start func(dir string) *e2eMount) *e2eMount {
	t.Helper()
	var st unix.Stat_t
	statErr := unix.Stat(m.dir, &st)
	m.cmd.Process.Kill()
	if statErr == nil {
		abort := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", unix.Minor(st.Dev))
		os.WriteFile(abort, []byte("1"), 0)
	}
	exec.Command("fusermount3", "-u", "-z", m.dir).Run()
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30s of SIGKILL and the abort of its FUSE connection", m.name)
	}
	return start(m.dir)
}

// nsOp is one step of the namespace script: it is run on a root (the
// mount, or a local directory) and fails the test on an error the local
// file system would not give.
type nsOp struct {
	what string
	do   func(root string) error
}

// nsScript is the namespace operations on dirty files, each done the same
// on the mount and on a local directory.
func nsScript() []nsOp {
	w := func(name string, data string) nsOp {
		return nsOp{"write " + name, func(r string) error { return os.WriteFile(filepath.Join(r, name), []byte(data), 0o644) }}
	}
	op := func(what string, f func(r string) error) nsOp { return nsOp{what, f} }
	j := filepath.Join
	return []nsOp{
		// link, then unlink of the first name (git's objects)
		w("tmp_obj", "object data\n"),
		op("link tmp_obj obj", func(r string) error { return os.Link(j(r, "tmp_obj"), j(r, "obj")) }),
		op("unlink tmp_obj", func(r string) error { return os.Remove(j(r, "tmp_obj")) }),
		// three names, two removed, written through the second
		w("n1", "three names"),
		op("link n1 n2, n3", func(r string) error {
			return errors.Join(os.Link(j(r, "n1"), j(r, "n2")), os.Link(j(r, "n1"), j(r, "n3")))
		}),
		op("append through n2", func(r string) error { return appendString(j(r, "n2"), " and more") }),
		op("unlink n1, n3", func(r string) error { return errors.Join(os.Remove(j(r, "n1")), os.Remove(j(r, "n3"))) }),
		// a link renamed, then the first name removed
		w("l1", "link renamed"),
		op("link l1 l2, rename l2 l3, unlink l1", func(r string) error {
			return errors.Join(os.Link(j(r, "l1"), j(r, "l2")), os.Rename(j(r, "l2"), j(r, "l3")), os.Remove(j(r, "l1")))
		}),
		// rename, and rename over another dirty file
		w("r1", "renamed"),
		w("r2", "renamed over"),
		op("rename r1 r2", func(r string) error { return os.Rename(j(r, "r1"), j(r, "r2")) }),
		// a directory holding dirty files renamed, and one renamed over an empty one
		op("mkdir d d/sub e", func(r string) error {
			return errors.Join(os.Mkdir(j(r, "d"), 0o755), os.Mkdir(j(r, "d", "sub"), 0o755), os.Mkdir(j(r, "e"), 0o755))
		}),
		w("d/x", "in d"),
		w("d/sub/y", "in d/sub"),
		op("rename d f", func(r string) error { return os.Rename(j(r, "d"), j(r, "f")) }),
		op("rename f over e", func(r string) error { return unix.Rename(j(r, "f"), j(r, "e")) }),
		// truncations: by path, through a descriptor, and at open
		w("t1", "truncated by path to ten"),
		op("truncate t1 10", func(r string) error { return os.Truncate(j(r, "t1"), 10) }),
		w("t2", "grown"),
		op("ftruncate t2 9000", func(r string) error {
			f, err := os.OpenFile(j(r, "t2"), os.O_RDWR, 0)
			if err != nil {
				return err
			}
			return errors.Join(f.Truncate(9000), f.Close())
		}),
		w("t3", "a long first version of t3"),
		w("t3", "short"),
		// modes and owners
		w("c1", "chmod"),
		op("chmod c1 0600", func(r string) error { return os.Chmod(j(r, "c1"), 0o600) }),
		w("c2", "chown"),
		op("chown c2", func(r string) error { return os.Chown(j(r, "c2"), 1234, 1235) }),
		// open, unlink, write, close: gone
		op("open-unlink-write u", func(r string) error {
			f, err := os.OpenFile(j(r, "u"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			_, err1 := f.WriteString("before")
			err2 := os.Remove(j(r, "u"))
			_, err3 := f.WriteString(" after")
			return errors.Join(err1, err2, err3, f.Close())
		}),
		// the same with another name left
		op("open-link-unlink-write v", func(r string) error {
			f, err := os.OpenFile(j(r, "v"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			_, err1 := f.WriteString("before")
			err2 := os.Link(j(r, "v"), j(r, "v2"))
			err3 := os.Remove(j(r, "v"))
			_, err4 := f.WriteString(" after")
			return errors.Join(err1, err2, err3, err4, f.Close())
		}),
		// O_TMPFILE, then linkat of it (skipped where FUSE has none)
		op("O_TMPFILE and linkat tmp", func(r string) error {
			fd, err := unix.Open(r, unix.O_TMPFILE|unix.O_RDWR, 0o644)
			if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EINVAL) {
				return os.WriteFile(j(r, "tmp"), []byte("tmpfile"), 0o644) // as if
			}
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			if _, err := unix.Write(fd, []byte("tmpfile")); err != nil {
				return err
			}
			return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, j(r, "tmp"), unix.AT_SYMLINK_FOLLOW)
		}),
	}
}

func appendString(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Close())
}

// nsTreeState describes every entry under root: type, mode, owner, size
// and content, one line each, sorted.
func nsTreeState(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		var b []byte
		if d.Type().IsRegular() {
			// Opened first: another client's open recalls the file from
			// a write-back holder, a stat does not (close-to-open).
			if b, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %v uid=%d gid=%d", rel, fi.Mode(), st.Uid, st.Gid)
		if fi.Mode().IsRegular() {
			line += fmt.Sprintf(" size=%d nlink=%d %s", fi.Size(), st.Nlink, brief(b))
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	sort.Strings(out)
	return out
}

func wantTree(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slicesEqual(got, want) {
		t.Errorf("%s:\n got:\n  %s\n want (a local directory):\n  %s", what, join(got), join(want))
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func join(s []string) string { return string(bytes.Join(toBytes(s), []byte("\n  "))) }

func toBytes(s []string) [][]byte {
	out := make([][]byte, len(s))
	for i, x := range s {
		out[i] = []byte(x)
	}
	return out
}

// TestE2EWriteBackNamespace: namespace operations on dirty files — link,
// unlink of one of several names, renames of files and of directories
// holding dirty files, renames over, truncations, chmod and chown,
// open-unlink-write, O_TMPFILE and linkat — under a write-back mount, a
// write-back proxy and both; the mount shows what a local directory does
// after every step, and the export ends equal to it after a flush, after
// a recall by another client's opens, and after a SIGKILL and restart of
// the write-back process.
func TestE2EWriteBackNamespace(t *testing.T) {
	needFUSE(t)
	for _, setup := range wbSetups {
		for _, end := range []string{"flush", "recall", "crash"} {
			t.Run(setup.name+"/"+end, func(t *testing.T) {
				s := setup.start(t)
				ref := t.TempDir()
				for i, op := range nsScript() {
					if err := op.do(ref); err != nil {
						t.Fatalf("step %d %s, locally: %v", i, op.what, err)
					}
					if err := op.do(s.m.dir); err != nil {
						t.Fatalf("step %d %s, on the mount: %v", i, op.what, err)
					}
				}
				want := nsTreeState(t, ref)
				wantTree(t, "the mount after the script", nsTreeState(t, s.m.dir), want)
				switch end {
				case "recall":
					other := startMount(t, s.srv.addr)
					wantTree(t, "another client, direct on the server", nsTreeState(t, other.dir), want)
				case "crash":
					s.crash()
				}
				s.flush()
				wantTree(t, "the export after "+end+" and a flush", nsTreeState(t, s.srv.export), want)
			})
		}
	}
}
