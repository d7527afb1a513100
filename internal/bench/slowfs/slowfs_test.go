package slowfs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func mountT(t *testing.T, lat time.Duration) (*FS, string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("FUSE mount needs root here")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse: " + err.Error())
	}
	backing, mnt := t.TempDir(), t.TempDir()
	s, err := Mount(context.Background(), Config{Backing: backing, Mountpoint: mnt, Latency: lat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return s, backing, mnt
}

// Every read through the mount reaches the file system (no page cache),
// waits for the disk and returns the backing file's bytes; writes and
// creates pass through.
func TestReadsAreSlowAndUncached(t *testing.T) {
	s, backing, mnt := mountT(t, time.Millisecond)
	want := bytes.Repeat([]byte("slow disk "), 3000)
	if err := os.WriteFile(filepath.Join(backing, "a"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		before := s.Reads()
		got, err := os.ReadFile(filepath.Join(mnt, "a"))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d: %d bytes, %v", i, len(got), err)
		}
		if s.Reads() == before {
			t.Fatalf("read %d was served without reaching the file system (page cache?)", i)
		}
	}
	if err := os.MkdirAll(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "d", "b"), want[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "d", "b")); err != nil || !bytes.Equal(got, want[:100]) {
		t.Fatalf("write through the mount: backing has %d bytes, %v", len(got), err)
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []Config{{Mountpoint: "m"}, {Backing: "b"}, {Backing: "b", Mountpoint: "m", Latency: -1}} {
		if _, err := Mount(context.Background(), c); err == nil {
			t.Errorf("Mount(%+v) accepted", c)
		}
	}
}
