package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/bench/testbed"
)

// TestBenchWriteBackWAN is the write-back benchmark of docs/benchmarks-disk.md
// (seed 003): a build-like job on one client behind a 10 Mbit/s server link
// (the namespace testbed, tbf), with no disk cache, a write-through disk
// cache and a write-back disk cache. Runs only with COOPFS_BENCH_WRITEBACK=1
// (it takes a few minutes); COOPFS_BENCH_RUNS sets the runs (default 3).
func TestBenchWriteBackWAN(t *testing.T) {
	if os.Getenv("COOPFS_BENCH_WRITEBACK") != "1" {
		t.Skip("set COOPFS_BENCH_WRITEBACK=1 to run the write-back WAN benchmark")
	}
	needFUSE(t)
	if err := testbed.CheckPrereqs(); err != nil {
		t.Skip(err)
	}
	runs := 3
	fmt.Sscan(os.Getenv("COOPFS_BENCH_RUNS"), &runs)
	archive := buildTree(t, 300, 7)
	modes := []struct {
		name  string
		flags []string
	}{
		{"no disk cache", nil},
		{"write-through", []string{"--disk-cache", "", "--write-policy", "write-through"}},
		{"write-back", []string{"--disk-cache", "", "--write-policy", "write-back", "--write-back-delay", "1h"}},
		{"write-back, no close sync", []string{"--disk-cache", "", "--write-policy", "write-back", "--write-back-delay", "1h",
			"--write-back-close-sync=false"}},
	}
	res := map[string][][2]time.Duration{}
	for run := 0; run < runs; run++ {
		for _, m := range modes {
			if only := os.Getenv("COOPFS_BENCH_MODE"); only != "" && only != m.name {
				continue
			}
			job, total := wanBuildRun(t, archive, m.flags)
			t.Logf("run %d %-14s job %v, job+flush %v", run, m.name, job.Round(time.Millisecond), total.Round(time.Millisecond))
			res[m.name] = append(res[m.name], [2]time.Duration{job, total})
		}
	}
	median := func(ds [][2]time.Duration, i int) time.Duration {
		var v []time.Duration
		for _, d := range ds {
			v = append(v, d[i])
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	if len(res) < len(modes) {
		return
	}
	base := median(res["no disk cache"], 0)
	var b strings.Builder
	fmt.Fprintf(&b, "| mode | job (median of %d) | speed-up | job + flush | speed-up |\n| --- | ---: | ---: | ---: | ---: |\n", runs)
	for _, m := range modes {
		j, tot := median(res[m.name], 0), median(res[m.name], 1)
		fmt.Fprintf(&b, "| %s | %.2f s | %.2f× | %.2f s | %.2f× |\n", m.name, j.Seconds(), base.Seconds()/j.Seconds(), tot.Seconds(), base.Seconds()/tot.Seconds())
	}
	t.Logf("results:\n%s", b.String())
}

// buildTree returns a tar of a source tree: n files in 10 directories,
// sizes from 1 to about 50 KiB (a few larger), deterministic.
func buildTree(t *testing.T, n int, seed uint64) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for d := 0; d < 10; d++ {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("src/d%d/", d), Mode: 0o755, Typeflag: tar.TypeDir})
	}
	for i := 0; i < n; i++ {
		size := 1024 + int(seed*uint64(i+1)*2654435761%uint64(48<<10))
		if i%50 == 0 {
			size = 400 << 10
		}
		data := patterned(size, seed+uint64(i))
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("src/d%d/f%03d.c", i%10, i), Mode: 0o644, Size: int64(size)}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	tw.Close()
	return buf.Bytes()
}

// wanBuildRun mounts a server behind a 10 Mbit/s link with the mount flags
// (an empty --disk-cache value is replaced by a fresh directory) and runs
// the job: untar the tree, "compile" every source (read it, write an
// object of the same size), read every object back; caches are dropped
// between the phases, as a build larger than memory would see. It returns
// the job's time and the time until the data is on the server.
func wanBuildRun(t *testing.T, archive []byte, flags []string) (job, total time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tb, err := testbed.New(ctx, testbed.Config{Clients: 1, ServerLink: "10mbit"})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	srv, cl := tb.Server(), tb.Clients()[0]
	export := filepath.Join(srv.Dir(), "export")
	os.MkdirAll(export, 0o755)
	addr := srv.AddrPort(7000).String()
	sp, err := srv.Start(ctx, []string{e2e.bin, "serve", "--export", export, "--block-size", "64KiB", "--listen", addr, "--secret-file", e2e.secret, "--squash", "none"}, nil, "serve.log")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitTCP(ctx, addr, sp); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(cl.Dir(), "mnt")
	os.Mkdir(mnt, 0o755)
	args := []string{e2e.bin, "mount", "--server", addr, "--secret-file", e2e.secret}
	for i := 0; i < len(flags); i++ {
		args = append(args, flags[i])
		if flags[i] == "--disk-cache" {
			args = append(args, filepath.Join(cl.Dir(), "cache"))
			i++
		}
	}
	mp, err := cl.Start(ctx, append(args, mnt), nil, "mount.log")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !e2eIsMounted(mnt) {
		select {
		case <-mp.Done():
			t.Fatalf("mount exited:\n%s", mp.LogTail(20))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not mounted within 20s:\n%s", mp.LogTail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	dropCaches := func() { exec.Command("sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches").Run() }
	start := time.Now()
	untar := exec.Command("tar", "-x", "-C", mnt)
	untar.Stdin = bytes.NewReader(archive)
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("untar: %v\n%s", err, out)
	}
	tUntar := time.Since(start)
	dropCaches()
	var objs []string
	filepath.WalkDir(filepath.Join(mnt, "src"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		obj := strings.TrimSuffix(p, ".c") + ".o"
		for i := range src {
			src[i] ^= 0x5a
		}
		if err := os.WriteFile(obj, src, 0o644); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
		return nil
	})
	tCompile := time.Since(start)
	dropCaches()
	var sum byte
	for _, o := range objs {
		b, err := os.ReadFile(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range b {
			sum += c
		}
	}
	job = time.Since(start)
	t.Logf("phases: untar %v, compile %v, read %v", tUntar.Round(time.Millisecond), (tCompile - tUntar).Round(time.Millisecond), (job - tCompile).Round(time.Millisecond))
	if slices.Contains(flags, "write-back") {
		if out, err := exec.Command(e2e.bin, "flush", "--quiet", mnt).CombinedOutput(); err != nil {
			t.Fatalf("flush: %v\n%s", err, out)
		}
	}
	total = time.Since(start)
	// The export must hold the job's output.
	if _, err := os.Stat(filepath.Join(export, strings.TrimPrefix(objs[len(objs)-1], mnt))); err != nil {
		t.Fatalf("the export lacks the job's output: %v", err)
	}
	mp.Stop()
	return job, total
}
