package server

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// dialNamed connects a raw protocol client under a client name.
func dialNamed(t *testing.T, addr, name string, boot uint64) *wire.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := wire.ClientHandshake(context.Background(), nc, wire.MustSecurity(wire.SecurityConfig{Insecure: true}), "", wire.Hello{Role: wire.RoleClient, Name: name, BootID: boot})
	if err != nil {
		t.Fatal(err)
	}
	c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSettledReleasesOrphans: a client that left holding a write
// delegation orphans the file; when a client of its name comes back and
// says it has declared everything it still holds (DelegateReturn of
// SettledIno) without declaring the file, another client's open proceeds
// at once instead of waiting out the recall timeout and failing with EIO.
func TestSettledReleasesOrphans(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("data"), 0o644)
	s, addr := testServer(t, Config{Export: export, RecallTimeout: time.Minute})
	holder := dialNamed(t, addr, "holder", 1)
	if _, err := call(t, holder, &wire.CallbackRegister{}); err != nil {
		t.Fatal(err)
	}
	r, err := call(t, holder, &wire.Open{Path: "f", Flags: syscall.O_WRONLY})
	if err != nil {
		t.Fatal(err)
	}
	ino := r.(*wire.OpenReply).Attr.Ino
	if _, err := call(t, holder, &wire.DelegateWrite{Ino: ino}); err != nil {
		t.Fatal(err)
	}
	holder.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.recalls.mu.Lock()
		_, orphan := s.recalls.orphans[ino]

		s.recalls.mu.Unlock()
		if orphan {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder's disconnection left no orphan")
		}
		time.Sleep(10 * time.Millisecond)
	}

	back := dialNamed(t, addr, "holder", 2)
	if _, err := call(t, back, &wire.CallbackRegister{}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, back, &wire.DelegateReturn{Ino: wire.SettledIno}); err != nil {
		t.Fatal(err)
	}
	opener := dialNamed(t, addr, "opener", 3)
	if _, err := call(t, opener, &wire.Open{Path: "f"}); err != nil {
		t.Fatalf("open after the holder came back with nothing to write: %v", err)
	}
}
