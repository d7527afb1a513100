package nscluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster/clustertest"
)

// TestWholeFileCrossover measures where the wholefile policy's
// coordination stops costing more than the data
// (docs/benchmarks-wholefile.md, "crossover"). It runs on request
// (COOPFS_WHOLEFILE_CROSSOVER=1; about a minute): two clusters in turn on
// the testbed (server and two clients, every link 100 Mbit/s), one whose
// mounts handle every file whole (--wholefile-min-size 0) and one whose
// mounts read every file from the server directly (the path below the
// threshold). In each, client 1 reads every file (from the server: under
// wholefile it becomes their holder), then client 2 reads every file; the
// time of each open+read+close is recorded, and the medians per size are
// compared side by side.
func TestWholeFileCrossover(t *testing.T) {
	if os.Getenv("COOPFS_WHOLEFILE_CROSSOVER") == "" {
		t.Skip("a measurement: run with COOPFS_WHOLEFILE_CROSSOVER=1")
	}
	if err := Unavailable(); err != nil {
		t.Skipf("the namespace testbed cannot run here: %v", err)
	}
	bin := clustertest.Binary(t)
	export := t.TempDir()
	sizes := []int{16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}
	const perSize = 9
	var names []string
	for _, s := range sizes {
		for i := 0; i < perSize; i++ {
			name := fmt.Sprintf("f%d-%d", s, i)
			b := make([]byte, s)
			for j := range b {
				b[j] = byte(j*7 + i + s)
			}
			if err := os.WriteFile(filepath.Join(export, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
	}
	modes := []struct{ name, min string }{{"wholefile", "0"}, {"direct", "1TiB"}}
	res := map[string]map[string][2]time.Duration{} // mode → file → (client 1, client 2)
	for _, m := range modes {
		c, err := Start(context.Background(), Config{Binary: bin, Clients: 2, ServerLink: "100mbit", ClientLink: "100mbit",
			Export: export, ServerArgs: []string{"--policy", "wholefile"}, MountArgs: []string{"--wholefile-min-size", m.min}})
		if err != nil {
			t.Fatal(err)
		}
		res[m.name] = map[string][2]time.Duration{}
		for ci, mnt := range c.Mounts {
			for _, n := range names {
				start := time.Now()
				if _, err := os.ReadFile(filepath.Join(mnt.Dir, n)); err != nil {
					c.Close()
					t.Fatal(err)
				}
				d := res[m.name][n]
				d[ci] = time.Since(start)
				res[m.name][n] = d
			}
		}
		cs, _ := c.Scrape(context.Background())
		if len(cs.Clients) == 2 {
			t.Logf("%s: client 2 chunks from peers %v, whole-file fetches %v", m.name,
				cs.Clients[1].Sum("coopfs_wholefile_segments_total", map[string]string{"source": "peer"}),
				cs.Clients[1].Sum("coopfs_wholefile_fetches_total", nil))
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("size | client 1 direct | client 1 wholefile | ratio | client 2 direct | client 2 wholefile (from client 1) | ratio")
	for _, s := range sizes {
		var med [2][2]time.Duration // mode, client
		for mi, m := range modes {
			for ci := 0; ci < 2; ci++ {
				var ds []time.Duration
				for i := 0; i < perSize; i++ {
					ds = append(ds, res[m.name][fmt.Sprintf("f%d-%d", s, i)][ci])
				}
				slices.Sort(ds)
				med[mi][ci] = ds[len(ds)/2]
			}
		}
		t.Logf("%d KiB | %v | %v | %.2f | %v | %v | %.2f", s>>10, med[1][0].Round(10*time.Microsecond), med[0][0].Round(10*time.Microsecond),
			float64(med[0][0])/float64(med[1][0]), med[1][1].Round(10*time.Microsecond), med[0][1].Round(10*time.Microsecond),
			float64(med[0][1])/float64(med[1][1]))
	}
}
