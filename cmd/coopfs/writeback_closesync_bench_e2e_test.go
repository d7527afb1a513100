package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestBenchWriteBackCloseSync measures what the sync at close of a
// write-back mount (--write-back-close-sync, the default) costs: two
// write-back mounts of one server on loopback, one with it and one
// without, take turns writing a tree of small files (create, write,
// close); docs/benchmarks-disk.md quotes the medians. Runs only with
// COOPFS_BENCH_CLOSESYNC=1; COOPFS_BENCH_RUNS sets the runs (default 5).
func TestBenchWriteBackCloseSync(t *testing.T) {
	if os.Getenv("COOPFS_BENCH_CLOSESYNC") != "1" {
		t.Skip("set COOPFS_BENCH_CLOSESYNC=1 to run the close-sync benchmark")
	}
	needFUSE(t)
	runs := 5
	fmt.Sscan(os.Getenv("COOPFS_BENCH_RUNS"), &runs)
	const files, size = 200, 16 << 10
	srv := startServer(t, newExport(t), "--block-size", "64KiB")
	flags := []string{"--write-back-delay", "1h", "--disk-cache-size", "512MiB"}
	mounts := map[string]*e2eMount{
		"close-sync":    wbMount(t, srv, filepath.Join(t.TempDir(), "c1"), flags...),
		"no-close-sync": wbMount(t, srv, filepath.Join(t.TempDir(), "c2"), append(flags, "--write-back-close-sync=false")...),
	}
	data := patterned(size, 1)
	res := map[string][]time.Duration{}
	for run := 0; run < runs; run++ {
		for _, name := range []string{"close-sync", "no-close-sync"} {
			m := mounts[name]
			dir := m.path(fmt.Sprintf("%s-run%d", name, run))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for i := 0; i < files; i++ {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			d := time.Since(start)
			res[name] = append(res[name], d)
			t.Logf("run %d %-13s %d files of %d KiB in %v (%v per file)", run, name, files, size>>10, d.Round(time.Millisecond), (d / files).Round(time.Microsecond))
		}
	}
	med := func(ds []time.Duration) time.Duration {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	var ratios []float64
	for i := range res["close-sync"] {
		ratios = append(ratios, float64(res["close-sync"][i])/float64(res["no-close-sync"][i]))
	}
	slices.Sort(ratios)
	on, off := med(res["close-sync"]), med(res["no-close-sync"])
	t.Logf("median per file: close-sync %v, no-close-sync %v; median per-run ratio %.2f",
		(on / files).Round(time.Microsecond), (off / files).Round(time.Microsecond), ratios[len(ratios)/2])
}
