package disk

import (
	"bytes"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
)

// FuzzDecodeTag: any 64 bytes decode without panic, and a tag that decodes
// re-encodes to the same bytes (nothing is accepted that encode would not
// have written).
func FuzzDecodeTag(f *testing.F) {
	var b [tagSize]byte
	tag{state: stateDirty, id: block.ID{File: 3, Index: 9}, v: 4, seq: 77, n: 100, dataCRC: 5}.encode(b[:])
	f.Add(b[:])
	f.Add(make([]byte, tagSize))
	f.Fuzz(func(t *testing.T, in []byte) {
		tg, ok := decodeTag(in, 4096)
		if !ok {
			return
		}
		if tg.n > 4096 || (tg.state != stateClean && tg.state != stateDirty) {
			t.Fatalf("decoded an impossible tag %+v", tg)
		}
		var out [tagSize]byte
		tg.encode(out[:])
		if !bytes.Equal(out[:60], in[:60]) {
			// Padding bytes are covered by the checksum, so they match too.
			t.Fatalf("decode/encode differ:\n%x\n%x", in[:tagSize], out)
		}
	})
}

// FuzzDecodeStale: any journal replays without panic; its valid prefix
// is a whole number of records.
func FuzzDecodeStale(f *testing.F) {
	var r [staleRecSize]byte
	encodeStale(r[:], staleAdd, 42)
	f.Add(r[:])
	f.Add(append(r[:], 1, 2, 3))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, valid := decodeStale(in)
		if valid%staleRecSize != 0 || valid > len(in) {
			t.Fatalf("valid prefix %d of %d bytes", valid, len(in))
		}
	})
}

// FuzzMetaReplay: any log replays without panic into a prefix that
// replays to the same entries again.
func FuzzMetaReplay(f *testing.F) {
	f.Add(append(encodeMeta(metaSetAttr, u64(1), []byte("x")), encodeMeta(metaSetLookup, u64(1), u64(2), []byte("n"))...))
	f.Add(encodeMeta(metaDelLookup, u64(1), []byte("n"))[:5])
	f.Fuzz(func(t *testing.T, in []byte) {
		m := &MetaStore{attrs: map[uint64][]byte{}, lookups: map[lookupKey]uint64{}}
		valid := m.replay(in)
		if valid > len(in) {
			t.Fatalf("valid prefix %d of %d bytes", valid, len(in))
		}
		m2 := &MetaStore{attrs: map[uint64][]byte{}, lookups: map[lookupKey]uint64{}}
		if m2.replay(in[:valid]) != valid || len(m2.attrs) != len(m.attrs) || len(m2.lookups) != len(m.lookups) {
			t.Fatal("the valid prefix does not replay to the same store")
		}
	})
}

// FuzzSuperblock: any superblock text parses or fails without panic, and
// what parses prints back the same.
func FuzzSuperblock(f *testing.F) {
	f.Add(geometry{BlockSize: 4096, Banks: 4, Assoc: 2, Sets: 8}.superblock())
	f.Add("coopfs-disk-cache 1\nblock_size -1\n")
	f.Fuzz(func(t *testing.T, in string) {
		g, err := parseSuperblock(in)
		if err != nil {
			return
		}
		if g2, err := parseSuperblock(g.superblock()); err != nil || g2 != g {
			t.Fatalf("%+v does not round-trip: %+v, %v", g, g2, err)
		}
	})
}
