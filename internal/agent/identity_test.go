package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/server/servertest"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

const testUID, testGID = 4242, 4242

// identityCluster serves a fresh export with the given squash mode and
// returns an agent on it. The export holds "secret" (root, 0600), "open"
// (a 0777 directory) and "rootdir" (root, 0755).
func identityCluster(t *testing.T, squash string) (*agent.Agent, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("identity tests need root: the server acts as its callers with setfsuid")
	}
	export := t.TempDir()
	if err := os.WriteFile(filepath.Join(export, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		name string
		mode os.FileMode
	}{{"open", 0o777}, {"rootdir", 0o755}} {
		if err := os.Mkdir(filepath.Join(export, d.name), d.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(export, d.name), d.mode); err != nil {
			t.Fatal(err)
		}
	}
	addr := servertest.Serve(t, server.Config{Export: export, BlockSize: 4096, Squash: squash})
	a, err := agent.New(context.Background(), agent.Config{Server: addr, ReconnectTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, export
}

func as(uid, gid uint32, groups ...uint32) context.Context {
	return vfs.WithCaller(context.Background(), vfs.Caller{UID: uid, GID: gid, Groups: groups})
}

func owner(t *testing.T, p string) (uid, gid uint32, mode uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Gid, st.Mode
}

// The server enforces permissions for the identity a request carries,
// whatever the client's kernel checked: a client that skips its own checks
// (this agent has no kernel in front of it) is still refused.
func TestServerEnforcesPermissions(t *testing.T) {
	a, export := identityCluster(t, server.SquashRoot)
	user := as(testUID, testGID)
	if _, _, err := a.Open(user, "secret", syscall.O_RDONLY); !errors.Is(err, syscall.EACCES) {
		t.Errorf("user opens root's 0600 file: %v, want EACCES", err)
	}
	if _, err := a.Mkdir(user, "rootdir/x", 0o755); !errors.Is(err, syscall.EACCES) {
		t.Errorf("user mkdir in root's 0755 dir: %v, want EACCES", err)
	}
	if _, err := a.SetAttr(user, "secret", nil, vfs.SetAttrIn{Valid: wire.SetMode, Mode: 0o666}); !errors.Is(err, syscall.EPERM) {
		t.Errorf("user chmod of root's file: %v, want EPERM", err)
	}
	// A file the user creates is the user's, whatever Create's fields say.
	f, _, err := a.Create(user, "open/mine", syscall.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Release(user)
	if uid, gid, _ := owner(t, filepath.Join(export, "open/mine")); uid != testUID || gid != testGID {
		t.Errorf("file created by %d:%d is owned by %d:%d", testUID, testGID, uid, gid)
	}
	// Never a set-id file owned by someone else: the user may set its own
	// file's setuid bit, but giving it away fails (and chown clears it).
	if _, err := a.SetAttr(user, "open/mine", nil, vfs.SetAttrIn{Valid: wire.SetMode, Mode: 0o4755}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetAttr(user, "open/mine", nil, vfs.SetAttrIn{Valid: wire.SetUID, UID: 0}); !errors.Is(err, syscall.EPERM) {
		t.Errorf("user chown of its setuid file to root: %v, want EPERM", err)
	}
	// Supplementary groups count: a 0070 directory of group 777 is open to
	// a member only.
	grp := filepath.Join(export, "grp")
	if err := os.Mkdir(grp, 0o070); err != nil {
		t.Fatal(err)
	}
	os.Chmod(grp, 0o070)
	os.Chown(grp, 0, 777)
	if _, err := a.ReadDir(user, "grp"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("non-member lists a 0070 dir: %v, want EACCES", err)
	}
	if _, err := a.ReadDir(as(testUID, testGID, 777), "grp"); err != nil {
		t.Errorf("member (supplementary group) lists a 0070 dir: %v", err)
	}
	// trusted.* xattrs need CAP_SYS_ADMIN, which a user never has on the server.
	if err := a.SetXattr(user, "open/mine", "trusted.x", []byte("1"), 0, 0, 0); !errors.Is(err, syscall.EPERM) {
		t.Errorf("user sets trusted.x: %v, want EPERM", err)
	}
	if err := a.SetXattr(user, "open/mine", "user.x", []byte("1"), 0, 0, 0); err != nil {
		t.Errorf("user sets user.x on its file: %v", err)
	}
}

// Root squash: a client's root acts as the anonymous user (65534).
func TestRootSquash(t *testing.T) {
	a, export := identityCluster(t, server.SquashRoot)
	root := as(0, 0, 0)
	if _, _, err := a.Open(root, "secret", syscall.O_RDONLY); !errors.Is(err, syscall.EACCES) {
		t.Errorf("squashed root opens root's 0600 file: %v, want EACCES", err)
	}
	if _, err := a.Mkdir(root, "rootdir/x", 0o755); !errors.Is(err, syscall.EACCES) {
		t.Errorf("squashed root mkdir in root's 0755 dir: %v, want EACCES", err)
	}
	if _, err := a.Mkdir(root, "open/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if uid, gid, _ := owner(t, filepath.Join(export, "open/d")); uid != server.DefaultAnonID || gid != server.DefaultAnonID {
		t.Errorf("dir made by squashed root is owned by %d:%d, want 65534:65534", uid, gid)
	}
	if err := a.SetXattr(root, "open/d", "trusted.x", []byte("1"), 0, 0, 0); !errors.Is(err, syscall.EPERM) {
		t.Errorf("squashed root sets trusted.x: %v, want EPERM", err)
	}
	// A request without an identity is the anonymous user's too.
	if _, _, err := a.Open(context.Background(), "secret", syscall.O_RDONLY); !errors.Is(err, syscall.EACCES) {
		t.Errorf("request without identity opens root's 0600 file: %v, want EACCES", err)
	}
	// Other users keep their identity.
	if _, err := a.Mkdir(as(testUID, testGID), "open/u", 0o755); err != nil {
		t.Fatal(err)
	}
	if uid, _, _ := owner(t, filepath.Join(export, "open/u")); uid != testUID {
		t.Errorf("dir made by uid %d under root squash is owned by %d", testUID, uid)
	}
}

func TestSquashAllAndNone(t *testing.T) {
	all, export := identityCluster(t, server.SquashAll)
	if _, err := all.Mkdir(as(testUID, testGID), "open/u", 0o755); err != nil {
		t.Fatal(err)
	}
	if uid, _, _ := owner(t, filepath.Join(export, "open/u")); uid != server.DefaultAnonID {
		t.Errorf("squash all: dir owned by %d, want 65534", uid)
	}
	none, export := identityCluster(t, server.SquashNone)
	root := as(0, 0, 0)
	if _, _, err := none.Open(root, "secret", syscall.O_RDONLY); err != nil {
		t.Errorf("squash none: root opens its file: %v", err)
	}
	if _, err := none.Mkdir(root, "rootdir/x", 0o755); err != nil {
		t.Fatal(err)
	}
	if uid, _, _ := owner(t, filepath.Join(export, "rootdir/x")); uid != 0 {
		t.Errorf("squash none: dir made by root owned by %d", uid)
	}
	if err := none.SetXattr(root, "rootdir/x", "trusted.x", []byte("1"), 0, 0, 0); err != nil {
		t.Errorf("squash none: root sets trusted.x: %v", err)
	}
	// Root's requests run on the server's own credentials without a
	// switch (identity.go ownIdentity); a user's after them still switch.
	for range 3 {
		if _, _, err := none.Open(as(testUID, testGID), "secret", syscall.O_RDONLY); !errors.Is(err, syscall.EACCES) {
			t.Errorf("squash none: user opens root's 0600 file after root's requests: %v, want EACCES", err)
		}
		if _, _, err := none.Open(root, "secret", syscall.O_RDONLY); err != nil {
			t.Errorf("squash none: root opens its file after a user's request: %v", err)
		}
	}
}

// A user who may write to a set-id file it does not own may clear its
// set-id bits (the chmod a mount's kernel sends before such a write), and
// nothing else; a user who may not write to it may not.
func TestKillPrivOnWrite(t *testing.T) {
	a, export := identityCluster(t, server.SquashRoot)
	for name, mode := range map[string]os.FileMode{"open/w": 0o777, "open/r": 0o755} {
		p := filepath.Join(export, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(p, uint32(mode)|syscall.S_ISUID|syscall.S_ISGID); err != nil {
			t.Fatal(err)
		}
	}
	user := as(testUID, testGID)
	if _, err := a.SetAttr(user, "open/w", nil, vfs.SetAttrIn{Valid: wire.SetMode, Mode: 0o777}); err != nil {
		t.Errorf("writer clears set-id bits of a file it may write: %v", err)
	}
	if _, _, mode := owner(t, filepath.Join(export, "open/w")); mode&07777 != 0o777 {
		t.Errorf("mode after clearing = %o, want 777", mode&07777)
	}
	if _, err := a.SetAttr(user, "open/w", nil, vfs.SetAttrIn{Valid: wire.SetMode, Mode: 0o700}); !errors.Is(err, syscall.EPERM) {
		t.Errorf("non-owner changes other mode bits: %v, want EPERM", err)
	}
	if _, err := a.SetAttr(user, "open/r", nil, vfs.SetAttrIn{Valid: wire.SetMode, Mode: 0o755}); !errors.Is(err, syscall.EPERM) {
		t.Errorf("non-writer clears set-id bits: %v, want EPERM", err)
	}
}

// Xattrs on the export root and on a symlink itself (not its target).
func TestXattrRootAndSymlink(t *testing.T) {
	a, export := identityCluster(t, server.SquashNone)
	root := as(0, 0)
	if err := a.SetXattr(root, "", "user.r", []byte("root"), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	v, n, err := a.GetXattr(root, "", "user.r", 100)
	if err != nil || string(v) != "root" || n != 4 {
		t.Errorf("root xattr = %q %d %v", v, n, err)
	}
	if _, n, err := a.GetXattr(root, "", "user.r", 0); err != nil || n != 4 {
		t.Errorf("size of root xattr = %d %v, want 4", n, err)
	}
	if _, _, err := a.GetXattr(root, "", "user.r", 2); !errors.Is(err, syscall.ERANGE) {
		t.Errorf("xattr into a short buffer: %v, want ERANGE", err)
	}
	if _, _, err := a.GetXattr(root, "", "user.none", 10); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("missing xattr: %v, want ENODATA", err)
	}
	if err := os.Symlink("secret", filepath.Join(export, "ln")); err != nil {
		t.Fatal(err)
	}
	// user.* xattrs are not allowed on symlinks: the link itself is
	// addressed, not its target.
	if err := a.SetXattr(root, "ln", "user.x", []byte("1"), 0, 0, 0); !errors.Is(err, syscall.EPERM) {
		t.Errorf("user xattr on a symlink: %v, want EPERM (the link, not its target)", err)
	}
	if err := a.SetXattr(root, "ln", "trusted.x", []byte("1"), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	names, _, err := a.ListXattr(root, "ln", 1000)
	if err != nil || string(names) != "trusted.x\x00" {
		t.Errorf("symlink's xattrs = %q %v", names, err)
	}
	if err := a.RemoveXattr(root, "ln", "trusted.x", 0, 0); err != nil {
		t.Error(err)
	}
	if err := a.RemoveXattr(root, "", "../x", 0, 0); err == nil {
		t.Error("remove an xattr of a path outside the export: no error")
	}
}

// A file's generation does not depend on who looks it up (the export's
// ancestors may be closed to the caller: t.TempDir is 0700 root).
func TestGenerationSameForEveryCaller(t *testing.T) {
	a, _ := identityCluster(t, server.SquashNone)
	r, err := a.Lookup(as(0, 0), "open")
	if err != nil {
		t.Fatal(err)
	}
	u, err := a.Lookup(as(testUID, testGID), "open")
	if err != nil {
		t.Fatal(err)
	}
	if r.Gen != u.Gen || r.Gen == 0 {
		t.Errorf("generation of one directory: %d for root, %d for uid %d", r.Gen, u.Gen, testUID)
	}
}

// A listing with attributes is made as the caller: its owner gets every
// entry with its attributes, a caller who may not read it nothing.
func TestReadDirPlusAsTheCaller(t *testing.T) {
	a, export := identityCluster(t, server.SquashRoot)
	user := as(testUID, testGID)
	dir := filepath.Join(export, "noexec")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "f"), []byte("abc"), 0o644)
	os.Chown(dir, testUID, testGID)
	os.Chown(filepath.Join(dir, "f"), testUID, testGID)
	ents, err := a.ReadDirPlus(user, "noexec")
	if err != nil || len(ents) != 1 || !ents[0].HasAttr || ents[0].Attr.Size != 3 || ents[0].Attr.UID != testUID {
		t.Fatalf("owner lists its directory: %+v, %v", ents, err)
	}
	// (A directory the caller may read but not search fails as a whole,
	// ReadDir as ReadDirPlus: the server's open of it stats it by name.)
	os.Chown(dir, 0, 0)
	os.Chmod(dir, 0o711)
	if _, err := a.ReadDirPlus(user, "noexec"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("user lists a 0711 dir of root: %v, want EACCES", err)
	}
}
