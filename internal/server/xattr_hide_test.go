package server

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// The server's own extended attributes (the append records of drc.go) are
// never listed, read, set or removed by a client.
func TestServerXattrsHidden(t *testing.T) {
	export := t.TempDir()
	f := filepath.Join(export, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(f, appendsXattr, []byte("record"), 0); err != nil {
		t.Skip("the test directory's file system has no user xattrs:", err)
	}
	if err := unix.Setxattr(f, "user.visible", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	_, addr := testServer(t, Config{Export: export})
	c := dial(t, addr, 1)
	r, err := call(t, c, &wire.ListXattr{Path: "f"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "user.visible\x00"; r.(*wire.XattrReply).Size != uint32(len(want)) {
		t.Fatalf("size-only listxattr = %d, want %d", r.(*wire.XattrReply).Size, len(want))
	}
	r, err = call(t, c, &wire.ListXattr{Path: "f", Size: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.(*wire.XattrReply).Value); got != "user.visible\x00" {
		t.Fatalf("listxattr = %q, want only user.visible", got)
	}
	if _, err := call(t, c, &wire.GetXattr{Path: "f", Name: appendsXattr, Size: 64}); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("getxattr of the server's own name: %v, want ENODATA", err)
	}
	if _, err := call(t, c, &wire.SetXattr{Path: "f", Name: appendsXattr, Value: []byte("forged")}); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("setxattr of the server's own name: %v, want EPERM", err)
	}
	if _, err := call(t, c, &wire.RemoveXattr{Path: "f", Name: appendsXattr}); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("removexattr of the server's own name: %v, want ENODATA", err)
	}
	buf := make([]byte, 64)
	if n, err := unix.Getxattr(f, appendsXattr, buf); err != nil || string(buf[:n]) != "record" {
		t.Fatalf("the record changed: %q, %v", buf[:n], err)
	}
}
