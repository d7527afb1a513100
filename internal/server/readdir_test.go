package server

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/coopfs/coopfs/internal/wire"
)

// listAll pages through a directory as the agent does.
func listAll(t *testing.T, c *wire.Conn, path string) (map[string]bool, int) {
	t.Helper()
	names := map[string]bool{}
	pages := 0
	for {
		r, err := call(t, c, &wire.ReadDir{Path: path, Offset: uint64(len(names))})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		page := r.(*wire.ReadDirReply)
		for _, e := range page.Entries {
			if names[e.Name] {
				t.Fatalf("%s listed twice", e.Name)
			}
			names[e.Name] = true
		}
		if !page.More || len(page.Entries) == 0 {
			return names, pages
		}
	}
}

// TestReadDirIsLinear lists a big directory and counts the entries the
// server read from the export: a whole listing reads each entry once (not
// once per page, as re-reading the directory for every page would).
func TestReadDirIsLinear(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	// On tmpfs when there is one: creating 100k files on this machine's
	// disk takes half a minute, on tmpfs two seconds.
	export, err := os.MkdirTemp("/dev/shm", "coopfs-readdir-")
	if err != nil {
		export = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(export) })
	}
	dir := filepath.Join(export, "big")
	os.Mkdir(dir, 0o755)
	for i := 0; i < n; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("entry-%06d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	s, addr := testServer(t, Config{Export: export})
	c := dial(t, addr, 1)
	names, pages := listAll(t, c, "big")
	if len(names) != n {
		t.Fatalf("listed %d entries, want %d", len(names), n)
	}
	s.dirs.mu.Lock()
	read := s.dirs.read
	s.dirs.mu.Unlock()
	t.Logf("%d entries in %d pages: %d entries read from the export", n, pages, read)
	if read != uint64(n) {
		t.Fatalf("the server read %d entries for a listing of %d: want each once", read, n)
	}
	// A listing restarted in the middle (no cursor there) still gives the
	// same entries, and the cursors are bounded and closed with the listing.
	r, err := call(t, c, &wire.ReadDir{Path: "big", Offset: uint64(n - 10)})
	if err != nil || len(r.(*wire.ReadDirReply).Entries) != 10 {
		t.Fatalf("page at offset %d: %v, %v", n-10, r, err)
	}
	s.dirs.mu.Lock()
	open := len(s.dirs.m[nil])
	for _, cs := range s.dirs.m {
		open += len(cs)
	}
	s.dirs.mu.Unlock()
	if open != 0 {
		t.Fatalf("%d cursors left open after complete listings", open)
	}
}

// TestReadDirPlusCarriesLookupAttrs checks that every entry of a listing
// with attributes carries what a Lookup of it returns: regular files (with
// their version and generation), hard links, directories, symlinks.
func TestReadDirPlusCarriesLookupAttrs(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("hello"), 0o640)
	os.Link(filepath.Join(export, "f"), filepath.Join(export, "hard"))
	os.Mkdir(filepath.Join(export, "sub"), 0o750)
	os.Symlink("f", filepath.Join(export, "link"))
	_, addr := testServer(t, Config{Export: export})
	c := dial(t, addr, 1)
	r, err := call(t, c, &wire.ReadDirPlus{Path: ""})
	if err != nil {
		t.Fatal(err)
	}
	page := r.(*wire.ReadDirPlusReply)
	if len(page.Entries) != 4 || page.More {
		t.Fatalf("got %d entries (more %v), want 4", len(page.Entries), page.More)
	}
	for _, e := range page.Entries {
		if !e.HasAttr {
			t.Fatalf("%s: no attributes", e.Name)
		}
		lr, err := call(t, c, &wire.Lookup{Path: e.Name})
		if err != nil {
			t.Fatal(err)
		}
		want := lr.(*wire.AttrReply).Attr
		if e.Attr != want {
			t.Errorf("%s: listing says %+v, lookup %+v", e.Name, e.Attr, want)
		}
		if e.Ino != want.Ino || e.Mode != want.Mode {
			t.Errorf("%s: entry ino/mode %d/%o, want %d/%o", e.Name, e.Ino, e.Mode, want.Ino, want.Mode)
		}
	}
	// The end of the directory, and a file that is not a directory.
	if r, err := call(t, c, &wire.ReadDirPlus{Path: "", Offset: 4}); err != nil || len(r.(*wire.ReadDirPlusReply).Entries) != 0 {
		t.Fatalf("past the end: %v, %v", r, err)
	}
	if _, err := call(t, c, &wire.ReadDirPlus{Path: "f"}); err == nil {
		t.Fatal("listing a regular file succeeded")
	}
}
