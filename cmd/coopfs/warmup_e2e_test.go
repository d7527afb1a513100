package main

import (
	"bytes"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// warmTree writes a small tree into export: dir/a (3 MiB + a bit),
// dir/sub/b (1 MiB), dir/sub/c (100 bytes), top (2 MiB); it returns the
// files' contents by path and their total size.
func warmTree(t *testing.T, export string) (map[string][]byte, int64) {
	t.Helper()
	files := map[string][]byte{
		"dir/a":     make([]byte, 3<<20+777),
		"dir/sub/b": make([]byte, 1<<20),
		"dir/sub/c": make([]byte, 100),
		"top":       make([]byte, 2<<20),
	}
	var total int64
	for name, data := range files {
		rand.Read(data)
		total += int64(len(data))
		p := filepath.Join(export, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files, total
}

// TestE2EWarmup: `coopfs warmup` of a directory and a file fetches the
// whole tree once into the mount's caches, printing progress lines (stdout
// is not a terminal) and a summary; reading every file afterwards takes
// nothing more from the server, and the server sent the tree's bytes about
// once (≤ 1.1×).
func TestE2EWarmup(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	files, total := warmTree(t, export)
	srvMetrics := e2eFreeAddr(t)
	srv := startServer(t, export, "--metrics", srvMetrics)
	mAddr := e2eFreeAddr(t)
	m := startMount(t, srv.addr, "--metrics", mAddr, "--disk-cache", filepath.Join(t.TempDir(), "cache"),
		"--disk-cache-size", "64MiB", "--disk-banks", "4", "--disk-assoc", "4")

	p, code := runCoopfs(t, 60*time.Second, nil, "warmup", m.path("dir"), m.path("top"))
	out := p.stdout.String()
	if code != 0 {
		t.Fatalf("coopfs warmup: exit %d; stdout:\n%s\nstderr:\n%s", code, out, p.stderr.String())
	}
	t.Logf("coopfs warmup output:\n%s", out)
	if !strings.Contains(out, "warmup: 4 files") || !strings.Contains(out, "warmed up "+m.dir+": 4 files") {
		t.Errorf("warmup output:\n%s\nwant the listing line and the summary of 4 files", out)
	}
	afterWarm := serverBytes(scrapeReadBytes(t, srvMetrics))
	if afterWarm < float64(total) || afterWarm > 1.1*float64(total) {
		t.Errorf("the server sent %.0f bytes for a %d-byte tree; want between 1× and 1.1×", afterWarm, total)
	}
	for name, want := range files {
		got, err := os.ReadFile(m.path(name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %s after warm-up: %d bytes, %v; want its %d bytes", name, len(got), err, len(want))
		}
	}
	if after := serverBytes(scrapeReadBytes(t, mAddr)); after > afterWarm {
		t.Errorf("reading the warmed tree took %.0f bytes from the server; want none", after-afterWarm)
	}

	// A second warm-up finds everything cached: no server bytes.
	if p, code := runCoopfs(t, 60*time.Second, nil, "warmup", "--quiet", m.dir); code != 0 {
		t.Fatalf("second warmup: exit %d: %s", code, p.stderr.String())
	} else if strings.Contains(p.stdout.String(), "warmup:") {
		t.Errorf("--quiet printed progress:\n%s", p.stdout.String())
	}
	if again := serverBytes(scrapeReadBytes(t, srvMetrics)); again > afterWarm {
		t.Errorf("a second warm-up of a cached tree took %.0f bytes from the server; want none", again-afterWarm)
	}
}

// TestE2EWarmupBadInput: each mistake is one clear error line and a
// non-zero exit; the mount goes on working.
func TestE2EWarmupBadInput(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	warmTree(t, export)
	srv := startServer(t, export)
	m := startMount(t, srv.addr)
	elsewhere := t.TempDir()
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"NotUnderAMount", []string{"warmup", elsewhere}, []string{elsewhere, "not under a coopfs mount"}},
		{"Missing", []string{"warmup", m.path("nope")}, []string{"nope", "no such file"}},
		{"ClientsWithoutCluster", []string{"warmup", "--clients", "a", m.dir}, []string{"--cluster"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, code := runCoopfs(t, 30*time.Second, nil, c.args...)
			wantOneLineError(t, p, code, "coopfs warmup:", c.want...)
		})
	}
	t.Run("MountNotRunning", func(t *testing.T) {
		// A crashed mount leaves its socket behind: nobody answers it.
		dir := newMountpoint(t)
		path := controlSocket(dir)
		os.MkdirAll(filepath.Dir(path), 0o700)
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		defer os.Remove(path)
		p, code := runCoopfs(t, 30*time.Second, nil, "warmup", filepath.Join(dir, "x"))
		wantOneLineError(t, p, code, "coopfs warmup:", dir, "does not answer", "still running")
	})
	if got, err := os.ReadFile(m.path("dir/sub/c")); err != nil || len(got) != 100 {
		t.Errorf("the mount after the bad warm-ups: read %d bytes, %v", len(got), err)
	}
}
