package nullfs

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/fusefs"
)

func requireFuse(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("FUSE mount needs root here")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		tb.Skip("no /dev/fuse: " + err.Error())
	}
}

func mount(tb testing.TB, size int64, cfg fusefs.Config) (string, *Stats) {
	tb.Helper()
	requireFuse(tb)
	ctx, cancel := context.WithCancel(context.Background())
	m, st, err := MountStats(ctx, tb.TempDir(), size, cfg)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cancel()
		if err := m.Unmount(); err != nil {
			tb.Errorf("unmount: %v", err)
		}
	})
	return filepath.Join(m.Dir(), FileName), st
}

// readAll reads the file with bufSize reads and checks every byte.
func readAll(tb testing.TB, path string, bufSize int) (int64, time.Duration) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, bufSize)
	var total int64
	start := time.Now()
	for {
		n, err := f.Read(buf)
		for i := 0; i < n; i += 4093 { // spot-check, cheaply
			if buf[i] != Byte(total+int64(i)) {
				tb.Fatalf("byte at %d is %d, want %d", total+int64(i), buf[i], Byte(total+int64(i)))
			}
		}
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	return total, time.Since(start)
}

func TestContentAndSize(t *testing.T) {
	const size = 3<<20 + 17
	p, _ := mount(t, size, fusefs.Config{})
	fi, err := os.Stat(p)
	if err != nil || fi.Size() != size {
		t.Fatalf("stat: %v, %v", fi, err)
	}
	got, err := os.ReadFile(p)
	if err != nil || len(got) != size {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	for i, b := range got {
		if b != Byte(int64(i)) {
			t.Fatalf("byte %d = %d, want %d", i, b, Byte(int64(i)))
		}
	}
	if _, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
		t.Error("opened the read-only file for writing")
	}
}

// TestThroughput reads 256 MiB (64 MiB with -short) through the mount with
// the coopfs options and with go-fuse's defaults, and logs MB/s. It asserts
// nothing about speed (the machine is shared).
func TestThroughput(t *testing.T) {
	size := int64(256 << 20)
	if testing.Short() {
		size = 64 << 20
	}
	for _, c := range []struct {
		name string
		cfg  fusefs.Config
	}{
		{"coopfs-options", fusefs.Config{}},
		{"gofuse-defaults", fusefs.Config{MaxWrite: 128 << 10, ReadAhead: -1}},
	} {
		p, st := mount(t, size, c.cfg)
		var best float64
		for range 3 {
			r0, b0 := st.Reads.Load(), st.Bytes.Load()
			n, d := readAll(t, p, 1<<20)
			if n != size {
				t.Fatalf("%s: read %d bytes, want %d", c.name, n, size)
			}
			// Every byte must come through FUSE: nullfs never lets the
			// kernel keep its page cache across opens.
			reads, bytes := st.Reads.Load()-r0, st.Bytes.Load()-b0
			if bytes < size {
				t.Errorf("%s: FUSE served %d bytes of %d: the page cache was kept", c.name, bytes, size)
			}
			best = max(best, float64(n)/d.Seconds()/1e6)
			t.Logf("%s: %.0f MB/s, %d FUSE reads of %d KiB on average", c.name, float64(n)/d.Seconds()/1e6, reads, bytes/max(reads, 1)>>10)
		}
		t.Logf("%s: %d MiB sequential, 1 MiB reads: best of 3 %.0f MB/s", c.name, size>>20, best)
	}
}

// BenchmarkRead measures sequential reads of a 256 MiB file through the
// mount with the coopfs options (each iteration reopens the file, which
// drops the kernel page cache since nullfs never sets KEEP_CACHE).
func BenchmarkRead(b *testing.B) {
	const size = 256 << 20
	p, _ := mount(b, size, fusefs.Config{})
	b.SetBytes(size)
	for b.Loop() {
		if n, _ := readAll(b, p, 1<<20); n != size {
			b.Fatalf("read %d bytes", n)
		}
	}
}
