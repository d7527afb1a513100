package workload

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

func TestWriteHashRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	const size = 3<<20 + 77
	var last int64
	d, err := WriteFile(p, size, 7, func(n int64) { last = n })
	if err != nil || last != size {
		t.Fatalf("write: %v, progress %d", err, last)
	}
	if h, err := HashFile(p); err != nil || h != d {
		t.Fatalf("hash %v, %v; want %v", h.Short(), err, d.Short())
	}
	// Same seed, same bytes; another seed, other bytes.
	d2, _ := WriteFile(filepath.Join(dir, "g"), size, 7, nil)
	d3, _ := WriteFile(filepath.Join(dir, "h"), size, 8, nil)
	if d2 != d || d3 == d {
		t.Errorf("seeding: %v %v %v", d.Short(), d2.Short(), d3.Short())
	}
	var seen int64
	r, err := ReadFile(context.Background(), p, false, SeqOptions{Hash: true, BufSize: 1 << 20, Progress: func(n int64) { seen = n }})
	if err != nil || r.Bytes != size || r.Digest != d || seen != size {
		t.Fatalf("read %+v, %v", r, err)
	}
	if r.MBps() <= 0 {
		t.Error("no throughput")
	}
}

func TestReadSeqCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadSeq(ctx, bytes.NewReader(make([]byte, 10)), SeqOptions{}); err == nil {
		t.Error("read after cancel")
	}
}

func TestReadRandom(t *testing.T) {
	data := make([]byte, 1<<20)
	res, err := ReadRandom(context.Background(), bytes.NewReader(data), int64(len(data)), RandOptions{Threads: 3, Ops: 100})
	if err != nil || res.Ops != 300 {
		t.Fatalf("%+v, %v", res, err)
	}
	if _, err := ReadRandom(context.Background(), bytes.NewReader(data[:100]), 100, RandOptions{}); err == nil {
		t.Error("random reads of a file smaller than one block")
	}
}

func TestAlignedBuf(t *testing.T) {
	for _, n := range []int{1, 4096, 1 << 20} {
		b := AlignedBuf(n)
		if len(b) != n || uintptr(unsafe.Pointer(&b[0]))%4096 != 0 {
			t.Errorf("AlignedBuf(%d): len %d, misaligned", n, len(b))
		}
	}
}

func TestDirectAndDrop(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	d, err := WriteFile(p, 1<<20, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := DropFile(p); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p, true)
	if err != nil {
		t.Skip("O_DIRECT not supported here: ", err)
	}
	defer f.Close()
	r, err := ReadSeq(context.Background(), f, SeqOptions{Hash: true})
	if err != nil || r.Digest != d {
		t.Fatalf("O_DIRECT read: %+v %v", r, err)
	}
	_ = os.Remove(p)
}
