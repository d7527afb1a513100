package sim

import (
	"sync"
	"testing"
)

// TestIDs checks the numbering: 1, 2, 3, ... in order of first appearance,
// reads and writes only, the same number for the same block, and lookups
// from another goroutine while Number runs (go test -race).
func TestIDs(t *testing.T) {
	var d IDs
	var batch []Access
	for i := range 5000 {
		op := []Op{OpRead, OpWrite, OpOpen, OpClose, OpDelete}[i%5]
		batch = append(batch, Access{File: uint64(i % 7), Block: uint64(i % 300), Op: op})
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			if id := d.Lookup(Key{File: 0, Block: 0}); id > 1 {
				t.Errorf("block (0, 0) numbered %d, want 1", id)
			}
		}
	}()
	d.Number(batch)
	wg.Wait()
	next := uint32(1)
	seen := map[Key]uint32{}
	for _, a := range batch {
		if a.Op != OpRead && a.Op != OpWrite {
			if a.ID != 0 {
				t.Fatalf("%v numbered %d", a.Op, a.ID)
			}
			continue
		}
		want, ok := seen[a.Key()]
		if !ok {
			want = next
			seen[a.Key()] = want
			next++
		}
		if a.ID != want || d.Key(a.ID) != a.Key() || d.Lookup(a.Key()) != want {
			t.Fatalf("%v: number %d, want %d", a.Key(), a.ID, want)
		}
	}
	if d.Len() != len(seen) || d.ID(Key{File: 99}) != uint32(len(seen)+1) || d.Lookup(Key{File: 98}) != 0 {
		t.Fatalf("len %d, want %d; a new block is not numbered next", d.Len(), len(seen))
	}
}

// TestFileIDs checks the file numbering: every access that names a file
// gets the same number for the same file, numbers are given in order of
// first appearance (a block's file when the block is first numbered), and
// FileID agrees with Number.
func TestFileIDs(t *testing.T) {
	var d IDs
	d.NumberFiles()
	var batch []Access
	for i := range 3000 {
		op := []Op{OpRead, OpWrite, OpOpen, OpClose, OpDelete}[i%5]
		batch = append(batch, Access{File: uint64(i*7919) % 101, Block: uint64(i % 13), Op: op})
	}
	d.Number(batch)
	next := uint32(1)
	seen := map[uint64]uint32{}
	for _, a := range batch {
		want, ok := seen[a.File]
		if !ok {
			want = next
			seen[a.File] = want
			next++
		}
		if a.FileID != want || d.FileID(a.File) != want {
			t.Fatalf("file %d (%v): number %d, want %d", a.File, a.Op, a.FileID, want)
		}
	}
}

// BenchmarkNumber numbers a Zipf trace's blocks as the reading goroutine
// does (Number, in Run's batches): the per-access cost of dense numbers.
func BenchmarkNumber(b *testing.B) {
	w, _ := Generate(GenConfig{Pattern: GenZipf, Clients: 1, Accesses: 2000000, Files: 100000, Seed: 1})
	acc, _ := Collect(w)
	for _, files := range []bool{false, true} {
		b.Run(map[bool]string{false: "blocks", true: "files"}[files], func(b *testing.B) {
			work := make([]Access, len(acc))
			n := 0
			cpu0 := cpuTime()
			for b.Loop() {
				copy(work, acc)
				var d IDs
				if files {
					d.NumberFiles()
				}
				for i := 0; i < len(work); i += prefetchBatch {
					d.Number(work[i:min(i+prefetchBatch, len(work))])
				}
				n += len(work)
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n), "cpu-ns/access")
		})
	}
}
