package disk

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/cachetest"
	"github.com/coopfs/coopfs/internal/cache/mem"
)

// BenchmarkRead compares reading 1 MiB blocks, all cached, from the memory
// tier (copied out, as a reply would be), from the disk tier (pread from the
// page cache, checksum; Get allocating each block, GetInto reusing one
// buffer), and from the bank files directly with pread into
// one reused buffer: the ceiling the disk tier runs against.
// docs/benchmarks-disk.md quotes it.
func BenchmarkRead(b *testing.B) {
	const bs, n = 1 << 20, 64
	dir := b.TempDir()
	dc, err := Open(Config{Dir: dir, Size: 2 * n * bs, BlockSize: bs, Banks: 4, Assoc: 4, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer dc.Close()
	mc, _ := mem.New(mem.Config{Capacity: 2 * n * bs})
	ids := make([]block.ID, n)
	for i := range ids {
		ids[i] = block.ID{File: 1, Index: uint64(i)}
		d := cachetest.Data(ids[i], 1, bs)
		dc.Put(ids[i], 1, d)
		mc.Put(ids[i], 1, d)
	}
	dst := make([]byte, bs)
	b.Run("mem", func(b *testing.B) {
		b.SetBytes(bs)
		for i := 0; b.Loop(); i++ {
			d, ok := mc.Get(ids[i%n], 1)
			if !ok {
				b.Fatal("miss")
			}
			copy(dst, d)
		}
	})
	b.Run("disk", func(b *testing.B) {
		b.SetBytes(bs)
		for i := 0; b.Loop(); i++ {
			if _, ok := dc.Get(ids[i%n], 1); !ok {
				b.Fatal("miss")
			}
		}
	})
	b.Run("disk-into", func(b *testing.B) {
		b.SetBytes(bs)
		for i := 0; b.Loop(); i++ {
			if _, ok := dc.GetInto(ids[i%n], 1, dst); !ok {
				b.Fatal("miss")
			}
		}
	})
	b.Run("bankfiles", func(b *testing.B) {
		var files []*os.File
		for i := range dc.g.Banks {
			f, err := os.Open(filepath.Join(dir, "bank-000"+string(rune('0'+i))))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			files = append(files, f)
		}
		// The frames the blocks sit in, read straight from their files.
		type loc struct {
			f   *os.File
			off int64
		}
		locs := make([]loc, n)
		for i, id := range ids {
			bn, _ := dc.place(id)
			fr, _ := dc.banks[bn].b.lookup(id)
			locs[i] = loc{files[bn], dc.g.frameOff(fr)}
		}
		b.SetBytes(bs)
		for i := 0; b.Loop(); i++ {
			l := locs[i%n]
			if _, err := l.f.ReadAt(dst, l.off); err != nil {
				b.Fatal(err)
			}
		}
	})
}
