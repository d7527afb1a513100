package server

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/wire"
)

// TestChangeByPathRefusesAnotherFile: a setattr, link or setxattr by path
// that names the file it is meant for is refused with ESTALE, and changes
// nothing, when the path now names another file; meant for the file the
// path names, it goes through.
func TestChangeByPathRefusesAnotherFile(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("meant"), 0o644)
	_, addr := testServer(t, Config{Export: export})
	c := dial(t, addr, 1)
	r, err := call(t, c, &wire.Lookup{Path: "f"})
	if err != nil {
		t.Fatal(err)
	}
	meant := r.(*wire.AttrReply).Attr
	// The name goes to another file.
	os.Remove(filepath.Join(export, "f"))
	os.WriteFile(filepath.Join(export, "f"), []byte("another"), 0o644)

	for _, m := range []wire.Msg{
		&wire.SetAttr{Path: "f", Valid: wire.SetSize, Size: 1, Ino: meant.Ino, Gen: meant.Gen},
		&wire.SetAttr{Path: "f", Valid: wire.SetMode, Mode: 0o600, Ino: meant.Ino, Gen: meant.Gen},
		&wire.Link{Old: "f", New: "g", Ino: meant.Ino, Gen: meant.Gen},
		&wire.SetXattr{Path: "f", Name: "user.x", Value: []byte("1"), Ino: meant.Ino, Gen: meant.Gen},
		&wire.RemoveXattr{Path: "f", Name: "user.x", Ino: meant.Ino, Gen: meant.Gen},
	} {
		if _, err := call(t, c, m); !errors.Is(err, syscall.ESTALE) {
			t.Errorf("%T meant for the old file: %v, want ESTALE", m, err)
		}
	}
	fi, err := os.Stat(filepath.Join(export, "f"))
	if err != nil || fi.Size() != int64(len("another")) || fi.Mode().Perm() != 0o644 {
		t.Errorf("the other file after the refused changes: %v, %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(export, "g")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused link made g: %v", err)
	}

	r, err = call(t, c, &wire.Lookup{Path: "f"})
	if err != nil {
		t.Fatal(err)
	}
	now := r.(*wire.AttrReply).Attr
	for _, m := range []wire.Msg{
		&wire.SetAttr{Path: "f", Valid: wire.SetSize, Size: 1, Ino: now.Ino, Gen: now.Gen},
		&wire.Link{Old: "f", New: "g", Ino: now.Ino, Gen: now.Gen},
	} {
		if _, err := call(t, c, m); err != nil {
			t.Errorf("%T meant for the file the path names: %v", m, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(export, "g")); err != nil || string(b) != "a" {
		t.Errorf("g after the link of the truncated file: %q, %v", b, err)
	}
}
