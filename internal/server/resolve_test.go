package server

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/wire"
)

// TestResolveStaysInTheExport: lookups, removals and the other path
// requests through a symlink (absolute or relative, in any component) that
// leads out of the export fail and touch nothing outside; symlinks that
// stay inside still work; the last component of a lookup is not followed.
func TestResolveStaysInTheExport(t *testing.T) {
	base := t.TempDir()
	export, outside := filepath.Join(base, "export"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(export, "in", "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
	must(t, os.WriteFile(filepath.Join(export, "in", "sub", "f"), []byte("f"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(export, "abs")))
	must(t, os.Symlink("../outside", filepath.Join(export, "rel")))
	must(t, os.Symlink("../../../outside", filepath.Join(export, "in", "sub", "deep")))
	must(t, os.Symlink("sub", filepath.Join(export, "in", "inside")))
	s, addr := testServer(t, Config{Export: export})
	if !s.openat2 {
		t.Log("kernel without openat2: os.Root's resolution is tested")
	}
	c := dial(t, addr, 1)
	for _, p := range []string{"abs/secret", "rel/secret", "in/sub/deep/secret"} {
		if _, err := call(t, c, &wire.Lookup{Path: p}); err == nil {
			t.Errorf("lookup %s: found a file outside the export", p)
		}
		if _, err := call(t, c, &wire.Unlink{Path: p}); err == nil {
			t.Errorf("unlink %s: removed a file outside the export", p)
		}
		if _, err := call(t, c, &wire.SetAttr{Path: p, Valid: wire.SetAtimeNow | wire.SetMtimeNow}); err == nil {
			t.Errorf("utimes %s: reached a file outside the export", p)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Fatalf("the file outside the export: %v", err)
	}
	r, err := call(t, c, &wire.Lookup{Path: "in/inside/f"})
	if err != nil {
		t.Fatalf("lookup through a symlink inside the export: %v", err)
	}
	if a := r.(*wire.AttrReply).Attr; a.Size != 1 || a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		t.Errorf("attributes through an inner symlink: %+v", a)
	}
	r, err = call(t, c, &wire.Lookup{Path: "abs"})
	if err != nil || r.(*wire.AttrReply).Attr.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		t.Errorf("lookup of a symlink itself: %v %+v", err, r)
	}
	for p, want := range map[string]error{"in/sub/f/x": syscall.ENOTDIR, "nope/x": syscall.ENOENT, "in/nope": syscall.ENOENT} {
		if _, err := call(t, c, &wire.Lookup{Path: p}); !errors.Is(err, want) {
			t.Errorf("lookup %s: %v, want %v", p, err, want)
		}
	}
	if _, err := call(t, c, &wire.Rmdir{Path: "in/sub/f"}); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("rmdir of a file: %v, want ENOTDIR", err)
	}
	if _, err := call(t, c, &wire.Unlink{Path: "in/sub"}); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("unlink of a directory: %v, want EISDIR", err)
	}
	if _, err := call(t, c, &wire.Rmdir{Path: "in/sub"}); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Errorf("rmdir of a full directory: %v, want ENOTEMPTY", err)
	}
	if _, err := call(t, c, &wire.Unlink{Path: "in/sub/f"}); err != nil {
		t.Errorf("unlink: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
