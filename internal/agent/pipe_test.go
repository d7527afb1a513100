package agent

import (
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// TestCertainHoldsOnlyPredictableChanges: an attribute change is held back
// only when the server cannot refuse it or change it further.
func TestCertainHoldsOnlyPredictableChanges(t *testing.T) {
	user := vfs.Caller{UID: 1000, GID: 100, Groups: []uint32{100, 200}}
	root := vfs.Caller{UID: 0, GID: 0}
	own := wire.Attr{Mode: syscall.S_IFREG | 0o600, UID: 1000, GID: 100}
	mine := wire.Attr{Mode: syscall.S_IFREG | 0o600, UID: 0, GID: 0}
	for _, tc := range []struct {
		name   string
		c      vfs.Caller
		at     wire.Attr
		root   bool
		in     vfs.SetAttrIn
		certan bool
	}{
		{"owner chmod", user, own, false, vfs.SetAttrIn{Valid: wire.SetMode, Mode: 0o644}, true},
		{"owner utimens", user, own, false, vfs.SetAttrIn{Valid: wire.SetMtime | wire.SetAtimeNow, Mtime: 5}, true},
		{"owner chgrp to a group of theirs", user, own, false, vfs.SetAttrIn{Valid: wire.SetGID, GID: 200}, true},
		{"owner chgrp to another group", user, own, false, vfs.SetAttrIn{Valid: wire.SetGID, GID: 300}, false},
		{"owner chown to another user", user, own, false, vfs.SetAttrIn{Valid: wire.SetUID, UID: 1001}, false},
		{"owner chmod setuid", user, own, false, vfs.SetAttrIn{Valid: wire.SetMode, Mode: 0o4755}, false},
		{"chmod of a setgid file", user, wire.Attr{Mode: syscall.S_IFREG | 0o2755, UID: 1000}, false, vfs.SetAttrIn{Valid: wire.SetMode, Mode: 0o755}, false},
		{"not the owner", user, wire.Attr{Mode: syscall.S_IFREG | 0o666, UID: 1001}, false, vfs.SetAttrIn{Valid: wire.SetMtimeNow}, false},
		{"truncation", user, own, false, vfs.SetAttrIn{Valid: wire.SetSize}, false},
		{"nothing", user, own, false, vfs.SetAttrIn{}, false},
		{"root chown of its own", root, mine, true, vfs.SetAttrIn{Valid: wire.SetUID | wire.SetGID, UID: 5, GID: 6}, true},
		{"root chmod after chown", root, wire.Attr{Mode: syscall.S_IFREG | 0o600, UID: 5, GID: 6}, true, vfs.SetAttrIn{Valid: wire.SetMode, Mode: 0o640}, true},
		{"squashed root", root, wire.Attr{Mode: syscall.S_IFREG | 0o600, UID: 65534}, false, vfs.SetAttrIn{Valid: wire.SetMode, Mode: 0o640}, false},
	} {
		if got := certain(tc.c, tc.at, tc.root, tc.in); got != tc.certan {
			t.Errorf("%s: certain = %v, want %v", tc.name, got, tc.certan)
		}
	}
}

// TestDirAttrsKeepsOnlyLoneChanges: a directory's attributes from a
// change's reply answer getattrs only when no other change of the
// directory overlapped it, and only for the timeout.
func TestDirAttrsKeepsOnlyLoneChanges(t *testing.T) {
	d := &dirAttrs{ttl: time.Hour}
	d.on.Store(true)
	reply := func(ino uint64) wire.Msg {
		return &wire.EntryReply{HasParent: true, Parent: wire.Attr{Ino: ino, Mode: syscall.S_IFDIR | 0o755}}
	}

	t1 := d.begin("a")
	if _, ok := d.get("a"); ok {
		t.Fatal("known while a change is in flight")
	}
	if r := d.end(t1, reply(1)); r.Type() != wire.TOK {
		t.Errorf("usual reply %v, want OK", r.Type())
	}
	if at, ok := d.get("a"); !ok || at.Ino != 1 {
		t.Fatalf("after a lone change: %v %v", at, ok)
	}

	// Two changes overlap: neither reply is kept (the server may have
	// served them in any order).
	t2, t3 := d.begin("a"), d.begin("a")
	d.end(t3, reply(3))
	d.end(t2, reply(2))
	if at, ok := d.get("a"); ok {
		t.Errorf("kept %v after overlapping changes", at)
	}

	// A setattr of the directory (no reply to keep) that overlaps a create.
	t4 := d.begin("a")
	t5 := d.begin("a")
	d.end(t5, nil)
	d.end(t4, reply(4))
	if _, ok := d.get("a"); ok {
		t.Error("kept a reply that overlapped a setattr")
	}

	// clear drops what is known and what is in flight.
	d.end(d.begin("b"), reply(5))
	t6 := d.begin("c")
	d.clear()
	d.end(t6, reply(6))
	if _, ok := d.get("b"); ok {
		t.Error("b known after clear")
	}
	if _, ok := d.get("c"); ok {
		t.Error("kept a reply begun before clear")
	}

	// The timeout.
	d.ttl = time.Nanosecond
	d.end(d.begin("e"), reply(7))
	time.Sleep(time.Millisecond)
	if _, ok := d.get("e"); ok {
		t.Error("known after the timeout")
	}
}
