package fusefs

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// xattrMem is memFS with extended attributes, counting the reads of
// security.capability that reach it.
type xattrMem struct {
	*memFS
	mu        sync.Mutex
	x         map[string]map[string][]byte
	capsReads atomic.Int64
}

func (m *xattrMem) GetXattr(ctx context.Context, path, name string, size uint32) ([]byte, uint32, error) {
	if name == capsName {
		m.capsReads.Add(1)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.x[path][name]
	if !ok {
		return nil, 0, syscall.ENODATA
	}
	return v, uint32(len(v)), nil
}

func (m *xattrMem) ListXattr(ctx context.Context, path string, size uint32) ([]byte, uint32, error) {
	return nil, 0, nil
}

func (m *xattrMem) SetXattr(ctx context.Context, path, name string, value []byte, flags uint32, _, _ uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.x[path] == nil {
		m.x[path] = map[string][]byte{}
	}
	m.x[path][name] = append([]byte(nil), value...)
	return nil
}

func (m *xattrMem) RemoveXattr(ctx context.Context, path, name string, _, _ uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.x[path][name]; !ok {
		return syscall.ENODATA
	}
	delete(m.x[path], name)
	return nil
}

// TestCapsReadOncePerWriter: the kernel reads security.capability before
// every write; while the mount holds the file open for writing, the
// mount answers from what it saw (a new file has none), and asks again
// after a setxattr through it and at the next open for writing.
func TestCapsReadOncePerWriter(t *testing.T) {
	requireFuse(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	b := &xattrMem{memFS: newMemFS(), x: map[string]map[string][]byte{}}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := Mount(ctx, dir, b, Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); m.Unmount() })
	p := filepath.Join(dir, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := f.Write(make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.capsReads.Load(); n != 0 {
		t.Errorf("20 writes to a file just created read security.capability %d times, want 0", n)
	}
	f.Close()

	f, err = os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		f.Write(make([]byte, 1000))
	}
	// At most once: the kernel may skip the read altogether while it
	// still knows the inode has no security attributes (S_NOSEC).
	if n := b.capsReads.Load(); n > 1 {
		t.Errorf("20 writes after an open for writing read security.capability %d times, want at most 1", n)
	}
	// A capability set through the mount is seen by the next write: the
	// kernel then drops it (removexattr), as on a local file system.
	// A VFS_CAP_REVISION_2 value granting CAP_NET_RAW (13), permitted.
	capV2 := make([]byte, 20)
	capV2[3] = 2    // magic_etc 0x02000000, little endian
	capV2[5] = 0x20 // bit 13 of the low permitted word
	if err := unix.Setxattr(p, capsName, capV2, 0); err != nil {
		t.Skipf("setxattr %s: %v", capsName, err)
	}
	before := b.capsReads.Load()
	f.Write(make([]byte, 1000))
	if b.capsReads.Load() == before {
		t.Error("the write after a setxattr did not read security.capability again")
	}
	f.Close()
	b.mu.Lock()
	_, still := b.x["f"][capsName]
	b.mu.Unlock()
	if still {
		t.Error("a write kept the file's capability")
	}
}
