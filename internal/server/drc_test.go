package server

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/wire"
)

func openHandle(t *testing.T, c *wire.Conn, path string, flags uint32) uint64 {
	t.Helper()
	r, err := call(t, c, &wire.Open{Path: path, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	return r.(*wire.OpenReply).Handle
}

// TestAppendAppliedOnce resends one append on the same connection, on a
// new connection of the same client (resuming its session), and to a
// restarted server: it lands once. A new sequence number lands again.
func TestAppendAppliedOnce(t *testing.T) {
	export := t.TempDir()
	path := filepath.Join(export, "log")
	os.WriteFile(path, nil, 0o644)
	line := []byte("one line\n")
	appendOnce := func(c *wire.Conn, seq uint64) {
		h := openHandle(t, c, "log", syscall.O_WRONLY|syscall.O_APPEND)
		if _, err := call(t, c, &wire.WriteSeq{Seq: seq, Handle: h, Data: line}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, n int) {
		t.Helper()
		got, _ := os.ReadFile(path)
		if !bytes.Equal(got, bytes.Repeat(line, n)) {
			t.Fatalf("%s: the file holds %q, want %d lines", what, got, n)
		}
	}
	s1, addr := testServer(t, Config{Export: export})
	c, session := dialResume(t, addr, nil)
	appendOnce(c, 1)
	appendOnce(c, 1)
	want("resent on the same connection", 1)
	c1, resumed := dialResume(t, addr, session)
	if !bytes.Equal(resumed, session) {
		t.Fatal("a reconnecting client presenting its session got another one")
	}
	appendOnce(c1, 1)
	want("resent on a new connection", 1)
	c3, _ := dialResume(t, addr, nil)
	appendOnce(c3, 1)
	want("same sequence number from another client", 2)
	if s1.drcHits.Load() != 2 {
		t.Errorf("reply cache hits %d, want 2", s1.drcHits.Load())
	}
	// A new server process: only the file's own record knows.
	s2, addr2 := testServer(t, Config{Export: export})
	c2, _ := dialResume(t, addr2, session)
	appendOnce(c2, 1)
	if _, err := getxattr(path); err != nil {
		t.Skipf("the temporary directory stores no xattrs (%v): the restart case needs them", err)
	}
	want("resent to a restarted server", 2)
	appendOnce(c2, 2)
	want("a new append", 3)
	// Positional writes are answered from the cache too.
	os.WriteFile(filepath.Join(export, "pos"), nil, 0o644)
	h := openHandle(t, c2, "pos", syscall.O_RDWR)
	for i := 0; i < 2; i++ {
		if _, err := call(t, c2, &wire.WriteSeq{Seq: 3, Handle: h, Offset: 5, Data: []byte("X")}); err != nil {
			t.Fatal(err)
		}
	}
	if s2.drcHits.Load() != 2 {
		t.Errorf("restarted server: %d writes answered without applying them, want 2 (the append, the positional resend)", s2.drcHits.Load())
	}
	// An unknown handle is not cached: the resend with a good handle runs.
	if _, err := call(t, c2, &wire.WriteSeq{Seq: 4, Handle: 9999, Data: line}); err == nil {
		t.Fatal("write to an unknown handle succeeded")
	}
	appendOnce(c2, 4)
	want("after an unknown handle", 4)
}

func getxattr(path string) ([]byte, error) {
	buf := make([]byte, 1024)
	n, err := syscall.Getxattr(path, appendsXattr, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
