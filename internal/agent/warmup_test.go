package agent_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/obs"
)

// TestWarmClusterDirectory: three agents under directory warm a tree
// together; the server sends it about once and every agent holds all of it.
func TestWarmClusterDirectory(t *testing.T) {
	export := t.TempDir()
	var total int
	for i, size := range []int{3<<14 + 77, 1 << 14, 100, 2 << 14} {
		data := pattern(size, byte(i))
		total += size
		if err := os.WriteFile(filepath.Join(export, string(rune('a'+i))), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sm := obs.NewMetrics()
	addr := startDirServer(t, export, sm)
	ctx := asRoot()
	var agents []*agent.Agent
	var ms []*obs.Metrics
	for i := 0; i < 3; i++ {
		m := obs.NewMetrics()
		a, err := agent.New(ctx, agent.Config{Server: addr, Policy: "directory", Metrics: m, Name: string(rune('x' + i)),
			ForwardTimeout: 2 * time.Second, ReconnectTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		agents, ms = append(agents, a), append(ms, m)
	}
	items, err := agents[0].WarmList(ctx, []string{""})
	if err != nil || len(items) != 4 {
		t.Fatalf("list: %v, %v", items, err)
	}
	p, err := agents[0].WarmCluster(ctx, items, nil, nil)
	if err != nil || p.Clients != 3 || p.Bytes != 3*int64(total) {
		t.Fatalf("warm cluster: %+v, %v", p, err)
	}
	srv := scrape(t, sm)
	served := srv.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerDisk}) +
		srv.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerMemory})
	t.Logf("server sent %.0f bytes for %d (%.2f×); forwards %v", served, total, served/float64(total), srv.Sum("coopfs_directory_forwards_total", nil))
	if served > 1.1*float64(total) {
		t.Errorf("server sent %.0f bytes for a %d-byte tree on 3 agents; want ≤ 1.1×", served, total)
	}
}
