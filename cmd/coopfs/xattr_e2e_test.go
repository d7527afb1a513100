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
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// xattrTree makes a tree with every kind of extended attribute and ACL the
// issue names: user.*, trusted.*, security.*, access and default ACLs, on
// files, directories and a symlink's target.
func xattrTree(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "d/sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha\n"), 0o640))
	must(os.WriteFile(filepath.Join(dir, "d/b.bin"), bytes.Repeat([]byte{7}, 70000), 0o600))
	must(os.WriteFile(filepath.Join(dir, "d/sub/c"), []byte("c"), 0o644))
	must(os.Symlink("../a.txt", filepath.Join(dir, "d/link")))
	must(os.Chown(filepath.Join(dir, "d/sub/c"), 4242, 4343))
	set := func(p, name, value string) {
		t.Helper()
		must(unix.Lsetxattr(filepath.Join(dir, p), name, []byte(value), 0))
	}
	set("a.txt", "user.color", "blue")
	set("a.txt", "user.empty", "")
	set("a.txt", "trusted.owner", "root only")
	set("a.txt", "security.label", "s0")
	set("d/b.bin", "user.big", strings.Repeat("x", 3000))
	set("d", "user.dir", "yes")
	runCmd(t, 10*time.Second, "setfacl", "-m", "u:4242:rw,g:4343:r,m::rw", filepath.Join(dir, "a.txt"))
	runCmd(t, 10*time.Second, "setfacl", "-m", "u:4242:rwx", filepath.Join(dir, "d"))
	runCmd(t, 10*time.Second, "setfacl", "-d", "-m", "u:4242:rx,g:4343:rwx", filepath.Join(dir, "d"))
	runCmd(t, 10*time.Second, "setfacl", "-d", "-m", "u:4244:r", filepath.Join(dir, "d/sub"))
	// Times in the past, as in a real tree: rsync fixes a directory's mtime
	// at the end only when it differs in whole seconds, and a tree made
	// within the same second as the copy would leave the nanoseconds of
	// its last rename (on ext4 as well, depending on timing).
	old := []unix.Timespec{unix.NsecToTimespec(1577934245_123456789), unix.NsecToTimespec(1577934245_123456789)}
	for _, p := range []string{"a.txt", "d/b.bin", "d/sub/c", "d/link", "d/sub", "d"} {
		must(unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, p), old, unix.AT_SYMLINK_NOFOLLOW))
	}
}

// treeState describes every entry of a tree: type, mode, owner, size,
// content digest, link target, mtime (not for symlinks or the root) and
// every extended attribute (ACLs included).
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	state := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o uid=%d gid=%d", st.Mode, st.Uid, st.Gid)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" size=%d sum=%x mtime=%d", len(b), crc(b), st.Mtim.Nano())
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case unix.S_IFDIR:
			if rel != "." {
				desc += fmt.Sprintf(" mtime=%d", st.Mtim.Nano())
			}
		}
		desc += " " + xattrsOf(t, p)
		state[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return state
}

func crc(b []byte) uint32 {
	var h uint32 = 2166136261
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// xattrsOf lists p's extended attributes (not following a symlink) as
// sorted name=value pairs.
func xattrsOf(t *testing.T, p string) string {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return "xattrs=unsupported"
		}
		t.Fatalf("listxattr %s: %v", p, err)
	}
	var names []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out []string
	for _, name := range names {
		v := make([]byte, 64<<10)
		m, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			t.Fatalf("getxattr %s %s: %v", p, name, err)
		}
		out = append(out, fmt.Sprintf("%s=%q", name, v[:m]))
	}
	return "xattrs[" + strings.Join(out, " ") + "]"
}

func diffStates(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: %s missing", what, k)
		} else if g != w {
			t.Errorf("%s: %s differs:\n  want %s\n  got  %s", what, k, w, g)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: extra entry %s", what, k)
		}
	}
}

// TestXattrACLRoundTrip copies a tree with xattrs and ACLs onto a coopfs
// mount and back with cp -a, rsync -aAX and tar --xattrs --acls, and
// checks that both copies equal the source exactly.
func TestXattrACLRoundTrip(t *testing.T) {
	needFUSE(t)
	for _, tool := range []string{"setfacl", "rsync", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s missing: apt-get install acl rsync tar", tool)
		}
	}
	work := t.TempDir()
	src := filepath.Join(work, "src")
	xattrTree(t, src)
	want := treeState(t, src)
	srv := startServer(t, t.TempDir())
	m := startMount(t, srv.addr)

	tarCopy := func(from, to string) {
		t.Helper()
		flags := []string{"--xattrs", "--xattrs-include=*", "--acls"}
		cmd := exec.Command("sh", "-c", fmt.Sprintf(
			`tar -C "$1" %[1]s -cf - . | tar -C "$2" %[1]s -xpf -`, strings.Join(flags, " ")), "sh", from, to)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tar %s → %s: %v\n%s", from, to, err, out)
		}
	}
	tools := []struct {
		name string
		copy func(from, to string)
	}{
		{"cp -a", func(from, to string) { runCmd(t, time.Minute, "cp", "-a", from+"/.", to+"/") }},
		{"rsync -aAX", func(from, to string) { runCmd(t, time.Minute, "rsync", "-aAX", from+"/", to+"/") }},
		{"tar --xattrs --acls", tarCopy},
	}
	for i, tool := range tools {
		there := m.path(fmt.Sprintf("copy%d", i))
		back := filepath.Join(work, fmt.Sprintf("back%d", i))
		for _, d := range []string{there, back} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		tool.copy(src, there)
		diffStates(t, tool.name+" onto coopfs", want, treeState(t, there))
		tool.copy(there, back)
		diffStates(t, tool.name+" back from coopfs", want, treeState(t, back))
	}
}

// TestACLEnforced checks that the mount's kernel enforces POSIX ACLs: an
// ACL entry opens a 0600 file to one other user and no one else, and a
// default ACL is inherited by a new file.
func TestACLEnforced(t *testing.T) {
	needFUSE(t)
	if _, err := exec.LookPath("setfacl"); err != nil {
		t.Skip("setfacl missing: apt-get install acl")
	}
	export := t.TempDir()
	srv := startServer(t, export)
	m := startMount(t, srv.addr)
	if err := os.Chmod(m.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := m.path("f")
	if err := os.WriteFile(f, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCmd(t, 10*time.Second, "setfacl", "-m", "u:4242:r", f)
	catAs := func(uid uint32) error {
		cmd := exec.Command("cat", f)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := catAs(4242); err != nil {
		t.Errorf("uid 4242, granted by the ACL, cannot read: %v", err)
	}
	if err := catAs(4243); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("uid 4243, not in the ACL, reads the 0600 file: %v", err)
	}
	d := m.path("d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	runCmd(t, 10*time.Second, "setfacl", "-d", "-m", "u:4242:rw", d)
	if err := os.WriteFile(filepath.Join(d, "new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCmd(t, 10*time.Second, "getfacl", "-c", filepath.Join(d, "new"))
	if !strings.Contains(got, "user:4242:rw") {
		t.Errorf("a file made in a directory with a default ACL did not inherit it:\n%s", got)
	}
	// The umask applies where the parent has no default ACL, and a
	// default ACL replaces it, as on a local file system: with umask 022,
	// a 0666 create is 0644 in a plain directory and 0664 (the ACL's
	// mask rw-) in d. Both are made by a shell with its own umask.
	runCmd(t, 10*time.Second, "sh", "-c", `umask 022 && : > "$1/u" && : > "$2/u" && mkdir "$1/ud" "$2/ud"`, "sh", m.dir, d)
	for p, want := range map[string]os.FileMode{
		m.path("u"): 0o644, filepath.Join(d, "u"): 0o664,
		m.path("ud"): 0o755 | os.ModeDir, filepath.Join(d, "ud"): 0o775 | os.ModeDir,
	} {
		st, err := os.Stat(p)
		if err != nil {
			t.Error(err)
			continue
		}
		if st.Mode() != want {
			t.Errorf("%s made with umask 022: mode %v, want %v", p, st.Mode(), want)
		}
	}
}

// TestXattrUnsupportedExport serves an export on ramfs, which has no
// extended attributes: the mount answers EOPNOTSUPP (not ENODATA), and
// cp -a falls back to plain permissions.
func TestXattrUnsupportedExport(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	if err := syscall.Mount("ramfs", export, "ramfs", 0, "mode=0755"); err != nil {
		t.Skipf("cannot mount a ramfs export: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(export, syscall.MNT_DETACH) })
	srv := startServer(t, export)
	m := startMount(t, srv.addr)
	f := m.path("f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(f, "user.x", []byte("1"), 0); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("setxattr on an export without xattrs: %v, want EOPNOTSUPP", err)
	}
	if _, err := unix.Getxattr(f, "user.x", make([]byte, 10)); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("getxattr on an export without xattrs: %v, want EOPNOTSUPP", err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "g"), []byte("g"), 0o640); err != nil {
		t.Fatal(err)
	}
	runCmd(t, time.Minute, "cp", "-a", src+"/.", m.path("tree")+"/")
	if st, err := os.Stat(m.path("tree/g")); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("cp -a onto an export without xattrs: %v %v", st, err)
	}
}
