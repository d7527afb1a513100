package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/fusefs/posixtest"
	"github.com/coopfs/coopfs/internal/obs"
)

// scrape reads a process's /metrics.
func scrape(t *testing.T, addr string) obs.Samples {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ss, err := obs.Fetch(ctx, addr)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	return ss
}

// scrapeReadBytes returns coopfs_read_bytes_total by layer from a
// process's /metrics.
func scrapeReadBytes(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	return scrape(t, addr).SumBy("coopfs_read_bytes_total", "layer", nil)
}

func serverBytes(m map[string]float64) float64 { return m["server_memory"] + m["server_disk"] }

// TestE2EDiskCacheRestart: a mount with --disk-cache reads a file from the
// server; a new mount process on the same cache directory (a real restart)
// reads it again from its disk cache without fetching any of it from the
// server, after revalidating the file's version at open; a file changed
// on the server meanwhile is fetched afresh.
func TestE2EDiskCacheRestart(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	cacheDir := filepath.Join(t.TempDir(), "cache")
	want := make([]byte, 6<<20+12345)
	rand.Read(want)
	other := bytes.Repeat([]byte("version one\n"), 1<<17) // 1.5 MiB: two blocks
	for name, data := range map[string][]byte{"big": want, "other": other} {
		if err := os.WriteFile(filepath.Join(export, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServer(t, export)
	mount := func() (*e2eMount, string) {
		addr := e2eFreeAddr(t)
		m := startMount(t, srv.addr, "--disk-cache", cacheDir, "--disk-cache-size", "64MiB",
			"--disk-banks", "4", "--disk-assoc", "4", "--metrics", addr)
		return m, addr
	}
	read := func(m *e2eMount, name string, want []byte) {
		t.Helper()
		var got []byte
		err := within(t, 30*time.Second, "read "+name, func() (err error) {
			got, err = os.ReadFile(m.path(name))
			return err
		})
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %s through %s: %d bytes, err %v; want the %d bytes written", name, m.dir, len(got), err, len(want))
		}
	}

	m1, addr1 := mount()
	read(m1, "big", want)
	read(m1, "other", other)
	first := scrapeReadBytes(t, addr1)
	if serverBytes(first) < float64(len(want)) {
		t.Fatalf("first mount: %v; want the file read from the server", first)
	}
	m1.cleanup(t) // SIGTERM: the mount process exits; the cache stays

	if err := os.WriteFile(filepath.Join(export, "other"), []byte("version two, longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m2, addr2 := mount()
	read(m2, "big", want)
	second := scrapeReadBytes(t, addr2)
	if serverBytes(second) != 0 || second["local_disk"] != float64(len(want)) {
		t.Fatalf("restarted mount read an unchanged file: %v; want all %d bytes from local_disk, none from the server", second, len(want))
	}
	read(m2, "other", []byte("version two, longer\n"))
	if got := scrapeReadBytes(t, addr2); serverBytes(got) != float64(len("version two, longer\n")) {
		t.Fatalf("restarted mount read a changed file: %v; want it fetched from the server", got)
	}
	// The changed file's two old blocks were dropped at open and its one
	// new block stored (in the background): the disk tier holds the big
	// file's 7 blocks and 1 of "other".
	deadline := time.Now().Add(5 * time.Second)
	for n := 0.0; n != 8; {
		if n = scrape(t, addr2).Sum("coopfs_cache_entries", map[string]string{"tier": "local_disk"}); n != 8 && time.Now().After(deadline) {
			t.Fatalf("disk tier holds %v blocks; want 7 of big and 1 of other", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2EDiskCacheBadFlags: disk cache flags that cannot work are refused
// with one line, and nothing is mounted; a cache directory in use by
// another mount is refused too.
func TestE2EDiskCacheBadFlags(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	srv := startServer(t, export)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--disk-cache-size", "1GiB"}, []string{"--disk-cache-size", "without --disk-cache"}},
		{[]string{"--disk-cache", cacheDir, "--disk-assoc", "1"}, []string{"associativity 1", "at least 2"}},
		{[]string{"--disk-cache", cacheDir, "--disk-cache-size", "1MiB", "--disk-banks", "8"}, []string{"fewer than banks"}},
	} {
		dir := newMountpoint(t)
		args := append([]string{"mount", "--server", srv.addr}, c.args...)
		p, code := runCoopfs(t, 10*time.Second, nil, append(args, dir)...)
		wantOneLineError(t, p, code, "coopfs mount:", c.want...)
		if e2eIsMounted(dir) {
			t.Errorf("%s is mounted after a refused mount", dir)
		}
	}
	startMount(t, srv.addr, "--disk-cache", cacheDir, "--disk-cache-size", "64MiB")
	dir := newMountpoint(t)
	p, code := runCoopfs(t, 10*time.Second, nil, "mount", "--server", srv.addr, "--disk-cache", cacheDir, "--disk-cache-size", "64MiB", dir)
	wantOneLineError(t, p, code, "coopfs mount:", "in use by another process")
}

// TestE2EDiskCacheConsistency: a client whose memory tier holds one block
// reads through its disk tier, and still sees every change another client
// makes (close-to-open), before and after it is restarted on the same
// cache directory; the POSIX suite passes on its mount.
func TestE2EDiskCacheConsistency(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	a := startMount(t, srv.addr, "--name", "A")
	cacheDir := filepath.Join(t.TempDir(), "cache")
	mountB := func() *e2eMount {
		return startMount(t, srv.addr, "--name", "B", "--cache-size", "1MiB", "--disk-cache", cacheDir,
			"--disk-cache-size", "64MiB", "--disk-banks", "4", "--disk-assoc", "4")
	}
	b := mountB()
	data := patterned(3<<20+777, 21)
	mustWrite(t, a.path("f"), data)
	wantFile(t, "B first read", b.path("f"), data)
	wantFile(t, "B second read (from its disk tier)", b.path("f"), data)
	patch := func(seed byte, off int64) {
		t.Helper()
		f, err := os.OpenFile(a.path("f"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		p := bytes.Repeat([]byte{seed}, 4096)
		if _, err := f.WriteAt(p, off); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		copy(data[off:], p)
	}
	patch(0xAB, 1<<20+100)
	wantFile(t, "B after A patched the middle", b.path("f"), data)
	b.cleanup(t)
	patch(0xCD, 2<<20+5)
	b = mountB()
	wantFile(t, "restarted B after A patched while it was down", b.path("f"), data)
	mustWrite(t, a.path("f"), []byte("short now"))
	wantFile(t, "B after A shrank the file", b.path("f"), []byte("short now"))
	t.Run("Posix", func(t *testing.T) { posixtest.Run(t, b.dir) })
}
