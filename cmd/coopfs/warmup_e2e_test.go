package main

import (
	"bytes"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
		{"ClusterUnderNone", []string{"warmup", "--cluster", m.dir}, []string{"policy none", "peers"}},
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

// TestE2EWarmupCluster: under the directory, hints and wholefile policies, `coopfs warmup
// --cluster` on one of three mounts warms all three: the server sends the
// tree about once (≤ 1.1×), each mount took the rest from its peers, and
// reading the tree on any mount afterwards takes nothing from the server.
// --clients picks a subset by name; an unknown name is one clear error.
func TestE2EWarmupCluster(t *testing.T) {
	needFUSE(t)
	for _, policy := range []string{"directory", "hints", "wholefile"} {
		t.Run(policy, func(t *testing.T) { warmupCluster(t, policy) })
	}
}

func warmupCluster(t *testing.T, policy string) {
	export := t.TempDir()
	files, total := warmTree(t, export)
	srvMetrics := e2eFreeAddr(t)
	srv := startServer(t, export, "--policy", policy, "--metrics", srvMetrics)
	var ms []*e2eMount
	var addrs []string
	for _, name := range []string{"c1", "c2", "c3"} {
		addr := e2eFreeAddr(t)
		ms = append(ms, startMount(t, srv.addr, "--name", name, "--metrics", addr, "--warmup-accept",
			"--disk-cache", filepath.Join(t.TempDir(), "cache"), "--disk-cache-size", "64MiB"))
		addrs = append(addrs, addr)
	}
	p, code := runCoopfs(t, 30*time.Second, nil, "warmup", "--cluster", "--clients", "c1,nosuch", ms[0].dir)
	wantOneLineError(t, p, code, "coopfs warmup:", "nosuch", "c1, c2, c3")

	p, code = runCoopfs(t, 120*time.Second, nil, "warmup", "--cluster", ms[0].path("dir"), ms[0].path("top"))
	if code != 0 {
		t.Fatalf("coopfs warmup --cluster: exit %d; stdout:\n%s\nstderr:\n%s", code, p.stdout.String(), p.stderr.String())
	}
	out := p.stdout.String()
	t.Logf("coopfs warmup --cluster:\n%s", out)
	if !strings.Contains(out, "warmed up "+ms[0].dir+" on 3 clients: 4 files") {
		t.Errorf("output:\n%s\nwant the summary of 4 files", out)
	}
	warmed := serverBytes(scrapeReadBytes(t, srvMetrics))
	t.Logf("server sent %.0f bytes for a %d-byte tree warmed on 3 clients (%.2f×)", warmed, total, warmed/float64(total))
	if warmed > 1.1*float64(total) {
		t.Errorf("the server sent %.0f bytes for a %d-byte tree on 3 clients; want ≤ 1.1× the tree", warmed, total)
	}
	for i, m := range ms {
		before := scrapeReadBytes(t, addrs[i])
		if before["peer"] == 0 {
			t.Errorf("mount %d took nothing from its peers during the warm-up: %v", i+1, before)
		}
		for name, want := range files {
			got, err := os.ReadFile(m.path(name))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("mount %d: read %s: %d bytes, %v", i+1, name, len(got), err)
			}
		}
		if after := scrapeReadBytes(t, addrs[i]); serverBytes(after)+after["peer"] > serverBytes(before)+before["peer"] {
			t.Errorf("mount %d: reading the warmed tree fetched more: %v -> %v", i+1, before, after)
		}
	}
}

// TestE2EWarmupClusterClientDies: a client that dies before it fetched its
// share has the share fetched by the others; the warm-up ends and the
// server still sends the tree about once.
func TestE2EWarmupClusterClientDies(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	files, total := warmTree(t, export)
	srvMetrics := e2eFreeAddr(t)
	srv := startServer(t, export, "--policy", "directory", "--metrics", srvMetrics)
	a := startMount(t, srv.addr, "--name", "a", "--warmup-accept")
	b := startMount(t, srv.addr, "--name", "b", "--warmup-accept")
	c := startMount(t, srv.addr, "--name", "c", "--warmup-accept")
	c.signal(syscall.SIGSTOP) // c takes its assignment and never answers
	warm := startProc(t, "warmup", "warmup", "--cluster", a.dir)
	time.Sleep(time.Second)
	c.signal(syscall.SIGKILL) // its connection closes: the server reassigns its share
	if _, ok := c.wait(10 * time.Second); !ok {
		// Rarely a thread of the stopped daemon sits in an uninterruptible
		// FUSE wait: abort the connection, which ends it.
		abortFUSE(t, c.dir)
		c.wait(10 * time.Second)
	}
	syscall.Unmount(c.dir, syscall.MNT_DETACH) // a killed mount leaves its mount point behind
	code, ok := warm.wait(120 * time.Second)
	if !ok || code != 0 {
		t.Fatalf("warmup --cluster with a dying client: exit %d (finished %v); stdout:\n%s\nstderr:\n%s", code, ok, warm.stdout.String(), warm.stderr.String())
	}
	if log := srv.stderr.String(); !strings.Contains(log, "left a cluster warm-up") && !strings.Contains(log, "dropping it from the job") {
		t.Errorf("the server did not log the client leaving; stderr:\n%s", srv.stderr.String())
	}
	got := serverBytes(scrapeReadBytes(t, srvMetrics))
	if got > 1.1*float64(total) {
		t.Errorf("the server sent %.0f bytes for a %d-byte tree; want ≤ 1.1×", got, total)
	}
	for name, want := range files {
		if data, err := os.ReadFile(b.path(name)); err != nil || !bytes.Equal(data, want) {
			t.Fatalf("b: read %s: %d bytes, %v", name, len(data), err)
		}
	}
	if after := serverBytes(scrapeReadBytes(t, srvMetrics)); after > got {
		t.Errorf("reading the tree on b after the warm-up took %.0f bytes from the server; want none", after-got)
	}
}

// abortFUSE aborts the FUSE connection of the mount at dir (found in
// /proc/self/mountinfo, without touching the mount itself).
func abortFUSE(t *testing.T, dir string) {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(info), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && f[4] == dir {
			_, minor, _ := strings.Cut(f[2], ":")
			err := os.WriteFile("/sys/fs/fuse/connections/"+minor+"/abort", []byte("1"), 0o200)
			t.Logf("aborted the FUSE connection of %s (device %s): %v", dir, f[2], err)
		}
	}
}
