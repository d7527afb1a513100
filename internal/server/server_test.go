package server

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

func TestVersionsFollowStatAndSurviveRestarts(t *testing.T) {
	var changed []uint64
	v := newVersions(100, func(ino uint64) { changed = append(changed, ino) })
	st := &syscall.Stat_t{Ino: 7, Size: 10}
	a := v.observe(st)
	if b := v.observe(st); b != a {
		t.Fatalf("unchanged stat gave a new version: %d then %d", a, b)
	}
	if len(changed) != 0 {
		t.Fatalf("first sight reported as a change: %v", changed)
	}
	// A restarted server gives an unchanged file the same version.
	if later := newVersions(uint64(time.Now().UnixNano()), nil); later.observe(st) != a {
		t.Fatal("the version of an unchanged file changed with a restart")
	}
	st.Ctim.Nsec = 5
	b := v.observe(st)
	if b == a {
		t.Fatal("a ctime change kept the version")
	}
	// A write within the timestamp granularity asks for a nudge, past
	// every mtime of the tick; without one the version comes from the
	// counter.
	mt, ok := v.nudge(st)
	if !ok || mt <= st.Mtim.Nano() {
		t.Fatalf("nudge = %d, %v", mt, ok)
	}
	c := v.bump(st)
	if c == b || c == a || c&derivedBit != 0 {
		t.Fatalf("bump of an unchanged stat: version %d (before %d, %d)", c, a, b)
	}
	if v.observe(st) != c {
		t.Fatal("observe after bump with the same stat changed the version")
	}
	st.Mtim.Nsec = mt
	d := v.bump(st) // the nudged state
	if d == c || d == b || d&derivedBit == 0 {
		t.Fatalf("bump of a nudged stat: version %d", d)
	}
	st.Mtim.Nsec = 0 // the next write of the tick: mtime back to the tick's
	if mt2, ok := v.nudge(st); !ok || mt2 <= mt {
		t.Fatalf("second nudge of the tick = %d, %v; want past %d", mt2, ok, mt)
	}
	v.forget(7)
	st.Ctim.Nsec = 9
	if e := v.observe(st); e == d || e == b {
		t.Fatalf("a changed file seen again after forget kept an old version")
	}
	if len(changed) != 3 || changed[0] != 7 {
		t.Fatalf("changes reported: %v", changed)
	}
}

func TestCleanRejectsPathsOutOfTheExport(t *testing.T) {
	for in, want := range map[string]string{"": ".", ".": ".", "a/b": "a/b", "a/../b": "b", "a//b/": "a/b"} {
		if got, err := clean(in); err != nil || got != want {
			t.Errorf("clean(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"/etc", "..", "../x", "a/../../x", "a\x00b"} {
		if _, err := clean(bad); err == nil {
			t.Errorf("clean(%q) accepted", bad)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for name, cfg := range map[string]Config{
		"missing export":   {Export: filepath.Join(dir, "nope")},
		"export is a file": {Export: file},
		"bad block size":   {Export: dir, BlockSize: 3000},
		"huge block size":  {Export: dir, BlockSize: 64 << 20},
		"unknown policy":   {Export: dir, Policy: "magic"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A missing export says so, and what to do, and stays an fs.ErrNotExist.
	missing := filepath.Join(dir, "nope")
	if _, err := New(Config{Export: missing}); !errors.Is(err, fs.ErrNotExist) ||
		!strings.Contains(err.Error(), missing+" does not exist: create it") {
		t.Errorf("missing export: %v", err)
	}
	s, err := New(Config{Export: dir, Policy: "directory"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestReadOnlyRefusesChanges(t *testing.T) {
	s, err := New(Config{Export: t.TempDir(), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range []wire.Msg{&wire.Mkdir{Path: "d"}, &wire.Create{Path: "f"}, &wire.Unlink{Path: "f"},
		&wire.Open{Path: "f", Flags: syscall.O_RDWR}, &wire.Rename{Old: "a", New: "b"}} {
		if _, err := s.serveMsg(t.Context(), nil, m); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%v on a read-only export: %v", m.Type(), err)
		}
	}
	if _, err := s.serveMsg(t.Context(), nil, &wire.Lookup{Path: ""}); err != nil {
		t.Errorf("lookup on a read-only export: %v", err)
	}
}

func TestListenReportsPortInUse(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Listen(ln.Addr().String()); err == nil || !strings.Contains(err.Error(), "port is in use") {
		t.Fatalf("second listen on %s: %v", ln.Addr(), err)
	}
	if !IsLoopback("127.0.0.1:1") || !IsLoopback("[::1]:1") || !IsLoopback("localhost:1") || IsLoopback("0.0.0.0:1") || IsLoopback("10.0.0.1:1") {
		t.Error("IsLoopback")
	}
}

// A stat taken before a write through the server and observed after it
// (a getattr or the export's watcher racing the write) must not give the
// file its older state's derived version back: clients may hold blocks of
// that version, of other content than the file has now.
func TestVersionsStaleStatGetsNoOldVersion(t *testing.T) {
	v := newVersions(100, nil)
	old := &syscall.Stat_t{Ino: 3, Size: 10}
	old.Ctim.Nsec, old.Mtim.Nsec = 50, 50
	a := v.observe(old)
	cur := *old
	cur.Ctim.Nsec, cur.Mtim.Nsec = 60, 60
	b := v.bump(&cur) // the write
	if c := v.observe(old); c == a || c == b {
		t.Fatalf("a stale stat got version %d (old %d, current %d)", c, a, b)
	}
	// Within one tick: the state before the write's nudge.
	cur.Mtim.Nsec = 61
	d := v.bump(&cur)
	pre := cur
	pre.Mtim.Nsec = 60
	if e := v.observe(&pre); e == b || e == d {
		t.Fatalf("a stale stat of the same tick got version %d (%d, %d)", e, b, d)
	}
}
