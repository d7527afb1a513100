package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/coopfs/coopfs/internal/wire"
)

// TestOpenPinned: a file found by LookupPinned is opened by OpenPinned even
// after another file was renamed over its name; without the pin (a plain
// Lookup) the open returns the name's new file, which the client tells
// apart by its (ino, gen).
func TestOpenPinned(t *testing.T) {
	export := t.TempDir()
	f := filepath.Join(export, "f")
	os.WriteFile(f, []byte("old"), 0o644)
	s, addr := testServer(t, Config{Export: export})
	c := dial(t, addr, 1)
	lookup := func(m wire.Msg) wire.Attr {
		t.Helper()
		r, err := call(t, c, m)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*wire.AttrReply).Attr
	}
	replace := func(content string) {
		t.Helper()
		tmp := filepath.Join(export, "tmp")
		os.WriteFile(tmp, []byte(content), 0o644)
		if err := os.Rename(tmp, f); err != nil {
			t.Fatal(err)
		}
	}
	readVia := func(a wire.Attr) (wire.Attr, string) {
		t.Helper()
		r, err := call(t, c, &wire.OpenPinned{Path: "f", Ino: a.Ino, Gen: a.Gen})
		if err != nil {
			t.Fatal(err)
		}
		or := r.(*wire.OpenReply)
		br, err := call(t, c, &wire.ReadBlock{Handle: or.Handle, File: or.Attr.Ino})
		if err != nil {
			t.Fatal(err)
		}
		return or.Attr, string(br.(*wire.BlockReply).Data)
	}
	old := lookup(&wire.LookupPinned{Path: "f"})
	replace("new")
	got, data := readVia(old)
	if got.Ino != old.Ino || data != "old" {
		t.Fatalf("pinned open after a rename over the name: ino %d %q, want the pinned %d \"old\"", got.Ino, data, old.Ino)
	}
	if s.pinnedOpens.Load() != 1 {
		t.Fatalf("pinned opens %d, want 1", s.pinnedOpens.Load())
	}
	plain := lookup(&wire.Lookup{Path: "f"}) // no pin
	replace("newer")
	got, data = readVia(plain)
	if got.Ino == plain.Ino || data != "newer" {
		t.Fatalf("open without a pin: ino %d %q, want the name's new file", got.Ino, data)
	}
}
