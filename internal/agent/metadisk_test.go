package agent

import (
	"reflect"
	"testing"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// TestMetaDiskItems: records survive a reopen; items come parents first,
// a listing's entries become items of their own, and a listing without
// its directory's attributes is not revalidated.
func TestMetaDiskItems(t *testing.T) {
	dir := t.TempDir()
	md, err := openMetaDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	who := vfs.Caller{UID: 1000, GID: 100, Groups: []uint32{4, 5}}
	dirAttr := wire.Attr{Ino: 2, Mode: 0o40755, Mtime: 7, Ctime: 8}
	fileAttr := wire.Attr{Ino: 3, Mode: 0o100644, Size: 10, Version: 99}
	md.putRecord(&metaRecord{kind: metaAttr, path: "d/e", caller: who, attr: fileAttr})
	md.putRecord(&metaRecord{kind: metaAttr, path: "d", caller: who, attr: dirAttr})
	md.putRecord(&metaRecord{kind: metaAttr, path: "", caller: who, attr: wire.Attr{Ino: 1, Mode: 0o40755}})
	md.putRecord(&metaRecord{kind: metaList, path: "d", caller: who, ents: []wire.DirEntryPlus{
		{DirEntry: wire.DirEntry{Name: "e", Ino: 3, Mode: 0o100644}, HasAttr: true, Attr: fileAttr},
		{DirEntry: wire.DirEntry{Name: "f", Ino: 4, Mode: 0o100644}, HasAttr: true, Attr: wire.Attr{Ino: 4, Mode: 0o100644}},
	}})
	md.putRecord(&metaRecord{kind: metaList, path: "nodir", caller: who, ents: []wire.DirEntryPlus{{DirEntry: wire.DirEntry{Name: "x", Ino: 9}}}})
	if err := md.close(); err != nil {
		t.Fatal(err)
	}
	md, err = openMetaDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer md.close()
	var paths []string
	for _, it := range md.items() {
		paths = append(paths, it.path)
		if !reflect.DeepEqual(it.caller, who) {
			t.Errorf("%q: caller %+v, want %+v", it.path, it.caller, who)
		}
		if it.path == "d" && (!it.hasList || len(it.list) != 2 || it.attr != dirAttr) {
			t.Errorf("d: %+v; want its attributes and its listing of 2", it)
		}
	}
	if want := []string{"", "d", "d/e", "d/f"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("items %q, want %q", paths, want)
	}
}
