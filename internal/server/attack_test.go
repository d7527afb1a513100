package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/wire"
)

// Attacks by a member: a process that holds the cluster secret, speaks the
// protocol itself and claims only non-root uids, against a server running
// as root with the defaults (--squash root, TLS with the secret).

const (
	attackerUID = 1000 // the member's claimed user
	otherUID    = 1001 // a second user colluding with it
)

var attackSecret = []byte("the cluster secret every member holds")

// attackServer runs a server as root with --squash root, TLS and the secret.
func attackServer(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the attacks are on a server running as root")
	}
	cfg.Squash = SquashRoot
	cfg.Secret = attackSecret
	return testServer(t, cfg)
}

// member dials the server with the secret, as a client named name.
func member(t *testing.T, addr, name string, hello wire.Hello) (*wire.Conn, *wire.Handshake) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hello.Role, hello.Name = wire.RoleClient, name
	hs, err := wire.ClientHandshake(context.Background(), nc, wire.MustSecurity(wire.SecurityConfig{Secret: attackSecret}), "", hello)
	if err != nil {
		t.Fatal(err)
	}
	c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{})
	t.Cleanup(func() { c.Close() })
	return c, hs
}

// asUser sends m as uid (its own group), as a mount's user would.
func asUser(c *wire.Conn, uid uint32, m wire.Msg) (wire.Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if needsIdentity(m) {
		m = &wire.As{UID: uid, GID: uid, Msg: m}
	}
	return c.Call(ctx, m)
}

func modeOf(t *testing.T, p string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

func mustChown(t *testing.T, p string, uid, gid int, mode os.FileMode) {
	t.Helper()
	if err := os.Lchown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
	if mode != 0 {
		if err := syscall.Chmod(p, uint32(mode)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAttackChmodRaceSetsSetuid: the member asks to clear only S_ISGID of
// a 6777 file of another user (the chmod a mount sends before a non-owner's
// write), while the other user swaps that name with a symlink to a
// root-owned 0755 file (RENAME_EXCHANGE). The server used to check the
// name with Lstat and then chmod the name as root: the symlink's target
// became 4777. Bounded: 3000 attempts or 20 s.
func TestAttackChmodRaceSetsSetuid(t *testing.T) {
	export := t.TempDir()
	_, addr := attackServer(t, Config{Export: export})
	d := filepath.Join(export, "d")
	os.Mkdir(d, 0o777)
	mustChown(t, d, otherUID, otherUID, 0o777)
	target := filepath.Join(export, "target")
	os.WriteFile(target, []byte("#!/bin/sh\n"), 0o755)
	f, l := filepath.Join(d, "f"), filepath.Join(d, "l")
	os.WriteFile(f, nil, 0o600)
	mustChown(t, f, otherUID, otherUID, 0o6777)
	if err := os.Symlink("../target", l); err != nil {
		t.Fatal(err)
	}
	c, _ := member(t, addr, "attacker", wire.Hello{BootID: 1})
	dir, err := os.Open(d) // the swapper works beneath d: the export's parent is closed to it
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	file, err := os.Open(f) // the decoy's mode is put back through it, whatever its name
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()

	stop := make(chan struct{})
	swapped := make(chan error, 1)
	go func() { // the second user, swapping the names
		runtime.LockOSThread() // setfsuid is per thread; the thread ends with the goroutine
		unix.Setfsgid(otherUID)
		unix.Setfsuid(otherUID)
		for {
			select {
			case <-stop:
				swapped <- nil
				return
			default:
			}
			if err := unix.Renameat2(int(dir.Fd()), "f", int(dir.Fd()), "l", unix.RENAME_EXCHANGE); err != nil {
				swapped <- err
				return
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-swapped; err != nil {
			t.Errorf("the second user's RENAME_EXCHANGE: %v", err)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 3000 && time.Now().Before(deadline); i++ {
		file.Chmod(0o6777 | os.ModeSetuid | os.ModeSetgid)
		for _, name := range []string{"d/f", "d/l"} {
			asUser(c, attackerUID, &wire.SetAttr{Path: name, Valid: wire.SetMode, Mode: 0o4777})
		}
		if m := modeOf(t, target); m != 0o755 {
			t.Fatalf("after %d attempts the root-owned 0755 file is %o", i+1, m)
		}
	}
}

// TestAttackWriteKeepsSetuid: a write by uid 1000 through the protocol to
// a root-owned, group-writable set-id file keeps its set-id bits (the
// server wrote as root, which holds CAP_FSETID); the same write on the
// export by uid 1000 clears them. Each of Write, WriteSeq and WriteBase.
func TestAttackWriteKeepsSetuid(t *testing.T) {
	export := t.TempDir()
	_, addr := attackServer(t, Config{Export: export})
	c, _ := member(t, addr, "attacker", wire.Hello{BootID: 1})
	var seq uint64
	writes := map[string]func(h uint64) wire.Msg{
		"Write":     func(h uint64) wire.Msg { return &wire.Write{Handle: h, Data: []byte("evil")} },
		"WriteSeq":  func(h uint64) wire.Msg { seq++; return &wire.WriteSeq{Seq: seq, Handle: h, Data: []byte("evil")} },
		"WriteBase": func(h uint64) wire.Msg { seq++; return &wire.WriteBase{Seq: seq, Handle: h, Data: []byte("evil")} },
	}
	for name, write := range writes {
		for _, tc := range []struct{ mode, want uint32 }{
			{0o4775, 0o775},  // S_ISUID always goes
			{0o6775, 0o775},  // S_ISGID with group execute goes too
			{0o2764, 0o2764}, // S_ISGID without group execute, writer in the group: stays
		} {
			p := filepath.Join(export, name)
			os.WriteFile(p, []byte("root's program"), 0o600)
			mustChown(t, p, 0, attackerUID, os.FileMode(tc.mode))
			r, err := asUser(c, attackerUID, &wire.Open{Path: name, Flags: syscall.O_WRONLY})
			if err != nil {
				t.Fatalf("%s: open for writing as a group member: %v", name, err)
			}
			h := r.(*wire.OpenReply).Handle
			if _, err := asUser(c, attackerUID, write(h)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			asUser(c, attackerUID, &wire.Release{Handle: h})
			if m := modeOf(t, p); m != tc.want {
				t.Errorf("%s by uid %d to a root-owned %o file: mode %o, want %o", name, attackerUID, tc.mode, m, tc.want)
			}
		}
	}
}

// TestRunAsPanicRestoresCredentials: a panic while acting as a caller
// (serveMsg recovers it and the goroutine serves on) leaves the thread
// with the server's credentials.
func TestRunAsPanicRestoresCredentials(t *testing.T) {
	s, _ := attackServer(t, Config{})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	func() {
		defer func() { recover() }()
		s.runAs(nil, identity{uid: attackerUID, gid: attackerUID}, func() (wire.Msg, error) { panic("in the middle of a request") })
	}()
	if uid, _ := unix.SetfsuidRetUid(-1); uid != 0 {
		unix.Setfsuid(0)
		t.Fatalf("after a panic in runAs the thread acts as uid %d", uid)
	}
}

// TestAttackReplyCacheTakeover: a member that claims a victim's boot id
// (hints broadcast boot ids; they are start times) and sends writes with
// sequence numbers 1-5 used to fill the reply cache under the victim's
// name: the victim's next writes were acknowledged from it and never
// applied. The cache is keyed by the session the server issued to each
// connection; a made-up session id is not resumed.
func TestAttackReplyCacheTakeover(t *testing.T) {
	export := t.TempDir()
	_, addr := attackServer(t, Config{Export: export})
	for _, name := range []string{"victim", "mine"} {
		p := filepath.Join(export, name)
		os.WriteFile(p, []byte("........"), 0o666)
		os.Chmod(p, 0o666)
	}
	const victimBoot = 1765000000000000000
	victim, vhs := member(t, addr, "victim", wire.Hello{BootID: victimBoot})
	forged := make([]byte, wire.SessionIDSize)
	copy(forged, "a session id the attacker made up")
	attacker, ahs := member(t, addr, "attacker", wire.Hello{BootID: victimBoot, Session: forged})
	if string(ahs.Welcome.Session) == string(forged) || string(ahs.Welcome.Session) == string(vhs.Welcome.Session) {
		t.Fatal("the server resumed a session id the attacker chose")
	}
	r, err := asUser(attacker, attackerUID, &wire.Open{Path: "mine", Flags: syscall.O_WRONLY})
	if err != nil {
		t.Fatal(err)
	}
	ah := r.(*wire.OpenReply).Handle
	for seq := uint64(1); seq <= 5; seq++ {
		if _, err := asUser(attacker, attackerUID, &wire.WriteSeq{Seq: seq, Handle: ah, Data: []byte("A")}); err != nil {
			t.Fatal(err)
		}
	}
	r, err = asUser(victim, otherUID, &wire.Open{Path: "victim", Flags: syscall.O_WRONLY})
	if err != nil {
		t.Fatal(err)
	}
	vh := r.(*wire.OpenReply).Handle
	if _, err := asUser(victim, otherUID, &wire.WriteSeq{Seq: 3, Handle: vh, Data: []byte("VICTIM")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(export, "victim")); string(got) != "VICTIM.." {
		t.Errorf("the victim's acknowledged write: the file holds %q, want %q", got, "VICTIM..")
	}
}

// TestAttackDelegationBlocksOpens: a member registered for callbacks asks
// for write delegations on files it may not write — a root-owned 0644
// file, a root-only 0600 one, an inode number that names nothing — and
// hangs up. The server used to grant them all: every open of the files
// then waited out the recall timeout and failed with EIO, until the server
// restarted.
func TestAttackDelegationBlocksOpens(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "shared"), []byte("data"), 0o644)
	os.WriteFile(filepath.Join(export, "secret"), []byte("root's"), 0o600)
	_, addr := attackServer(t, Config{Export: export, RecallTimeout: 2 * time.Second})
	attacker, _ := member(t, addr, "attacker", wire.Hello{BootID: 1})
	if _, err := asUser(attacker, attackerUID, &wire.CallbackRegister{}); err != nil {
		t.Fatal(err)
	}
	inos := map[string]uint64{"nothing": 1 << 40}
	for _, name := range []string{"shared", "secret"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(export, name), &st); err != nil {
			t.Fatal(err)
		}
		inos[name] = st.Ino
	}
	granted := 0
	for name, ino := range inos {
		for _, path := range []string{"", name} {
			if _, err := asUser(attacker, attackerUID, &wire.DelegateWrite{Ino: ino, Path: path}); err == nil {
				t.Errorf("write delegation of %s (path %q) granted to uid %d", name, path, attackerUID)
				granted++
			}
		}
	}
	attacker.Close()
	reader, _ := member(t, addr, "reader", wire.Hello{BootID: 2})
	if granted > 0 {
		time.Sleep(100 * time.Millisecond) // the server sees the attacker go
	}
	if _, err := asUser(reader, otherUID, &wire.Open{Path: "shared", Flags: syscall.O_RDONLY}); err != nil {
		t.Errorf("open of a 0644 file by uid %d after the member left: %v", otherUID, err)
	}
	// Root is squashed: the root-only file is refused, at once.
	if _, err := asUser(reader, 0, &wire.Open{Path: "secret", Flags: syscall.O_RDONLY}); !errors.Is(err, syscall.EACCES) {
		t.Errorf("open of a 0600 root file by a squashed root after the member left: %v, want EACCES", err)
	}
}

// Orphans are bounded in number and in time.
func TestOrphansBounded(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	r := newRecalls(newCallbacks(log, time.Second, 10), log, time.Second, RecallEIO)
	now := time.Now()
	r.mu.Lock()
	for i := range maxOrphans + 10 {
		r.addOrphanLocked(uint64(i+1), holder{name: "gone"}, now.Add(time.Duration(i)))
	}
	n := len(r.orphans)
	_, oldest := r.orphans[1]
	r.mu.Unlock()
	if n != maxOrphans || oldest {
		t.Errorf("%d orphans kept (the oldest among them: %v), want %d without the oldest", n, oldest, maxOrphans)
	}
	if _, ok := r.orphanOf(maxOrphans, now); !ok {
		t.Error("a recent orphan is gone")
	}
	if _, ok := r.orphanOf(maxOrphans, now.Add(r.orphanLease()+time.Minute)); ok {
		t.Error("an orphan outlives its holder's lease")
	}
}

// TestAttackPinSkipsSearchPermission: uid 1001 looks up a file in its own
// 0700 directory (LookupPinned keeps it open for a moment); the member, as
// uid 1000, which may not search that directory, opens the pinned file by
// its inode and generation. The pin used to be shared by every identity and
// reopened through /proc/self/fd, which skips the search permission.
func TestAttackPinSkipsSearchPermission(t *testing.T) {
	export := t.TempDir()
	private := filepath.Join(export, "private")
	os.Mkdir(private, 0o700)
	mustChown(t, private, otherUID, otherUID, 0o700)
	os.WriteFile(filepath.Join(private, "f"), []byte("1001's own"), 0o644)
	_, addr := attackServer(t, Config{Export: export})
	owner, _ := member(t, addr, "owner", wire.Hello{BootID: 1})
	attacker, _ := member(t, addr, "attacker", wire.Hello{BootID: 2})
	r, err := asUser(owner, otherUID, &wire.LookupPinned{Path: "private/f"})
	if err != nil {
		t.Fatal(err)
	}
	a := r.(*wire.AttrReply).Attr
	if _, err := asUser(attacker, attackerUID, &wire.Open{Path: "private/f"}); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("open by name of a file in another user's 0700 directory: %v, want EACCES", err)
	}
	if r, err := asUser(attacker, attackerUID, &wire.OpenPinned{Path: "private/f", Ino: a.Ino, Gen: a.Gen}); err == nil {
		t.Errorf("pinned open of a file in another user's 0700 directory succeeded (handle %d)", r.(*wire.OpenReply).Handle)
	}
	if _, err := asUser(owner, otherUID, &wire.OpenPinned{Path: "private/f", Ino: a.Ino, Gen: a.Gen}); err != nil {
		t.Errorf("the owner's own pinned open: %v", err)
	}
}

// TestAttackHintsTakeover: under hints a member is known by its peer
// listener's address, and a new boot id on a known address was taken for
// the member's restart: a member that claimed a connected victim's address
// with a higher boot id took over its id (its peers' requests and hints).
func TestAttackHintsTakeover(t *testing.T) {
	var logs lockedLog
	s, addr := attackServer(t, Config{Policy: "hints", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p := s.pol.(*hintsPolicy)
	const listen = "127.0.0.1:7001"
	member(t, addr, "victim", wire.Hello{BootID: 5, Listen: listen})
	boot := func() (uint64, bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		mb := p.members[p.ids[listen]]
		if mb == nil {
			return 0, false
		}
		return mb.boot, true
	}
	waitUntil(t, "the victim's membership", func() bool { _, ok := boot(); return ok })
	member(t, addr, "attacker", wire.Hello{BootID: 6, Listen: listen})
	waitUntil(t, "the server's answer to the claim", func() bool {
		b, _ := boot()
		return b == 6 || strings.Contains(logs.String(), "claims the peer listener")
	})
	if b, _ := boot(); b != 5 {
		t.Errorf("the member at the victim's address has boot id %d: the attacker took it over", b)
	}
}

// TestAttackDistrustResetByReconnect: under directory a holder reported
// BadBlockLimit times is distrusted; it used to be trusted again as soon as
// it reconnected (a new client id). Strikes belong to its identity (the
// session it resumes); a report of silence counts as one.
func TestAttackDistrustResetByReconnect(t *testing.T) {
	s, addr := attackServer(t, Config{Policy: "directory"})
	holder, hhs := member(t, addr, "holder", wire.Hello{BootID: 1, Listen: "127.0.0.1:7002"})
	reporter, _ := member(t, addr, "reporter", wire.Hello{BootID: 2, Listen: "127.0.0.1:7003"})
	id := hhs.Welcome.ClientID
	waitUntil(t, "the holder's join", func() bool { _, ok := clientStats(s, id); return ok })
	for i := range BadBlockLimit {
		reporter.Send(&wire.PeerReport{Holder: id, File: 1, Index: uint64(i), Version: 1, Reason: "no answer within the forward timeout 5s"})
	}
	waitUntil(t, "the holder's distrust", func() bool { st, _ := clientStats(s, id); return st.Distrusted })
	holder.Close()
	_, again := member(t, addr, "holder", wire.Hello{BootID: 1, Listen: "127.0.0.1:7002", Session: hhs.Welcome.Session})
	id2 := again.Welcome.ClientID
	waitUntil(t, "the holder's new join", func() bool { _, ok := clientStats(s, id2); return ok })
	if st, _ := clientStats(s, id2); !st.Distrusted {
		t.Error("a distrusted holder is trusted again after it reconnected")
	}
}

func clientStats(s *Server, id uint32) (directory.ClientStats, bool) {
	s.coop.mu.Lock()
	defer s.coop.mu.Unlock()
	return s.coop.dir.ClientStats(directory.ClientID(id))
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockedLog is a log sink the test reads while the server writes.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAttackReadThroughWriteOnlyHandle: a user who may write a file but
// not read it (0622, someone else's) opens it write-only, as the export
// lets it, and asks for its blocks through that handle. The export's disk
// refuses the pread (EBADF), but a block another reader had brought into
// the server's memory cache was served from there.
func TestAttackReadThroughWriteOnlyHandle(t *testing.T) {
	export := t.TempDir()
	p := filepath.Join(export, "drop")
	os.WriteFile(p, []byte("only the owner reads this"), 0o622)
	mustChown(t, p, otherUID, otherUID, 0o622)
	_, addr := attackServer(t, Config{Export: export})
	owner, _ := member(t, addr, "owner", wire.Hello{BootID: 1})
	attacker, _ := member(t, addr, "attacker", wire.Hello{BootID: 2})
	r, err := asUser(owner, otherUID, &wire.Open{Path: "drop", Flags: syscall.O_RDONLY})
	if err != nil {
		t.Fatal(err)
	}
	or := r.(*wire.OpenReply)
	if _, err := asUser(owner, otherUID, &wire.ReadBlock{Handle: or.Handle, File: or.Attr.Ino, Version: or.Attr.Version}); err != nil {
		t.Fatalf("the owner's read: %v", err)
	}
	if _, err := asUser(attacker, attackerUID, &wire.Open{Path: "drop", Flags: syscall.O_RDONLY}); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("read-only open by a user without read permission: %v, want EACCES", err)
	}
	r, err = asUser(attacker, attackerUID, &wire.Open{Path: "drop", Flags: syscall.O_WRONLY})
	if err != nil {
		t.Fatalf("write-only open by a user with write permission: %v", err)
	}
	wo := r.(*wire.OpenReply)
	r, err = asUser(attacker, attackerUID, &wire.ReadBlock{Handle: wo.Handle, File: wo.Attr.Ino, Version: wo.Attr.Version})
	if err == nil {
		if br, ok := r.(*wire.BlockReply); ok && len(br.Data) > 0 {
			t.Fatalf("read through a write-only handle returned %q", br.Data)
		}
	} else if !errors.Is(err, syscall.EBADF) {
		t.Fatalf("read through a write-only handle: %v, want EBADF", err)
	}
	// The same through an open that asks for a small file's data inline.
	if r, err := asUser(attacker, attackerUID, &wire.OpenRead{Path: "drop", Flags: syscall.O_WRONLY, Max: 1 << 20}); err == nil {
		if od := r.(*wire.OpenData); len(od.Data) > 0 {
			t.Fatalf("a write-only open returned the file's data inline: %q", od.Data)
		}
	}
}
