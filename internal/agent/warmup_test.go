package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/coopfs/coopfs/internal/obs"
)

// TestWarmClusterPolicies: eight agents warm a tree of 32 files together
// under each cooperative policy; every agent ends with all of it, and the
// server sends it about once (≤ 1.1×, the bound), whatever the
// order in which the agents' opens and reads interleave.
func TestWarmClusterPolicies(t *testing.T) {
	for _, policy := range []string{"directory", "hints", "wholefile"} {
		t.Run(policy, func(t *testing.T) {
			export := t.TempDir()
			var total int
			for i := range 32 {
				size := 16*hbs + i*100
				total += size
				p := filepath.Join(export, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%02d", i))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, pattern(size, byte(i)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			sm := obs.NewMetrics()
			addr := startPolicyServer(t, export, policy, sm, 0)
			var as []*hintsAgent
			for range 8 {
				as = append(as, newHintsAgent(t, addr, policy, 1024, ""))
			}
			ctx := asRoot()
			items, err := as[0].WarmList(ctx, []string{""})
			if err != nil || len(items) != 32 {
				t.Fatalf("list: %d items, %v", len(items), err)
			}
			p, err := as[0].WarmCluster(ctx, items, nil, nil)
			if err != nil || p.Clients != 8 || p.Bytes != 8*int64(total) {
				t.Fatalf("warm cluster: %+v, %v", p, err)
			}
			srv := scrape(t, sm)
			served := srv.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerDisk}) +
				srv.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerMemory})
			t.Logf("%s: the server sent %.0f bytes for a %d-byte tree (%.2f×)", policy, served, total, served/float64(total))
			if served > 1.1*float64(total) {
				t.Errorf("%s: the server sent %.0f bytes for a %d-byte tree on 8 agents (%.2f×); want ≤ 1.1×", policy, served, total, served/float64(total))
			}
			for i, a := range as { // every agent holds it all: reading it again costs the server nothing
				before := scrape(t, sm).Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerDisk})
				if _, err := a.Warm(ctx, items, nil); err != nil {
					t.Fatal(err)
				}
				if after := scrape(t, sm).Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerDisk}); after != before {
					t.Errorf("agent %d was not warm: %.0f more bytes from the server", i, after-before)
				}
			}
		})
	}
}
