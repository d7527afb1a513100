package proxy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/proxy"
)

// TestWriteThroughAppendAtStaleOffset: an append sent at a stale offset
// (the client's kernel still saw the file empty) lands at the server's end
// of file; the write-through proxy and the writer keep it there, not at the
// offset the write named: the writer, another client behind the proxy and
// a client of the server read what the server holds.
func TestWriteThroughAppendAtStaleOffset(t *testing.T) {
	export := t.TempDir()
	first, appended := pattern(bs, 1), pattern(bs, 2)
	if err := os.WriteFile(filepath.Join(export, "log"), first, 0o644); err != nil {
		t.Fatal(err)
	}
	srvAddr, _ := serve(t, export)
	p, _ := startProxy(t, srvAddr, proxy.Config{WritePolicy: cache.WriteThrough})
	writer, reader, direct := newAgent(t, p), newAgent(t, p), newAgent(t, srvAddr)
	f, _, err := writer.Open(ctx(), "log", syscall.O_RDWR|syscall.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx())
	if _, err := f.WriteAt(ctx(), appended, 0); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte(nil), first...), appended...)
	if got, _ := os.ReadFile(filepath.Join(export, "log")); !bytes.Equal(got, want) {
		t.Fatalf("the export holds %d bytes, not the file and the append after it", len(got))
	}
	buf := make([]byte, 2*bs)
	if n, err := f.ReadAt(ctx(), buf, 0); err != nil || !bytes.Equal(buf[:n], want) {
		t.Errorf("the writer reads %d bytes (err %v), not what the server holds (block 0 is the append: %v)", n, err, bytes.Equal(buf[:min(n, bs)], appended))
	}
	if got := read(t, reader, "log"); !bytes.Equal(got, want) {
		t.Errorf("a client behind the proxy reads %d bytes, not what the server holds (block 0 is the append: %v)", len(got), bytes.Equal(got[:min(len(got), bs)], appended))
	}
	if got := read(t, direct, "log"); !bytes.Equal(got, want) {
		t.Errorf("a client of the server reads %d bytes, not what the server holds", len(got))
	}
}
