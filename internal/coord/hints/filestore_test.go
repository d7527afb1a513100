package hints

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"

	"github.com/coopfs/coopfs/internal/block"
)

// TestBucketIsTwoLines pins the store's layout: a bucket is 128 bytes, a
// record 32.
func TestBucketIsTwoLines(t *testing.T) {
	if b, r := unsafe.Sizeof(fileBucket{}), unsafe.Sizeof(fileRec{}); b != 128 || r != 32 {
		t.Fatalf("bucket %d bytes, record %d: want 128 and 32", b, r)
	}
}

// TestSharedStoreChangesNothing drives two clusters through the same
// random operations: one whose clients (and server memory) keep their
// records in one shared FileStore, one whose participants keep their own.
// Every answer must be the same and every invariant hold. Seven clients
// and a server memory on few files overflow buckets, and block indexes past
// nearSlots use the far pages.
func TestSharedStoreChangesNothing(t *testing.T) {
	for _, dense := range []bool{true, false} {
		shared := NewFileStore(dense)
		a, sa := storeCluster(t, shared, dense)
		b, sb := storeCluster(t, nil, dense)
		rng := rand.New(rand.NewPCG(49, 13))
		var bufA, bufB []BlockHint
		for step := range 60000 {
			c := rng.IntN(len(a))
			f := uint64(rng.IntN(40))
			if !dense {
				f = f*1_000_003 + 7
			}
			idx := uint64(rng.IntN(6))
			if rng.IntN(8) == 0 {
				idx = nearSlots + uint64(rng.IntN(200))
			}
			bl, now := block.ID{File: f, Index: idx}, Time(step+1)
			var ga, gb any
			switch op := rng.IntN(12); {
			case op < 4:
				ga, gb = a[c].Read(now, bl, 0), b[c].Read(now, bl, 0)
			case op < 7:
				ga = a[c].Fill(now, bl, 1, op == 4, ClientID((c+1)%len(a)), 1, op == 5)
				gb = b[c].Fill(now, bl, 1, op == 4, ClientID((c+1)%len(b)), 1, op == 5)
			case op < 9:
				from, stamp := ClientID((c+2)%len(a)), now-Time(rng.IntN(50))
				ga = a[c].AcceptForward(now, from, 1, bl, 1, stamp, Time(step-30))
				gb = b[c].AcceptForward(now, from, 1, bl, 1, stamp, Time(step-30))
				ga, gb = ga.(ForwardAck).Victim, gb.(ForwardAck).Victim
			case op == 9:
				d := (c + 3) % len(a)
				bufA, bufB = a[d].ExportHints(f, bufA[:0]), b[d].ExportHints(f, bufB[:0])
				ga, gb = a[c].ImportHints(f, 1, bufA), b[c].ImportHints(f, 1, bufB)
			case op == 10 && rng.IntN(10) == 0:
				ga, gb = len(a[c].Invalidate(f)), len(b[c].Invalidate(f))
			default:
				stamp := now - Time(rng.IntN(100))
				ga, gb = sa.AcceptDiscard(bl, 1, stamp), sb.AcceptDiscard(bl, 1, stamp)
			}
			if !reflect.DeepEqual(ga, gb) {
				t.Fatalf("dense %v step %d: shared store %+v, own stores %+v", dense, step, ga, gb)
			}
			if step%997 == 0 {
				checkAll(t, a...)
				checkAll(t, b...)
				if err := shared.s.check(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if shared.s.len() <= shared.s.ids.n { // buckets in use, files
			t.Fatalf("dense %v: %d buckets for %d files: no chain was tested", dense, shared.s.len(), shared.s.ids.n)
		}
		if shared.s.cols != len(a)+1 {
			t.Fatalf("%d columns for %d participants", shared.s.cols, len(a)+1)
		}
	}
}

// storeCluster makes seven clients of 24 blocks and a discard cache of 40,
// keeping their records in files (nil: each its own store).
func storeCluster(t *testing.T, files *FileStore, dense bool) ([]*Client, *Server) {
	t.Helper()
	ids := []ClientID{0, 1, 2, 3, 4, 5, 6}
	cs := make([]*Client, len(ids))
	for i := range cs {
		c, err := NewClient(ClientConfig{ID: ids[i], Boot: 1, CacheBlocks: 24, Peers: ids, Discard: DiscardPessimistic,
			DenseFiles: dense, Files: files})
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	s, err := NewServer(ServerConfig{MemoryBlocks: 40, Memory: MemoryDiscard, Clients: ids, DenseFiles: dense, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return cs, s
}
