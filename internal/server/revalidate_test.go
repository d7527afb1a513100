package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/coopfs/coopfs/internal/wire"
)

// TestRevalidate: unchanged paths are vouched for, a changed one comes
// back with its new attributes, a removed one is gone; every object
// answered for is in Grants (a callback is granted on each).
func TestRevalidate(t *testing.T) {
	s, _ := testServer(t, Config{})
	exp := s.cfg.Export
	for _, f := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(exp, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	attr := func(p string) wire.Attr {
		r, err := s.lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return r.Attr
	}
	a, b, c, root := attr("a"), attr("b"), attr("c"), attr("")
	if err := os.WriteFile(filepath.Join(exp, "b"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(exp, "c"))
	r, err := s.revalidate(&wire.Revalidate{Items: []wire.RevalidateItem{
		{Path: "", Ino: root.Ino, Version: root.Version, Mtime: root.Mtime, Ctime: root.Ctime, List: true},
		{Path: "a", Ino: a.Ino, Version: a.Version, Mtime: a.Mtime, Ctime: a.Ctime},
		{Path: "b", Ino: b.Ino, Version: b.Version, Mtime: b.Mtime, Ctime: b.Ctime},
		{Path: "c", Ino: c.Ino, Version: c.Version, Mtime: c.Mtime, Ctime: c.Ctime},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint8{wire.RevalidChanged, wire.RevalidSame, wire.RevalidChanged, wire.RevalidGone}
	for i, st := range r.Status {
		if st != want[i] {
			t.Errorf("item %d: status %d, want %d", i, st, want[i])
		}
	}
	if len(r.Attrs) != 2 || r.Attrs[1].Ino != b.Ino || r.Attrs[1].Size != 7 {
		t.Errorf("changed attributes %+v; want the root's and b's new ones (size 7)", r.Attrs)
	}
	if len(r.Grants) != 3 {
		t.Errorf("%d grants, want 3 (c is gone)", len(r.Grants))
	}
}
