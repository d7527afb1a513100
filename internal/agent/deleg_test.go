package agent_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// A caller the kernel would send: its umask is known (a create may then be
// answered here, agent/newfile.go).
var maker = vfs.Caller{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Umask: 0o022, HasUmask: true}

func asMaker() context.Context { return vfs.WithCaller(context.Background(), maker) }

// metricAgent is an agent whose sent messages are counted.
type metricAgent struct {
	*agent.Agent
	m *obs.Metrics
}

func newMetricAgent(t *testing.T, addr string) metricAgent {
	t.Helper()
	m := obs.NewMetrics()
	a, err := agent.New(context.Background(), agent.Config{Server: addr, Metrics: m, CacheSize: 64 << 20, ReconnectTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	// The kernel looks the mount's root up first: its callback is what the
	// directories made in it hang from.
	if _, err := a.GetAttr(asRoot(), ""); err != nil {
		t.Fatal(err)
	}
	return metricAgent{a, m}
}

func (ma metricAgent) sent(t *testing.T, typ string) float64 {
	t.Helper()
	return scrape(t, ma.m).Sum(obs.MetricMessages, map[string]string{"dir": obs.DirOut, "type": typ})
}

// create makes path through a, writes data and closes it, as a program
// would (the close sends what the file held).
func create(t *testing.T, a *agent.Agent, path string, flags uint32, data []byte) wire.Attr {
	t.Helper()
	ctx := asMaker()
	f, at, err := a.Create(ctx, path, syscall.O_WRONLY|syscall.O_CREAT|flags, 0o666)
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("close %s: %v", path, err)
	}
	f.Release(ctx)
	return at
}

// delegPair starts a server and two clients, the first counted, which
// has made directory d (its delegation is asked for then).
func delegPair(t *testing.T) (string, metricAgent, *agent.Agent) {
	t.Helper()
	export := t.TempDir()
	c := startServer(t, export, "127.0.0.1:0", nil, 0)
	a := newMetricAgent(t, c.addr)
	b := newAgent(t, c.addr, nil)
	if _, err := a.Mkdir(asMaker(), "d", 0o777); err != nil {
		t.Fatal(err)
	}
	return export, a, b
}

// inoOf is the export's inode number of path.
func inoOf(t *testing.T, export, path string) uint64 {
	t.Helper()
	st, err := os.Lstat(filepath.Join(export, path))
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// TestCreatesAnsweredHere: files created in a directory this client made
// are answered here, into files the server reserved — the inode number the
// create hands out is the file's for good, the mode is the one asked less
// the umask — and each costs one message, its CommitNew at close. An
// exclusive create of a name that exists fails as usual; another client
// sees every file, and its exclusive create of a name created here and
// not yet closed fails with EEXIST (the server recalls the delegation,
// which sends the file first).
func TestCreatesAnsweredHere(t *testing.T) {
	export, a, b := delegPair(t)
	ctx := asMaker()
	const n = 20
	inos := make([]uint64, n)
	for i := range n {
		at := create(t, a.Agent, fmt.Sprintf("d/f%d", i), syscall.O_EXCL, pattern(1000+i, byte(i)))
		inos[i] = at.Ino
		if at.Mode != syscall.S_IFREG|0o644 {
			t.Errorf("f%d created with mode %o, want %o", i, at.Mode, syscall.S_IFREG|0o644)
		}
	}
	creates, commits := a.sent(t, "Create"), a.sent(t, "CommitNew")
	t.Logf("%d files: Create %v, CommitNew %v, Commit %v, DirDelegate %v", n, creates, commits, a.sent(t, "Commit"), a.sent(t, "DirDelegate"))
	// The first creates may go to the server while the delegation is on
	// its way (the machine's load decides how many).
	if creates > n/2 || commits < n/2 || creates+commits > n {
		t.Errorf("%d files made in a directory made here sent %v Create and %v CommitNew: want mostly CommitNew, one message per file", n, creates, commits)
	}
	for i := range n {
		p := fmt.Sprintf("d/f%d", i)
		if got := inoOf(t, export, p); got != inos[i] {
			t.Errorf("%s: the create handed out inode %d, the export has %d", p, inos[i], got)
		}
		if data, err := os.ReadFile(filepath.Join(export, p)); err != nil || !bytes.Equal(data, pattern(1000+i, byte(i))) {
			t.Errorf("%s in the export: %d bytes, %v", p, len(data), err)
		}
		if st, err := os.Stat(filepath.Join(export, p)); err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s in the export: %v, %v; want mode 0644", p, st.Mode(), err)
		}
	}
	if _, _, err := a.Create(ctx, "d/f0", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o644); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("exclusive create of a name that exists: %v, want EEXIST", err)
	}
	if got, _ := readFile(t, b, "d/f7"); !bytes.Equal(got, pattern(1007, 7)) {
		t.Errorf("another client reads d/f7: %d bytes", len(got))
	}

	// A file created here and still open: another client's exclusive
	// create of its name recalls the delegation, which sends it first.
	f, at, err := a.Create(ctx, "d/open", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, []byte("mine"), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Create(asRoot(), "d/open", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o600); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("another client's exclusive create of a name created here: %v, want EEXIST", err)
	}
	if got := inoOf(t, export, "d/open"); got != at.Ino {
		t.Errorf("d/open: inode %d handed out, %d in the export", at.Ino, got)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	if data, err := os.ReadFile(filepath.Join(export, "d/open")); err != nil || string(data) != "mine" {
		t.Errorf("d/open in the export: %q, %v", data, err)
	}
}

// TestCreatedHereThenLinkedAndRenamed: a file created here and not yet
// closed is sent before a link or rename of it, under its inode number.
func TestCreatedHereThenLinkedAndRenamed(t *testing.T) {
	export, a, _ := delegPair(t)
	ctx := asMaker()
	create(t, a.Agent, "d/first", 0, []byte("1")) // the delegation is there by now
	f, at, err := a.Create(ctx, "d/x", syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Link(ctx, "d/x", "d/y", 0, 0); err != nil {
		t.Fatalf("link of a file created here, open: %v", err)
	}
	if err := a.Rename(ctx, "d/x", "d/z", 0); err != nil {
		t.Fatalf("rename of a file created here, open: %v", err)
	}
	if _, err := f.WriteAt(ctx, []byte("more"), 4); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	for _, p := range []string{"d/y", "d/z"} {
		if got := inoOf(t, export, p); got != at.Ino {
			t.Errorf("%s: inode %d, the create handed out %d", p, got, at.Ino)
		}
		if data, err := os.ReadFile(filepath.Join(export, p)); err != nil || string(data) != "datamore" {
			t.Errorf("%s: %q, %v", p, data, err)
		}
	}
}

// TestRemovalsAnsweredHere: once the directory's delegation is held,
// unlinks of files the client knows are answered here and sent in batches;
// the rmdir of the directory waits for them. Another client that looks
// at a removed name meanwhile gets ENOENT (the server recalls the
// delegation first).
func TestRemovalsAnsweredHere(t *testing.T) {
	export, a, b := delegPair(t)
	ctx := asMaker()
	const n = 30
	for i := range n {
		create(t, a.Agent, fmt.Sprintf("d/f%d", i), 0, []byte("x"))
	}
	if _, err := a.ReadDirPlus(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	unlinks := a.sent(t, "Unlink")
	for i := range n {
		if err := a.Unlink(ctx, fmt.Sprintf("d/f%d", i)); err != nil {
			t.Fatal(err)
		}
		if i == n/2 {
			if _, err := b.Lookup(asRoot(), "d/f3"); !errors.Is(err, syscall.ENOENT) {
				t.Errorf("another client's lookup of a name removed here: %v, want ENOENT", err)
			}
		}
	}
	if err := a.Rmdir(ctx, "d"); err != nil {
		t.Fatalf("rmdir after the removals answered here: %v", err)
	}
	sent := a.sent(t, "Unlink") - unlinks
	t.Logf("%d unlinks: Unlink %v, EntryBatch %v, Rmdir %v", n, sent, a.sent(t, "EntryBatch"), a.sent(t, "Rmdir"))
	if sent > n/2 {
		t.Errorf("%d unlinks in a delegated directory sent %v Unlink messages: want few (before the delegation)", n, sent)
	}
	if _, err := os.Stat(filepath.Join(export, "d")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("d after rmdir: %v", err)
	}
}

// TestRemovalFailureReachesRmdir: a removal answered here that the server
// then refuses (the name became a directory, made directly in the export)
// is not dropped: the rmdir of its directory fails with it.
func TestRemovalFailureReachesRmdir(t *testing.T) {
	export := t.TempDir()
	c := startServer(t, export, "127.0.0.1:0", nil, 0)
	a := newMetricAgent(t, c.addr)
	agent.SetDeferDelay(a.Agent, time.Minute) // sent by the rmdir, or the break of the direct change
	ctx := asMaker()
	if _, err := a.Mkdir(ctx, "d", 0o777); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		create(t, a.Agent, fmt.Sprintf("d/f%d", i), 0, []byte("x"))
	}
	for i := range 5 {
		if err := a.Unlink(ctx, fmt.Sprintf("d/f%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if a.sent(t, "Unlink") > 1 {
		t.Skip("the removals were not answered here (no delegation in time)")
	}
	// f3 becomes a directory in one step (a removal then a mkdir could be
	// seen in between: the unlink would find the name gone, which is no
	// failure).
	other := filepath.Join(export, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, other, unix.AT_FDCWD, filepath.Join(export, "d/f3"), unix.RENAME_EXCHANGE); err != nil {
		t.Skipf("renameat2 RENAME_EXCHANGE: %v", err)
	}
	err := a.Rmdir(ctx, "d")
	if !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("rmdir of a directory whose removal answered here failed on the server: %v, want that failure (EISDIR)", err)
	}
	for _, i := range []int{0, 1, 2, 4} {
		if _, err := os.Lstat(filepath.Join(export, fmt.Sprintf("d/f%d", i))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("d/f%d: %v, want removed", i, err)
		}
	}
}

// TestOpenAheadAlongAListing: a program opening a directory's files in the
// order of its listing (grep -r) has the next ones read ahead: every file
// is fetched once (one OpenRead each, no duplicate), most opens find their
// file whole in the cache and send nothing, and every byte is right.
func TestOpenAheadAlongAListing(t *testing.T) {
	export := t.TempDir()
	const n = 40
	os.Mkdir(filepath.Join(export, "d"), 0o755)
	for i := range n {
		os.WriteFile(filepath.Join(export, fmt.Sprintf("d/f%02d", i)), pattern(500+i, byte(i)), 0o644)
	}
	c := startServer(t, export, "127.0.0.1:0", nil, 0)
	a := newMetricAgent(t, c.addr)
	ctx := asRoot()
	if _, err := a.Lookup(ctx, "d"); err != nil { // as the kernel does before it lists d
		t.Fatal(err)
	}
	ents, err := a.ReadDirPlus(ctx, "d")
	if err != nil || len(ents) != n {
		t.Fatalf("listing: %d entries, %v", len(ents), err)
	}
	for _, e := range ents {
		var i int
		fmt.Sscanf(e.Name, "f%02d", &i)
		if got, _ := readFile(t, a.Agent, "d/"+e.Name); !bytes.Equal(got, pattern(500+i, byte(i))) {
			t.Fatalf("%s: %d bytes, not as written", e.Name, len(got))
		}
	}
	opens := a.sent(t, "OpenRead")
	hits := scrape(t, a.m).Sum("coopfs_callback_cache_hits_total", nil)
	t.Logf("%d files read in listing order: %v OpenRead, %v cache hits", n, opens, hits)
	if opens != n {
		t.Errorf("%v OpenRead for %d files: want one each", opens, n)
	}
	if hits < n/2 {
		t.Errorf("%v opens answered from the cache of %d: want most (read ahead)", hits, n)
	}
}

// TestDirectChangeInDelegatedDir: a file made directly in the export, in a
// directory whose delegation this client holds and whose every entry it
// knows (it made the directory), is noticed: the server's watch breaks the
// delegation, the client's lookup then finds the file (not the absence its
// listing promised), and its exclusive create of that name fails with
// EEXIST instead of being answered here. Creates of other names go on.
func TestDirectChangeInDelegatedDir(t *testing.T) {
	export, a, _ := delegPair(t)
	ctx := asMaker()
	create(t, a.Agent, "d/mine0", syscall.O_EXCL, []byte("0"))
	create(t, a.Agent, "d/mine1", syscall.O_EXCL, []byte("1"))
	if a.sent(t, "CommitNew") == 0 {
		t.Skip("no create was answered here (no delegation in time)")
	}
	if _, err := a.Lookup(ctx, "d/direct"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of a name nobody made: %v, want ENOENT", err)
	}
	if err := os.WriteFile(filepath.Join(export, "d/direct"), []byte("made in the export"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The watch's break reaches the client a round trip after the event;
	// a lookup answered before it still says ENOENT.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := a.Lookup(ctx, "d/direct")
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENOENT) || time.Now().After(deadline) {
			t.Fatalf("lookup of a file made directly in the delegated directory: %v (10 s after it was made)", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, _, err := a.Create(ctx, "d/direct", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o644); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("exclusive create of the name made in the export: %v, want EEXIST", err)
	}
	if data, err := os.ReadFile(filepath.Join(export, "d/direct")); err != nil || string(data) != "made in the export" {
		t.Errorf("d/direct in the export: %q, %v", data, err)
	}
	create(t, a.Agent, "d/mine2", syscall.O_EXCL, []byte("2"))
	for i := range 3 {
		p := fmt.Sprintf("d/mine%d", i)
		if data, err := os.ReadFile(filepath.Join(export, p)); err != nil || string(data) != fmt.Sprint(i) {
			t.Errorf("%s in the export: %q, %v", p, data, err)
		}
	}
}

// defaultACL is the system.posix_acl_default value of user::rwx, user
// uid:rw-, group::r-x, mask::rwx, other::r-x.
func defaultACL(uid uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2) // POSIX_ACL_XATTR_VERSION
	entry := func(tag, perm uint16, id uint32) {
		b = binary.LittleEndian.AppendUint16(b, tag)
		b = binary.LittleEndian.AppendUint16(b, perm)
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	const undefined = ^uint32(0)
	entry(0x01, 7, undefined) // ACL_USER_OBJ
	entry(0x02, 6, uid)       // ACL_USER
	entry(0x04, 5, undefined) // ACL_GROUP_OBJ
	entry(0x10, 7, undefined) // ACL_MASK
	entry(0x20, 5, undefined) // ACL_OTHER
	return b
}

// TestACLChangeDropsDelegationInFlight: a directory made here is asked
// for its delegation at once; a default ACL set on it right after must win
// over a verdict the server gave before the ACL (a create answered under
// it would neither inherit the ACL nor get the ACL's mode). Every file made
// in such a directory inherits the ACL.
func TestACLChangeDropsDelegationInFlight(t *testing.T) {
	export := t.TempDir()
	c := startServer(t, export, "127.0.0.1:0", nil, 0)
	a := newMetricAgent(t, c.addr)
	ctx := asMaker()
	for i := range 20 {
		d := fmt.Sprintf("d%d", i)
		if _, err := a.Mkdir(ctx, d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := a.SetXattr(asRoot(), d, "system.posix_acl_default", defaultACL(4242), 0, 0, 0); err != nil {
			if errors.Is(err, syscall.EOPNOTSUPP) {
				t.Skip("the export's file system has no ACLs")
			}
			t.Fatal(err)
		}
		for j := range 3 {
			p := fmt.Sprintf("%s/f%d", d, j)
			create(t, a.Agent, p, syscall.O_EXCL, []byte("x"))
			if n, err := unix.Getxattr(filepath.Join(export, p), "system.posix_acl_access", nil); err != nil || n <= 0 {
				t.Errorf("%s made in a directory with a default ACL did not inherit it: %v", p, err)
			}
		}
	}
	t.Logf("Create %v, CommitNew %v, DirDelegate %v", a.sent(t, "Create"), a.sent(t, "CommitNew"), a.sent(t, "DirDelegate"))
}
