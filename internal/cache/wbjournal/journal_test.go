package wbjournal

import (
	"reflect"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/vfs"
)

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Version: 42, Caller: vfs.Caller{UID: 7, GID: 8, Groups: []uint32{1, 2, 3}}, Path: "a/b c"}
	got, ok := Decode(r.Encode())
	if !ok || !reflect.DeepEqual(got, r) {
		t.Fatalf("Decode(Encode(%+v)) = %+v, %v", r, got, ok)
	}
	if _, ok := Decode(r.Encode()[:17]); ok {
		t.Error("a truncated record decoded")
	}
}

// TestRecover: after a reopen, dirty frames with a record of their version
// are placed, others are reported lost, and records without frames go.
func TestRecover(t *testing.T) {
	dir := t.TempDir()
	open := func() (*disk.Cache, *Journal) {
		c, err := disk.Open(disk.Config{Dir: dir, Size: 1 << 20, BlockSize: 4096, Banks: 2, Assoc: 4})
		if err != nil {
			t.Fatal(err)
		}
		j, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		return c, j
	}
	c, j := open()
	put := func(file, idx uint64, v block.Version, n int) {
		if err := c.PutDirty(block.ID{File: file, Index: idx}, v, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Put(1, Record{Version: 5, Path: "one"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Put(3, Record{Version: 9, Path: "three"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Put(4, Record{Version: 5}); err != nil { // an orphan: no path
		t.Fatal(err)
	}
	put(1, 0, 5, 4096)
	put(1, 2, 5, 100)
	put(2, 0, 5, 10) // no record
	put(4, 0, 5, 10)
	j.Close()
	c.Close()

	c, j = open()
	defer c.Close()
	defer j.Close()
	files, lost, err := j.Recover(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[1] == nil {
		t.Fatalf("recovered %v; want file 1 only", files)
	}
	f := files[1]
	if f.Record.Path != "one" || f.Bytes != 4196 || f.Size != 2*4096+100 || len(f.Blocks) != 2 {
		t.Errorf("file 1: %+v", f)
	}
	if len(lost) != 1 || lost[0] != (block.ID{File: 2, Index: 0}) {
		t.Errorf("lost %v; want block 0 of file 2", lost)
	}
	if _, ok := j.m.Attr(3); ok {
		t.Error("the record of file 3, which has no dirty frame, was kept")
	}
	if _, ok := j.m.Attr(4); ok {
		t.Error("the orphan's record was kept")
	}
	if _, ok := c.Get(block.ID{File: 4}, 5); ok {
		t.Error("the orphan's dirty block still reads back: it is not on the stale list")
	}
}
