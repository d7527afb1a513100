package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/wire"
)

// TestWriteBackAttrsDuringFlush: while a file's write-back is under way
// the server's size of it grows block by block. Getattrs, fstats and
// opens racing the write-back must never show such a size, also when the
// server answered in the middle of the write-back and the answer arrives
// after it finished (issue 11: a short read after a write-back).
func TestWriteBackAttrsDuringFlush(t *testing.T) {
	const bs, blocks, rounds = 4096, 12, 60
	c := startServer(t, t.TempDir(), "127.0.0.1:0", nil, bs)
	a, err := agent.New(context.Background(), agent.Config{Server: c.addr, CacheSize: 16 << 20,
		ReconnectTimeout: 3 * time.Second, WritePolicy: cache.WriteBack,
		Disk:      agent.DiskConfig{Dir: filepath.Join(t.TempDir(), "cache"), Size: 16 << 20, Banks: 2, Assoc: 4},
		WriteBack: agent.WriteBackConfig{Delay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ctx := asRoot()
	f, _, err := a.Create(ctx, "f", syscall.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	var size uint64
	for round := range rounds {
		// Grow the file by a few blocks, then write it back while
		// readers ask for its size.
		for range blocks {
			if _, err := f.WriteAt(ctx, pattern(bs, byte(round)), int64(size)); err != nil {
				t.Fatal(err)
			}
			size += bs
		}
		var wg sync.WaitGroup
		done := make(chan struct{})
		bad := make(chan string, 8)
		check := func(what string, get func() (wire.Attr, error)) {
			defer wg.Done()
			for {
				at, err := get()
				if err != nil {
					bad <- what + ": " + err.Error()
					return
				}
				if at.Size != size {
					bad <- fmt.Sprintf("%s: size %d, want %d", what, at.Size, size)
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		}
		wg.Add(3)
		go check("getattr", func() (wire.Attr, error) { return a.GetAttr(ctx, "f") })
		go check("fstat", func() (wire.Attr, error) { return f.Attr(ctx) })
		go check("open", func() (wire.Attr, error) {
			g, at, err := a.Open(ctx, "f", syscall.O_RDONLY)
			if err == nil {
				g.Release(ctx)
			}
			return at, err
		})
		_, ferr := a.Flush(ctx, nil)
		close(done)
		wg.Wait()
		close(bad)
		if ferr != nil {
			t.Fatalf("round %d: flush: %v", round, ferr)
		}
		for msg := range bad {
			t.Fatalf("round %d: %s", round, msg)
		}
	}
}

// TestWriteBackRenameDuringFlush: a dirty file renamed while its
// write-back is opening it on the server is written back under its new
// name, not dropped as removed.
func TestWriteBackRenameDuringFlush(t *testing.T) {
	const bs, rounds = 4096, 40
	c := startServer(t, t.TempDir(), "127.0.0.1:0", nil, bs)
	a, err := agent.New(context.Background(), agent.Config{Server: c.addr, CacheSize: 16 << 20,
		ReconnectTimeout: 3 * time.Second, WritePolicy: cache.WriteBack,
		Disk:      agent.DiskConfig{Dir: filepath.Join(t.TempDir(), "cache"), Size: 16 << 20, Banks: 2, Assoc: 4},
		WriteBack: agent.WriteBackConfig{Delay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ctx := asRoot()
	for round := range rounds {
		from, to := fmt.Sprintf("r%d", round), fmt.Sprintf("r%d-moved", round)
		data := pattern(3*bs+round, byte(round))
		writeFile(t, a, from, data)
		flushed := make(chan error, 1)
		go func() {
			_, err := a.Flush(ctx, nil)
			flushed <- err
		}()
		if err := a.Rename(ctx, from, to, 0); err != nil {
			t.Fatal(err)
		}
		if err := <-flushed; err != nil {
			t.Fatalf("round %d: flush: %v", round, err)
		}
		if _, err := a.Flush(ctx, nil); err != nil {
			t.Fatalf("round %d: flush: %v", round, err)
		}
		got, err := os.ReadFile(filepath.Join(c.export, to))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round %d: the export's %s has %d bytes (%v), want %d", round, to, len(got), err, len(data))
		}
	}
}
