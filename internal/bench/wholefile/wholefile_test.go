package wholefile

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/coopfs/coopfs/internal/bench/cluster/clustertest"
	"github.com/coopfs/coopfs/internal/bench/nscluster"
)

// TestZipf: rank 0 is drawn most often, every draw is in range.
func TestZipf(t *testing.T) {
	z := newZipf(100, 1)
	counts := make([]int, 100)
	for range 10000 {
		counts[z.next()]++
	}
	if counts[0] < counts[1] || counts[1] < counts[50] {
		t.Fatalf("draws by rank: %v; want decreasing", counts[:10])
	}
}

// TestTinyRun runs every experiment at a tiny size on the namespace
// testbed for none and directory (and a policy the server does not know,
// which is skipped), and checks the shape of the report and the warm-up
// bound: the cluster warm-up takes the tree from the server about once,
// the independent ones once per client.
func TestTinyRun(t *testing.T) {
	if testing.Short() {
		t.Skip("the namespace testbed: not under -short")
	}
	if err := nscluster.Unavailable(); err != nil {
		t.Skipf("the namespace testbed cannot run here: %v", err)
	}
	bin := clustertest.Binary(t)
	var progress bytes.Buffer
	r, err := Run(context.Background(), Config{Binary: bin, Policies: []string{"none", "directory", "nosuchpolicy"},
		StaggerSize: 2 << 20, StaggerClients: 3, WebFiles: 20, WebMean: 8 << 10, WebReads: 20, WebClients: 2,
		OverloadSize: 2 << 20, OverheadSizes: []int64{1 << 20}, OverheadReps: 1,
		WarmSize: 4 << 20, WarmFiles: 4, WarmClients: 3, ServerLink: "1gbit", ClientLink: "1gbit", Progress: &progress})
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", out.String())
	if len(r.Stagger) != 2 || len(r.Web) != 2 || len(r.Overload) != 2 || len(r.Overhead) != 2 {
		t.Fatalf("rows: stagger %d, web %d, overload %d, overhead %d; want 2 each", len(r.Stagger), len(r.Web), len(r.Overload), len(r.Overhead))
	}
	if !r.skipped("nosuchpolicy") || !strings.Contains(out.String(), "skipped nosuchpolicy") {
		t.Errorf("the unknown policy was not reported as skipped")
	}
	if got := r.Stagger[0].ServerBytes; len(got) != 3 || got[2] < 2<<20 {
		t.Errorf("stagger under none: server bytes %v; want each client's 2 MiB from the server", got)
	}
	if len(r.Warm) != 2 {
		t.Fatalf("warm-up rows %+v; want independent (none) and cluster (directory)", r.Warm)
	}
	if w := r.Warm[0]; w.Mode != "independent" || w.Ratio < 2.9 {
		t.Errorf("independent warm-ups: %+v; want the tree from the server once per client (3×)", w)
	}
	if w := r.Warm[1]; w.Mode != "cluster" || w.Ratio > 1.1 {
		t.Errorf("cluster warm-up: %+v; want ≤ 1.1× the tree from the server", w)
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil || !strings.Contains(js.String(), `"server_bytes_per_tree"`) {
		t.Errorf("json: %v\n%s", err, js.String())
	}
	if err := r.Plot(t.TempDir() + "/p.png"); err != nil {
		t.Errorf("plot: %v", err)
	}
}
