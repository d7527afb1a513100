package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// deepDepth directories of deepComponent (255 bytes, NAME_MAX) put the
// bottom of the tree more than 3 × PATH_MAX bytes from the export root.
const deepDepth = 50

var deepComponent = strings.Repeat("d", 255)

// deepPathLen is the length of the bottom directory's path from its root.
const deepPathLen = len("deep") + deepDepth*256

// deepChain makes (when mk) or opens the chain root/deep/ddd…/ddd… one
// directory at a time, as a process whose working directory is deep does
// (a path of that length is ENAMETOOLONG to the kernel), and returns the
// bottom directory open for reading.
func deepChain(t *testing.T, root string, mk bool) int {
	t.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := append([]string{"deep"}, slicesRepeat(deepComponent, deepDepth)...)
	for i, name := range names {
		if mk {
			if err := unix.Mkdirat(fd, name, 0o755); err != nil {
				unix.Close(fd)
				t.Fatalf("mkdir at depth %d under %s: %v", i, root, err)
			}
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open directory at depth %d under %s: %v", i, root, err)
		}
		fd = next
	}
	return fd
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// deepLog records the steps of deepOps: each step's errno (or ok) and
// what it showed.
type deepLog struct{ lines []string }

func (l *deepLog) add(step string, err error, format string, args ...any) {
	res := "ok"
	if err != nil {
		var e syscall.Errno
		if errors.As(err, &e) {
			res = unix.ErrnoName(e)
		} else {
			res = err.Error()
		}
	}
	l.lines = append(l.lines, fmt.Sprintf("%s: %s %s", step, res, fmt.Sprintf(format, args...)))
}

// stat is fstatat(d, name) without following, as a line: the type,
// permission bits, size, link count and owner (not times or numbers that
// differ between file systems).
func (l *deepLog) stat(d int, name string) {
	var st unix.Stat_t
	err := unix.Fstatat(d, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		l.add("stat "+name, err, "")
		return
	}
	size := st.Size
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		size = 0 // a directory's size is the file system's own
	}
	l.add("stat "+name, nil, "type %o mode %o size %d nlink %d owner %d:%d",
		st.Mode&unix.S_IFMT, st.Mode&0o7777, size, st.Nlink, st.Uid, st.Gid)
}

func (l *deepLog) readdir(d int, name string) {
	fd, err := unix.Openat(d, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		l.add("readdir "+name, err, "")
		return
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	ns, err := f.Readdirnames(-1)
	sort.Strings(ns)
	l.add("readdir "+name, err, "%v", ns)
}

// writeAt creates (or opens) name under d and writes data at off.
func (l *deepLog) writeAt(d int, name string, flags int, data []byte, off int64) {
	fd, err := unix.Openat(d, name, flags|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		l.add("open "+name, err, "")
		return
	}
	defer unix.Close(fd)
	n, err := unix.Pwrite(fd, data, off)
	l.add("write "+name, err, "%d bytes at %d", n, off)
	if err == nil {
		l.add("fsync "+name, unix.Fsync(fd), "")
	}
}

// read reads name under d whole and says whether it holds want.
func (l *deepLog) read(d int, name string, want []byte) {
	fd, err := unix.Openat(d, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		l.add("read "+name, err, "")
		return
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(f)
	l.add("read "+name, err, "%d bytes, as written %v", b.Len(), bytes.Equal(b.Bytes(), want))
}

func (l *deepLog) xattrs(fd int, what string) {
	l.add("setxattr "+what, unix.Fsetxattr(fd, "user.deep", []byte("value"), 0), "")
	buf := make([]byte, 64)
	n, err := unix.Fgetxattr(fd, "user.deep", buf)
	l.add("getxattr "+what, err, "%q", buf[:max(n, 0)])
	n, err = unix.Flistxattr(fd, buf)
	l.add("listxattr "+what, err, "%q", buf[:max(n, 0)])
	l.add("removexattr "+what, unix.Fremovexattr(fd, "user.deep"), "")
	_, err = unix.Fgetxattr(fd, "user.deep", buf)
	l.add("getxattr removed "+what, err, "")
}

// deepOps makes the deep chain under root and runs every kind of
// operation at its bottom; it leaves "keep" there holding data.
func deepOps(t *testing.T, root string, data []byte) []string {
	t.Helper()
	d := deepChain(t, root, true)
	defer unix.Close(d)
	l := &deepLog{}
	tail := []byte("tail")
	l.writeAt(d, "f", unix.O_CREAT|unix.O_EXCL, data, 0)
	l.writeAt(d, "f", 0, tail, int64(len(data))+100)
	want := append(append(append([]byte{}, data...), make([]byte, 100)...), tail...)
	l.stat(d, "f")
	l.read(d, "f", want)
	l.add("mkdir sub", unix.Mkdirat(d, "sub", 0o750), "")
	l.writeAt(d, "sub/g", unix.O_CREAT|unix.O_EXCL, []byte("g"), 0)
	l.readdir(d, ".")
	l.add("rename f f2", unix.Renameat(d, "f", d, "f2"), "")
	l.stat(d, "f")
	l.stat(d, "f2")
	l.read(d, "f2", want)
	l.add("link f2 l", unix.Linkat(d, "f2", d, "l", 0), "")
	l.stat(d, "l")
	l.add("chmod f2", unix.Fchmodat(d, "f2", 0o600, 0), "")
	l.stat(d, "l")
	l.add("chown f2", unix.Fchownat(d, "f2", 1, 2, unix.AT_SYMLINK_NOFOLLOW), "")
	l.stat(d, "f2")
	ts := []unix.Timespec{unix.NsecToTimespec(1e18), unix.NsecToTimespec(2e18)}
	l.add("utimes f2", unix.UtimesNanoAt(d, "f2", ts, unix.AT_SYMLINK_NOFOLLOW), "")
	var st unix.Stat_t
	err := unix.Fstatat(d, "f2", &st, unix.AT_SYMLINK_NOFOLLOW)
	l.add("stat times f2", err, "%d %d", st.Atim.Nano(), st.Mtim.Nano())
	if fd, err := unix.Openat(d, "f2", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		l.add("open f2", err, "")
	} else {
		l.xattrs(fd, "f2")
		unix.Close(fd)
	}
	l.xattrs(d, "the bottom directory")
	l.add("symlink s", unix.Symlinkat("f2", d, "s"), "")
	target := make([]byte, 64)
	n, err := unix.Readlinkat(d, "s", target)
	l.add("readlink s", err, "%q", target[:max(n, 0)])
	l.stat(d, "s")
	l.add("mknod fifo", unix.Mknodat(d, "fifo", unix.S_IFIFO|0o644, 0), "")
	l.stat(d, "fifo")
	l.add("rename sub sub2", unix.Renameat(d, "sub", d, "sub2"), "")
	l.stat(d, "sub2/g")
	l.read(d, "sub2/g", []byte("g"))
	l.add("rmdir full", unix.Unlinkat(d, "sub2", unix.AT_REMOVEDIR), "")
	if fd, err := unix.Openat(d, "f2", unix.O_WRONLY|unix.O_CLOEXEC, 0); err != nil {
		l.add("open f2 to truncate", err, "")
	} else {
		l.add("ftruncate f2", unix.Ftruncate(fd, 5), "")
		unix.Close(fd)
	}
	l.add("truncate by path", unix.Truncate(fmt.Sprintf("/proc/self/fd/%d/l", d), 3), "")
	l.stat(d, "f2")
	l.read(d, "l", data[:3])
	for _, name := range []string{"l", "s", "f2", "fifo", "sub2/g"} {
		l.add("unlink "+name, unix.Unlinkat(d, name, 0), "")
	}
	l.add("rmdir sub2", unix.Unlinkat(d, "sub2", unix.AT_REMOVEDIR), "")
	l.stat(d, "f2")
	l.readdir(d, ".")
	l.more(d)
	l.writeAt(d, "keep", unix.O_CREAT|unix.O_EXCL, data, 0)
	l.read(d, "keep", data)
	return l.lines
}

// more is deepOps's operations on open files: an append, fallocate,
// advisory locks and copy_file_range.
func (l *deepLog) more(d int) {
	l.writeAt(d, "a", unix.O_CREAT|unix.O_EXCL, []byte("one"), 0)
	l.writeAt(d, "a", unix.O_APPEND, []byte("two"), 0)
	l.read(d, "a", []byte("onetwo"))
	fd, err := unix.Openat(d, "a", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		l.add("open a", err, "")
		return
	}
	l.add("fallocate a", unix.Fallocate(fd, 0, 0, 1<<20), "")
	l.add("flock a", unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB), "")
	l.add("funlock a", unix.Flock(fd, unix.LOCK_UN), "")
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 10}
	l.add("fcntl lock a", unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk), "")
	unix.Close(fd)
	l.stat(d, "a")
	src, err1 := unix.Openat(d, "a", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	dst, err2 := unix.Openat(d, "copy", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err := errors.Join(err1, err2); err != nil {
		l.add("open for copy", err, "")
	} else {
		n, err := unix.CopyFileRange(src, nil, dst, nil, 6, 0)
		l.add("copy_file_range", err, "%d", n)
	}
	unix.Close(src)
	unix.Close(dst)
	l.read(d, "copy", []byte("onetwo"))
	for _, name := range []string{"a", "copy"} {
		l.add("unlink "+name, unix.Unlinkat(d, name, 0), "")
	}
}

// wantDeepLike fails unless got (a coopfs mount's transcript) is want
// (ext4's, or what a scenario expects), step by step.
func wantDeepLike(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return
	}
	for i := range max(len(got), len(want)) {
		g, w := "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("step %d: %q, want %q", i, g, w)
		}
	}
}

// wantDeepKeep fails unless the export holds data in "keep" at the bottom
// of the chain.
func wantDeepKeep(t *testing.T, export string, data []byte) {
	t.Helper()
	d := deepChain(t, export, false)
	defer unix.Close(d)
	l := &deepLog{}
	l.read(d, "keep", data)
	if want := fmt.Sprintf("read keep: ok %d bytes, as written true", len(data)); l.lines[0] != want {
		t.Errorf("the export's file at the bottom: %s, want %s", l.lines[0], want)
	}
}

// TestE2EDeepPaths: a tree whose bottom is more than 3 × PATH_MAX bytes
// from the export root is used through a coopfs mount as on ext4 — create,
// stat, readdir, rename, link, unlink, chmod, chown, utimes, truncate,
// xattrs, symlinks, special files, a read and a write — under every policy,
// through a proxy and on write-back mounts, and the export ends up with
// what was written.
func TestE2EDeepPaths(t *testing.T) {
	needFUSE(t)
	if deepPathLen <= 3*unix.PathMax {
		t.Fatalf("the tree is %d bytes deep, not more than 3 × PATH_MAX", deepPathLen)
	}
	data := patterned(300<<10+17, 32)
	ext4 := deepOps(t, newExport(t), data)
	t.Logf("on ext4, %d bytes below the export root:\n%s", deepPathLen, strings.Join(ext4, "\n"))
	cases := []struct {
		name   string
		mount  func(t *testing.T, srv *e2eServer) (m *e2eMount, flush func())
		policy string
	}{
		{name: "none", policy: "none"},
		{name: "directory", policy: "directory"},
		{name: "hints", policy: "hints"},
		{name: "wholefile", policy: "wholefile"},
		{name: "no-callbacks", mount: func(t *testing.T, srv *e2eServer) (*e2eMount, func()) {
			return startMount(t, srv.addr, "--no-callbacks"), nil
		}},
		{name: "proxy", mount: func(t *testing.T, srv *e2eServer) (*e2eMount, func()) {
			px := startProxy(t, srv.addr)
			return startMount(t, px.addr), nil
		}},
		{name: "writeback", mount: func(t *testing.T, srv *e2eServer) (*e2eMount, func()) {
			m := wbMount(t, srv, filepath.Join(t.TempDir(), "cache"), "--write-back-delay", "1h")
			return m, func() { flushMount(t, m) }
		}},
		{name: "writeback-crash", mount: func(t *testing.T, srv *e2eServer) (*e2eMount, func()) {
			// Killed with its data dirty: a new mount on the cache
			// writes it back from its journal (the paths it records).
			cache := filepath.Join(t.TempDir(), "cache")
			m := wbMount(t, srv, cache, "--write-back-delay", "1h")
			return m, func() {
				m.cmd.Process.Kill()
				<-m.done
				exec.Command("fusermount3", "-u", "-z", m.dir).Run()
				d := deepChain(t, srv.export, false)
				var st unix.Stat_t
				if err := unix.Fstatat(d, "keep", &st, 0); err == nil && st.Size != 0 {
					t.Errorf("the export has %d bytes of keep before the restart: nothing was left to the journal", st.Size)
				}
				unix.Close(d)
				flushMount(t, wbMount(t, srv, cache))
			}
		}},
		{name: "proxy-writeback", mount: func(t *testing.T, srv *e2eServer) (*e2eMount, func()) {
			px := startProxy(t, srv.addr, wbProxyArgs(filepath.Join(t.TempDir(), "cache"), "--write-back-delay", "1h")...)
			return startMount(t, px.addr), func() { flushProxy(t, px) }
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var extra []string
			if c.policy != "" {
				extra = []string{"--policy", c.policy}
			}
			srv := startServer(t, newExport(t), extra...)
			var m *e2eMount
			var flush func()
			if c.mount != nil {
				m, flush = c.mount(t, srv)
			} else {
				m = startMount(t, srv.addr)
			}
			wantDeepLike(t, deepOps(t, m.dir, data), ext4)
			if flush != nil {
				flush()
			}
			wantDeepKeep(t, srv.export, data)
		})
	}
}

// TestE2EDeepPathsPastTheLimit: a chain made one directory at a time
// reaches the protocol's limit on a path (wire.MaxPath, 64 KiB from the
// export root): the directory past it fails with ENAMETOOLONG, and the
// mount goes on serving (the request is refused before it is sent, where
// the server's decoder would drop the connection).
func TestE2EDeepPathsPastTheLimit(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	m := startMount(t, srv.addr)
	fd, err := unix.Open(m.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { unix.Close(fd) }()
	p := "deep"
	for depth := 0; ; depth++ {
		err := unix.Mkdirat(fd, filepath.Base(p), 0o755)
		if len(p) > wire.MaxPath {
			if !errors.Is(err, unix.ENAMETOOLONG) {
				t.Fatalf("mkdir %d bytes below the export root: %v, want ENAMETOOLONG", len(p), err)
			}
			break
		}
		if err != nil {
			t.Fatalf("mkdir at depth %d (%d bytes below the export root): %v", depth, len(p), err)
		}
		next, err := unix.Openat(fd, filepath.Base(p), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open at depth %d: %v", depth, err)
		}
		unix.Close(fd)
		fd = next
		p += "/" + deepComponent
	}
	l := &deepLog{}
	l.writeAt(fd, "f", unix.O_CREAT|unix.O_EXCL, []byte("last"), 0)
	l.read(fd, "f", []byte("last"))
	root, err := unix.Open(m.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("the mount after the refusal: %v", err)
	}
	defer unix.Close(root)
	l.stat(root, "deep")
	for _, line := range l.lines {
		if !strings.Contains(line, ": ok ") || strings.Contains(line, "false") {
			t.Errorf("after the refusal: %s", line)
		}
	}
}

// TestE2EDeepPathsMetaDiskRestart: a mount with a disk cache keeps the
// attributes and listings of the deep tree on disk (records that hold
// their 12 KiB paths); a new mount process on the same cache revalidates
// them and sees a file changed directly in the export meanwhile.
func TestE2EDeepPathsMetaDiskRestart(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	cache := filepath.Join(t.TempDir(), "cache")
	var metrics string
	mount := func() *e2eMount {
		metrics = e2eFreeAddr(t)
		return startMount(t, srv.addr, "--disk-cache", cache, "--disk-cache-size", "64MiB", "--metrics", metrics)
	}
	data := patterned(100<<10, 33)
	m := mount()
	ext4 := deepOps(t, newExport(t), data)
	wantDeepLike(t, deepOps(t, m.dir, data), ext4)
	m.cleanup(t)

	changed := patterned(5000, 34)
	d := deepChain(t, srv.export, false)
	l := &deepLog{}
	l.writeAt(d, "keep", unix.O_TRUNC, changed, 0)
	unix.Close(d)
	m = mount()
	d = deepChain(t, m.dir, false)
	defer unix.Close(d)
	l.read(d, "keep", changed)
	l.readdir(d, ".")
	for _, line := range l.lines {
		if !strings.Contains(line, ": ok ") || strings.Contains(line, "false") {
			t.Errorf("%s", line)
		}
	}
	if got := l.lines[len(l.lines)-1]; got != "readdir .: ok [keep]" {
		t.Errorf("the bottom directory after the restart: %s, want [keep]", got)
	}
	byType := scrape(t, metrics).SumBy("coopfs_messages_total", "type", map[string]string{"dir": "out"})
	if byType["Revalidate"] == 0 {
		t.Errorf("the restarted mount sent no Revalidate: the metadata kept on disk was not used (%v)", byType)
	}
}

// TestE2EDeepPathsTwoMounts: two mounts of one server share the deep tree
// under the server's callbacks: a write-back mount's dirty file at the
// bottom is recalled when the other opens it; what one writes, renames
// and removes there the other sees at once (its cached attributes, entries
// and listings are broken).
func TestE2EDeepPathsTwoMounts(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--recall-timeout", "10s")
	a := wbMount(t, srv, filepath.Join(t.TempDir(), "cache"), "--write-back-delay", "1h")
	b := startMount(t, srv.addr)
	data := patterned(200<<10, 35)
	ext4 := deepOps(t, newExport(t), data)
	wantDeepLike(t, deepOps(t, a.dir, data), ext4)
	da := deepChain(t, a.dir, false)
	defer unix.Close(da)
	db := deepChain(t, b.dir, false)
	defer unix.Close(db)
	l := &deepLog{}
	l.read(db, "keep", data) // recalled from a
	l.readdir(db, ".")
	l.readdir(da, ".") // both have the listing now
	next := patterned(7000, 36)
	l.writeAt(db, "new", unix.O_CREAT|unix.O_EXCL, next, 0)
	l.read(da, "new", next)
	l.readdir(da, ".")
	l.add("rename keep kept", unix.Renameat(db, "keep", db, "kept"), "")
	l.stat(da, "keep")
	l.read(da, "kept", data)
	l.add("unlink new", unix.Unlinkat(da, "new", 0), "")
	l.stat(db, "new")
	l.readdir(db, ".")
	want := []string{
		fmt.Sprintf("read keep: ok %d bytes, as written true", len(data)),
		"readdir .: ok [keep]",
		"readdir .: ok [keep]",
		fmt.Sprintf("write new: ok %d bytes at 0", len(next)),
		"fsync new: ok ",
		fmt.Sprintf("read new: ok %d bytes, as written true", len(next)),
		"readdir .: ok [keep new]",
		"rename keep kept: ok ",
		"stat keep: ENOENT ",
		fmt.Sprintf("read kept: ok %d bytes, as written true", len(data)),
		"unlink new: ok ",
		"stat new: ENOENT ",
		"readdir .: ok [kept]",
	}
	wantDeepLike(t, l.lines, want)
}
