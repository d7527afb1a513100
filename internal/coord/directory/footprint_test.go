package directory

import (
	"testing"

	"github.com/coopfs/coopfs/internal/block"
)

// The footprint counts every holder record, the holders from 64 on in the
// entries' lists, and grows with them; it shrinks in records (not in
// capacity) when holders discard.
func TestFootprintCountsHolders(t *testing.T) {
	d, err := New(Config{Entries: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if f := d.Footprint(); f.Entries != 0 || f.Holders != 0 || f.MoreLists != 0 {
		t.Fatalf("empty directory: %+v", f)
	}
	const blocks = 8
	prev := d.Footprint().Bytes()
	for _, clients := range []int{10, 64, 200, 1000} {
		for c := 1; c <= clients; c++ {
			for i := range blocks {
				d.Request(0, ClientID(c), block.ID{File: 1, Index: uint64(i)}, 1)
			}
		}
		f := d.Footprint()
		if f.Entries != blocks || f.Holders != int64(clients*blocks) {
			t.Fatalf("%d clients: %d entries, %d holders, want %d and %d", clients, f.Entries, f.Holders, blocks, clients*blocks)
		}
		// client ids from 1: 63 of them fit a mask, the rest are listed
		if wantMore := clients >= maskClients; (f.MoreLists == blocks) != wantMore {
			t.Fatalf("%d clients: %d entries with holder lists", clients, f.MoreLists)
		}
		if clients > maskClients && f.MoreBytes < int64(blocks*(clients-maskClients+1)*4) {
			t.Fatalf("%d clients: holder lists of %d bytes, below 4 bytes a listed holder", clients, f.MoreBytes)
		}
		if f.Bytes() <= prev && clients > maskClients {
			t.Fatalf("%d clients: %d bytes, not more than %d", clients, f.Bytes(), prev)
		}
		prev = f.Bytes()
		t.Logf("%d clients: %+v, %d bytes (%.1f a holder)", clients, f, f.Bytes(), f.BytesPerHolder())
	}
	ids := []block.ID{{File: 1, Index: 0}}
	d.Discarded(500, ids)
	d.Discarded(5, ids)
	if f := d.Footprint(); f.Holders != 1000*blocks-2 {
		t.Fatalf("after two discards: %d holders", f.Holders)
	}
}
