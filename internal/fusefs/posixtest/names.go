package posixtest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// RenameFile: the content moves to the new name; the old name is gone.
func RenameFile(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	data := pattern(10_000, 7)
	writeFile(t, a, data)
	ino := lstat(t, a).Ino
	must(t, "rename", os.Rename(a, b))
	var st syscall.Stat_t
	wantErrno(t, "stat old name", syscall.Lstat(a, &st), syscall.ENOENT)
	wantContent(t, b, data)
	if got := lstat(t, b).Ino; got != ino {
		t.Errorf("inode %d after rename, want %d", got, ino)
	}
	// Into a subdirectory and back out.
	must(t, "mkdir", os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	c := filepath.Join(dir, "sub", "c")
	must(t, "rename into subdir", os.Rename(b, c))
	wantContent(t, c, data)
	wantErrno(t, "rename missing", syscall.Rename(a, b), syscall.ENOENT)
}

// RenameDir: a directory moves with its contents.
func RenameDir(t *testing.T, dir string) {
	d := filepath.Join(dir, "d")
	must(t, "mkdir", os.MkdirAll(filepath.Join(d, "inner"), 0o755))
	writeFile(t, filepath.Join(d, "inner", "f"), []byte("deep"))
	e := filepath.Join(dir, "e")
	must(t, "rename dir", os.Rename(d, e))
	wantContent(t, filepath.Join(e, "inner", "f"), []byte("deep"))
	var st syscall.Stat_t
	wantErrno(t, "old path", syscall.Lstat(filepath.Join(d, "inner", "f"), &st), syscall.ENOENT)
	// The moved directory keeps working for new entries.
	writeFile(t, filepath.Join(e, "inner", "g"), []byte("new"))
	wantContent(t, filepath.Join(e, "inner", "g"), []byte("new"))
	// Rename onto an empty directory replaces it.
	empty := filepath.Join(dir, "empty")
	must(t, "mkdir empty", os.Mkdir(empty, 0o755))
	must(t, "rename over empty dir", syscall.Rename(e, empty))
	wantContent(t, filepath.Join(empty, "inner", "f"), []byte("deep"))
}

// RenameOverExisting: rename replaces the target atomically.
func RenameOverExisting(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, []byte("new content"))
	writeFile(t, b, []byte("old content that is longer"))
	inoA := lstat(t, a).Ino
	must(t, "rename over", os.Rename(a, b))
	wantContent(t, b, []byte("new content"))
	if got := lstat(t, b).Ino; got != inoA {
		t.Errorf("target inode %d, want the source's %d", got, inoA)
	}
	ents, err := os.ReadDir(dir)
	must(t, "readdir", err)
	if len(ents) != 1 || ents[0].Name() != "b" {
		t.Errorf("directory has %v, want only b", ents)
	}
}

// RenameOverOpenFile: a descriptor open on the replaced file keeps reading
// its old content; a new open sees the new one.
func RenameOverOpenFile(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	oldData, newData := pattern(200_000, 8), pattern(150_000, 9)
	writeFile(t, b, oldData)
	writeFile(t, a, newData)
	f, err := os.Open(b)
	must(t, "open b", err)
	defer f.Close()
	head := make([]byte, 1000)
	_, err = io.ReadFull(f, head) // read part before the rename
	must(t, "read head", err)
	must(t, "rename a over b", os.Rename(a, b))
	rest, err := io.ReadAll(f)
	must(t, "read rest of old b", err)
	if got := append(head, rest...); !bytes.Equal(got, oldData) {
		t.Errorf("open descriptor read %d bytes that are not the old content (%d bytes)", len(got), len(oldData))
	}
	wantContent(t, b, newData)
}

// RenameNoReplace: renameat2(RENAME_NOREPLACE) fails with EEXIST on an
// existing target and leaves both files alone.
func RenameNoReplace(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, []byte("A"))
	writeFile(t, b, []byte("B"))
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
	if errnoOf(err) == syscall.EINVAL || errnoOf(err) == syscall.ENOSYS {
		t.Skipf("renameat2 flags not supported here: %v", err)
	}
	wantErrno(t, "RENAME_NOREPLACE over existing", err, syscall.EEXIST)
	wantContent(t, a, []byte("A"))
	wantContent(t, b, []byte("B"))
	c := filepath.Join(dir, "c")
	must(t, "RENAME_NOREPLACE to a new name", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, c, unix.RENAME_NOREPLACE))
	wantContent(t, c, []byte("A"))
}

// RenameExchange: renameat2(RENAME_EXCHANGE) swaps two names.
func RenameExchange(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, []byte("A"))
	must(t, "mkdir b", os.Mkdir(b, 0o755))
	writeFile(t, filepath.Join(b, "inside"), []byte("I"))
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errnoOf(err) == syscall.EINVAL || errnoOf(err) == syscall.ENOSYS {
		t.Skipf("RENAME_EXCHANGE not supported here: %v", err)
	}
	must(t, "RENAME_EXCHANGE", err)
	wantContent(t, b, []byte("A"))
	wantContent(t, filepath.Join(a, "inside"), []byte("I"))
	err = unix.Renameat2(unix.AT_FDCWD, b, unix.AT_FDCWD, filepath.Join(dir, "missing"), unix.RENAME_EXCHANGE)
	wantErrno(t, "RENAME_EXCHANGE with a missing target", err, syscall.ENOENT)
}

// RenameDirErrors: the errno values of impossible directory renames.
func RenameDirErrors(t *testing.T, dir string) {
	d, full, f := filepath.Join(dir, "d"), filepath.Join(dir, "full"), filepath.Join(dir, "f")
	must(t, "mkdir d", os.Mkdir(d, 0o755))
	must(t, "mkdir full", os.Mkdir(full, 0o755))
	writeFile(t, filepath.Join(full, "x"), []byte("x"))
	writeFile(t, f, []byte("f"))
	wantErrno(t, "dir over non-empty dir", syscall.Rename(d, full), syscall.ENOTEMPTY)
	wantErrno(t, "dir over file", syscall.Rename(d, f), syscall.ENOTDIR)
	wantErrno(t, "file over dir", syscall.Rename(f, d), syscall.EISDIR)
	wantErrno(t, "dir into itself", syscall.Rename(d, filepath.Join(d, "sub")), syscall.EINVAL)
	wantContent(t, filepath.Join(full, "x"), []byte("x"))
}

// HardLink: two names, one inode; nlink counts; data shared; the file lives
// until its last name goes.
func HardLink(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, []byte("shared"))
	must(t, "link", os.Link(a, b))
	sa, sb := lstat(t, a), lstat(t, b)
	if sa.Ino != sb.Ino {
		t.Errorf("links have inodes %d and %d, want one", sa.Ino, sb.Ino)
	}
	if sa.Nlink != 2 || sb.Nlink != 2 {
		t.Errorf("nlink %d/%d, want 2", sa.Nlink, sb.Nlink)
	}
	f, err := os.OpenFile(b, os.O_WRONLY|os.O_APPEND, 0)
	must(t, "open b", err)
	_, err = f.Write([]byte("+more"))
	must(t, "append through b", err)
	must(t, "close", f.Close())
	wantContent(t, a, []byte("shared+more"))
	must(t, "unlink a", os.Remove(a))
	if st := lstat(t, b); st.Nlink != 1 {
		t.Errorf("nlink %d after unlinking one name, want 1", st.Nlink)
	}
	wantContent(t, b, []byte("shared+more"))
	wantErrno(t, "link over existing", syscall.Link(b, b), syscall.EEXIST)
	d := filepath.Join(dir, "d")
	must(t, "mkdir", os.Mkdir(d, 0o755))
	wantErrno(t, "link a directory", syscall.Link(d, filepath.Join(dir, "d2")), syscall.EPERM)
	wantErrno(t, "link missing", syscall.Link(a, filepath.Join(dir, "c")), syscall.ENOENT)
}

// Symlink: readlink returns the target verbatim; stat follows it, lstat
// does not; a dangling link gives ENOENT on stat.
func Symlink(t *testing.T, dir string) {
	target := filepath.Join(dir, "target")
	writeFile(t, target, []byte("pointed"))
	l := filepath.Join(dir, "link")
	must(t, "symlink", os.Symlink("target", l))
	got, err := os.Readlink(l)
	must(t, "readlink", err)
	if got != "target" {
		t.Errorf("readlink %q, want target", got)
	}
	if st := lstat(t, l); st.Mode&syscall.S_IFMT != syscall.S_IFLNK || st.Size != int64(len("target")) {
		t.Errorf("lstat of link: mode %o size %d", st.Mode, st.Size)
	}
	wantContent(t, l, []byte("pointed"))
	long := "../" + string(bytes.Repeat([]byte("x"), 200)) + "/a b/ü"
	dangling := filepath.Join(dir, "dangling")
	must(t, "symlink dangling", os.Symlink(long, dangling))
	if got, _ := os.Readlink(dangling); got != long {
		t.Errorf("readlink %q, want %q", got, long)
	}
	var st syscall.Stat_t
	wantErrno(t, "stat dangling", syscall.Stat(dangling, &st), syscall.ENOENT)
	wantErrno(t, "symlink over existing", syscall.Symlink("x", l), syscall.EEXIST)
	_, err = os.Readlink(target)
	wantErrno(t, "readlink of a file", err, syscall.EINVAL)
}

// ReaddirMany: a directory with many entries lists each exactly once, with
// the right types, through several getdents calls.
func ReaddirMany(t *testing.T, dir string) {
	n := 1000
	if testing.Short() {
		n = 300
	}
	var want []string
	for i := range n {
		name := fmt.Sprintf("file-%04d-%s", i, bytes.Repeat([]byte("n"), i%40))
		want = append(want, name)
		f, err := os.Create(filepath.Join(dir, name))
		must(t, "create", err)
		f.Close()
	}
	must(t, "mkdir", os.Mkdir(filepath.Join(dir, "zdir"), 0o755))
	want = append(want, "zdir")
	f, err := os.Open(dir)
	must(t, "open dir", err)
	defer f.Close()
	var got []string
	for {
		ents, err := f.ReadDir(97) // small batches: several getdents calls
		for _, e := range ents {
			got = append(got, e.Name())
			if isDir := e.Name() == "zdir"; e.IsDir() != isDir {
				t.Errorf("%s: IsDir %v", e.Name(), e.IsDir())
			}
		}
		if err == io.EOF {
			break
		}
		must(t, "readdir", err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("listed %d entries, want %d (first differences: %v)", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: %q vs %q", i, a[i], b[i])
		}
	}
	return "one list is a prefix of the other"
}

// AccessDenied: permissions are enforced for a non-root user (needs root to
// switch users; skipped otherwise).
func AccessDenied(t *testing.T, dir string) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	const nobody = 65534
	secret, public := filepath.Join(dir, "secret"), filepath.Join(dir, "public")
	writeFile(t, secret, []byte("s"))
	must(t, "chmod 600", os.Chmod(secret, 0o600))
	writeFile(t, public, []byte("p"))
	must(t, "chmod 644", os.Chmod(public, 0o644))
	must(t, "chmod dir 755", os.Chmod(dir, 0o755))
	own := filepath.Join(dir, "own")
	must(t, "mkdir own", os.Mkdir(own, 0o755))
	must(t, "chown own", os.Chown(own, nobody, nobody))
	asUser(t, nobody, nobody, func() {
		_, err := os.ReadFile(secret)
		wantErrno(t, "read 0600 file of root", err, syscall.EACCES)
		if got, err := os.ReadFile(public); err != nil || string(got) != "p" {
			t.Errorf("read 0644 file of root: %q, %v", got, err)
		}
		_, err = os.OpenFile(public, os.O_WRONLY, 0)
		wantErrno(t, "write 0644 file of root", err, syscall.EACCES)
		_, err = os.Create(filepath.Join(dir, "new"))
		wantErrno(t, "create in 0755 dir of root", err, syscall.EACCES)
		wantErrno(t, "unlink in 0755 dir of root", syscall.Unlink(public), syscall.EACCES)
		wantErrno(t, "chmod file of root", syscall.Chmod(public, 0o777), syscall.EPERM)
		// In its own directory the user may create, and owns what it makes.
		mine := filepath.Join(own, "mine")
		if err := os.WriteFile(mine, []byte("m"), 0o600); err != nil {
			t.Errorf("create in own dir: %v", err)
			return
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(mine, &st); err != nil || st.Uid != nobody || st.Gid != nobody {
			t.Errorf("own file: owner %d:%d (%v), want %d:%d", st.Uid, st.Gid, err, nobody, nobody)
		}
		wantErrno(t, "chown to root", syscall.Chown(mine, 0, 0), syscall.EPERM)
	})
	// Root (CAP_DAC_OVERRIDE) reads the user's 0600 file.
	wantContent(t, filepath.Join(own, "mine"), []byte("m"))
}
