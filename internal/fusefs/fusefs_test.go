package fusefs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/fusefs/posixtest"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

func TestToErrno(t *testing.T) {
	for _, c := range []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{syscall.ENOENT, syscall.ENOENT},
		{fmt.Errorf("agent: lookup a/b: %w", syscall.ENOTEMPTY), syscall.ENOTEMPTY},
		{&os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, syscall.EACCES},
		{fmt.Errorf("fetch: %w", context.Canceled), syscall.EINTR},
		{fs.ErrNotExist, syscall.ENOENT},
		{fmt.Errorf("x: %w", fs.ErrExist), syscall.EEXIST},
		{fs.ErrPermission, syscall.EACCES},
		{syscall.Errno(0), syscall.EIO},
		{errors.New("server went away"), syscall.EIO},
		{context.DeadlineExceeded, syscall.EIO},
	} {
		if got := ToErrno(c.err); got != c.want {
			t.Errorf("ToErrno(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestSetAttrIn(t *testing.T) {
	var in fuse.SetAttrIn
	in.Valid = fuse.FATTR_MODE | fuse.FATTR_SIZE | fuse.FATTR_MTIME | fuse.FATTR_ATIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_FH
	in.Mode, in.Size = 0o640, 12345
	in.Mtime, in.Mtimensec = 1_000_000_000, 5
	got := setAttrIn(&in)
	want := vfs.SetAttrIn{Valid: wire.SetMode | wire.SetSize | wire.SetMtime | wire.SetAtime | wire.SetAtimeNow,
		Mode: 0o640, Size: 12345, Mtime: 1_000_000_000*1e9 + 5}
	if got != want {
		t.Errorf("setAttrIn = %+v, want %+v", got, want)
	}
}

func TestSplitNanos(t *testing.T) {
	for _, ns := range []int64{0, 1, 1e9, 1e9 + 7, 1_700_000_000_123_456_789, -1, -1e9 - 3} {
		s, n := splitNanos(ns)
		if back := joinNanos(s, n); back != ns || n >= 1e9 {
			t.Errorf("splitNanos(%d) = %d, %d (back %d)", ns, s, n, back)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{AttrTimeout: -1, NegativeTimeout: 3 * time.Second}.withDefaults()
	if c.AttrTimeout != 0 || c.EntryTimeout != time.Second || c.NegativeTimeout != 3*time.Second ||
		c.MaxWrite != 1<<20 || c.ReadAhead != 1<<20 || c.FsName != "coopfs" {
		t.Errorf("withDefaults: %+v", c)
	}
	if err := (Config{MaxWrite: 100}).withDefaults().validate(); err == nil {
		t.Error("MaxWrite 100 accepted")
	}
	o := MountOptions(Config{})
	if o.MaxWrite != 1<<20 || o.MaxReadAhead != 128<<10 || *o.AttrTimeout != time.Second ||
		*o.NegativeTimeout != 0 || !o.NullPermissions || o.Options[0] != "default_permissions" {
		t.Errorf("MountOptions: %+v", o)
	}
}

func TestCheckMountpoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "missing"), "does not exist"},
		{file, "is not a directory"},
		{"/", "already a mount point"},
	} {
		_, err := CheckMountpoint(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckMountpoint(%s) = %v, want a one-line error with %q", c.path, err, c.want)
		}
	}
	if got, err := CheckMountpoint(dir); err != nil || !filepath.IsAbs(got) {
		t.Errorf("CheckMountpoint(%s) = %q, %v", dir, got, err)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescapeMountinfo(`/a\040b\011c\\`); got != "/a b\tc\\\\" && got != "/a b\tc\\" {
		t.Errorf("got %q", got)
	}
}

// requireFuse skips unless FUSE can be mounted here as root.
func requireFuse(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("FUSE mount tests need root (they mount with allow_other and switch users)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("FUSE mount tests need /dev/fuse: " + err.Error())
	}
}

// mountMem mounts a fresh memFS in a temporary directory that other users
// can reach; the mount is removed at the end of the test, even on failure.
func mountMem(t *testing.T, cfg Config) (*memFS, *Mounted) {
	t.Helper()
	mem := newMemFS()
	return mem, mountBackend(t, mem, cfg)
}

// mountBackend mounts b as mountMem does.
func mountBackend(t *testing.T, b Backend, cfg Config) *Mounted {
	t.Helper()
	requireFuse(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := Mount(ctx, dir, b, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		if mounted, _ := IsMountPoint(m.Dir()); mounted {
			t.Errorf("%s still mounted after the test", m.Dir())
		}
	})
	return m
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestPOSIX(t *testing.T) {
	_, m := mountMem(t, Config{})
	posixtest.Run(t, m.Dir())
}

func TestReadAheadRaised(t *testing.T) {
	_, m := mountMem(t, Config{ReadAhead: 2 << 20})
	kb, err := ReadAheadKB(m.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if kb != 2048 {
		t.Errorf("read_ahead_kb %d, want 2048", kb)
	}
}

func TestMountErrors(t *testing.T) {
	_, m := mountMem(t, Config{})
	_, err := Mount(context.Background(), m.Dir(), newMemFS(), Config{}, nil)
	if err == nil || !strings.Contains(err.Error(), "already a mount point") {
		t.Errorf("second mount on %s: %v, want 'already a mount point'", m.Dir(), err)
	}
	_, err = Mount(context.Background(), filepath.Join(m.Dir(), "..", "nonexistent"), newMemFS(), Config{}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("mount on missing dir: %v", err)
	}
}

func TestBackendErrorBecomesEIO(t *testing.T) {
	mem, m := mountMem(t, Config{})
	mem.mu.Lock()
	mem.failLookup["broken"] = errors.New("lost the server")
	mem.failLookup["gone"] = fmt.Errorf("agent: %w", syscall.ESTALE)
	mem.failLookup["interrupted"] = fmt.Errorf("agent: fetch: %w", context.Canceled)
	mem.mu.Unlock()
	var st syscall.Stat_t
	for name, want := range map[string]syscall.Errno{"broken": syscall.EIO, "gone": syscall.ESTALE, "interrupted": syscall.EINTR} {
		err := syscall.Lstat(filepath.Join(m.Dir(), name), &st)
		if !errors.Is(err, want) {
			t.Errorf("stat %s: %v, want %v", name, err, want)
		}
	}
}

func TestHardLinkIsOneInode(t *testing.T) {
	_, m := mountMem(t, Config{})
	a, b := filepath.Join(m.Dir(), "a"), filepath.Join(m.Dir(), "b")
	if err := os.WriteFile(a, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	// A chmod through one name is seen through the other at once: the
	// kernel has one inode for both.
	if err := os.Chmod(b, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(a)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode through the other name: %v, %v", fi.Mode(), err)
	}
}

func TestUnmountOnCancel(t *testing.T) {
	requireFuse(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	m, err := Mount(ctx, dir, newMemFS(), Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unmount() })
	// A process sitting in the mount makes it busy: the lazy fallback
	// must still take the mount away.
	f, err := os.Create(filepath.Join(dir, "held-open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cancel()
	select {
	case <-m.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("serve loop still running 20s after cancel")
	}
	if mounted, _ := IsMountPoint(m.Dir()); mounted {
		t.Errorf("%s still mounted after cancel", m.Dir())
	}
}

func TestUnmountFromOutside(t *testing.T) {
	requireFuse(t)
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		bin, err = exec.LookPath("umount")
	}
	if err != nil {
		t.Skip("neither fusermount3 nor umount found")
	}
	dir := t.TempDir()
	m, err := Mount(context.Background(), dir, newMemFS(), Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unmount() })
	args := []string{dir}
	if filepath.Base(bin) == "fusermount3" {
		args = []string{"-u", dir}
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", bin, args, err, out)
	}
	waited := make(chan struct{})
	go func() { m.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return 20s after an unmount from outside")
	}
	if err := m.Unmount(); err != nil {
		t.Errorf("Unmount after an outside unmount: %v", err)
	}
}

// TestCloseToOpen: a file changed behind the kernel's back (by another
// client) is seen whole at the next open, even within the attribute
// timeout; an unchanged file is served from the kernel page cache.
func TestCloseToOpen(t *testing.T) {
	mem, m := mountMem(t, Config{AttrTimeout: time.Hour, EntryTimeout: time.Hour})
	p := filepath.Join(m.Dir(), "f")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(); got != "old" {
		t.Fatalf("read %q, want old", got)
	}
	// Unchanged: the second open keeps the page cache, no backend read.
	read()
	before := mem.reads.Load()
	if got := read(); got != "old" {
		t.Fatalf("read %q, want old", got)
	}
	if n := mem.reads.Load() - before; n != 0 {
		t.Errorf("re-read of an unchanged file made %d backend reads, want 0 (KEEP_CACHE)", n)
	}
	// Changed elsewhere, longer: the next open sees all of it.
	if err := mem.replace("f", []byte("new and longer")); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "new and longer" {
		t.Errorf("after a change elsewhere, read %q, want %q", got, "new and longer")
	}
	if err := mem.replace("f", []byte("s")); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "s" {
		t.Errorf("after a shrink elsewhere, read %q, want %q", got, "s")
	}
}

// TestDeadMount: when the FUSE connection dies under a mount, the mount
// point says so in one line, and Unmount still removes the dead mount.
func TestDeadMount(t *testing.T) {
	requireFuse(t)
	dir := t.TempDir()
	m, err := Mount(context.Background(), dir, newMemFS(), Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Unmount()
		if mounted, _ := IsMountPoint(dir); mounted {
			t.Errorf("%s still mounted", dir)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	if err := abortConnection(m.dev); err != nil {
		t.Skipf("cannot abort the FUSE connection here: %v", err)
	}
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("serve loop still running 10s after the connection was aborted")
	}
	_, err = CheckMountpoint(dir)
	if err == nil || !strings.Contains(err.Error(), "dead FUSE mount") {
		t.Errorf("CheckMountpoint of a dead mount: %v", err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatalf("Unmount of a dead mount: %v", err)
	}
	if mounted, _ := IsMountPoint(m.Dir()); mounted {
		t.Errorf("dead mount %s not removed", m.Dir())
	}
}

// TestAppendIsOneWrite: a write(2) through an O_APPEND handle reaches the
// backend as one write, whatever page boundaries it crosses (the kernel
// would split it at each page through the page cache, and a server
// appending each piece on its own lets another client's append between
// them), up to MaxWrite.
func TestAppendIsOneWrite(t *testing.T) {
	mem, m := mountMem(t, Config{})
	p := filepath.Join(m.Dir(), "log")
	head := bytes.Repeat([]byte("h"), 4000)
	if err := os.WriteFile(p, head, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := head
	for _, n := range []int{200, 9000, 1 << 20} {
		line := bytes.Repeat([]byte{byte('a' + n%26)}, n)
		before := mem.writes.Load()
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
		if got := mem.writes.Load() - before; got != 1 {
			t.Errorf("an append of %d bytes at %d reached the backend as %d writes, want 1", n, len(want), got)
		}
		want = append(want, line...)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the file holds %d bytes (%v), want the %d written", len(got), err, len(want))
	}
}
