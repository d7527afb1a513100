package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/wire"
)

func openReply(t *testing.T, c *wire.Conn, path string, flags uint32) *wire.OpenReply {
	t.Helper()
	r, err := call(t, c, &wire.Open{Path: path, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	return r.(*wire.OpenReply)
}

// WriteBase answers the version right before the write: the writer's base
// when nobody changed the file in between, another version when someone
// did (a write through another connection, a change made in the export).
func TestWriteBasePrev(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), bytes.Repeat([]byte("x"), 10000), 0o644)
	_, addr := testServer(t, Config{Export: export, BlockSize: 4096})
	a, b := dial(t, addr, 1), dial(t, addr, 2)
	opr := openReply(t, a, "f", syscall.O_RDWR)
	base := opr.Attr.Version
	write := func(c *wire.Conn, seq, h, base uint64, data string) *wire.WriteReply {
		t.Helper()
		r, err := call(t, c, &wire.WriteBase{Seq: seq, Handle: h, Offset: 100, Base: base, Data: []byte(data)})
		if err != nil {
			t.Fatal(err)
		}
		return r.(*wire.WriteReply)
	}
	r1 := write(a, 1, opr.Handle, base, "one")
	if r1.Prev != base || r1.Attr.Version == base {
		t.Fatalf("first write: prev %d version %d, want prev %d (the base) and another version", r1.Prev, r1.Attr.Version, base)
	}
	r2 := write(a, 2, opr.Handle, r1.Attr.Version, "two")
	if r2.Prev != r1.Attr.Version {
		t.Fatalf("second write: prev %d, want %d", r2.Prev, r1.Attr.Version)
	}
	// Another client writes: the next WriteBase of a sees a prev that is
	// not its base.
	orb := openReply(t, b, "f", syscall.O_RDWR)
	if _, err := call(t, b, &wire.WriteSeq{Seq: 1, Handle: orb.Handle, Offset: 0, Data: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if r3 := write(a, 3, opr.Handle, r2.Attr.Version, "three"); r3.Prev == r2.Attr.Version {
		t.Fatalf("write after another client's: prev %d is the writer's base", r3.Prev)
	}
	// A change made in the export directly (size changes) is a version too.
	r4v := write(a, 4, opr.Handle, 0, "four").Attr.Version
	if err := os.WriteFile(filepath.Join(export, "f"), bytes.Repeat([]byte("y"), 20000), 0o644); err != nil {
		t.Fatal(err)
	}
	if r5 := write(a, 5, opr.Handle, r4v, "five"); r5.Prev == r4v {
		t.Fatalf("write after a change in the export: prev %d is the writer's base", r5.Prev)
	}
	// A resent WriteBase is answered from the reply cache, prev included.
	if again := write(a, 1, opr.Handle, base, "one"); again.Prev != r1.Prev || again.Attr.Version != r1.Attr.Version {
		t.Fatalf("resent write: %+v, want the first reply %+v", again, r1)
	}
}

// Under hints the server hashes the blocks it reads from the export as it
// serves them, and a digest request reads from the export only its first
// block: the others come along when known.
func TestHintsDigestsOfServedBlocks(t *testing.T) {
	export := t.TempDir()
	data := make([]byte, 8*4096)
	for i := range data {
		data[i] = byte(i / 4096)
	}
	os.WriteFile(filepath.Join(export, "f"), data, 0o644)
	s, addr := testServer(t, Config{Export: export, BlockSize: 4096, Policy: "hints", DiscardCacheSize: 1 << 20})
	c := dial(t, addr, 1)
	opr := openReply(t, c, "f", syscall.O_RDONLY)
	for _, idx := range []uint64{0, 3} {
		if _, err := call(t, c, &wire.ReadBlock{Handle: opr.Handle, File: opr.Attr.Ino, Index: idx, Version: opr.Attr.Version}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.Call(context.Background(), &wire.HintsDigest{Handle: opr.Handle, File: opr.Attr.Ino, Index: 1, Version: opr.Attr.Version, Count: 7})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, d := range r.(*wire.HintsDigestRep).Digests {
		got = append(got, d.Index)
		if !bytes.Equal(d.Digest, wire.BlockDigest(data[d.Index*4096:(d.Index+1)*4096])) {
			t.Errorf("block %d: wrong digest", d.Index)
		}
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("digests of blocks %v, want [1 3] (the first asked, read from the export, and the one served)", got)
	}
	if _, known := s.digestKnown(block.ID{File: opr.Attr.Ino, Index: 5}, opr.Attr.Version); known {
		t.Error("block 5 was hashed: it was read from the export for a digest nobody needs")
	}
}
