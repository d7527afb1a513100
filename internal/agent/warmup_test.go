package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coopfs/coopfs/internal/agent"
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
			total := warmTree(t, export)
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
			served := serverSent(t, sm)
			t.Logf("%s: the server sent %.0f bytes for a %d-byte tree (%.2f×)", policy, served, total, served/float64(total))
			if served > 1.1*float64(total) {
				t.Errorf("%s: the server sent %.0f bytes for a %d-byte tree on 8 agents (%.2f×); want ≤ 1.1×", policy, served, total, served/float64(total))
				logPolicyCounters(t, as)
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

// logPolicyCounters logs each agent's non-zero policy counters and reads
// by layer: what a failure of a cooperative test needs to be understood.
func logPolicyCounters(t *testing.T, as []*hintsAgent) {
	t.Helper()
	for i, a := range as {
		var line []string
		for _, s := range scrape(t, a.m) {
			if s.Value != 0 && (strings.HasPrefix(s.Name, "coopfs_hints_") || strings.HasPrefix(s.Name, "coopfs_wholefile_") ||
				strings.HasPrefix(s.Name, "coopfs_forward") || s.Name == obs.MetricReads) {
				var lbl []string
				for k, v := range s.Labels {
					lbl = append(lbl, k+"="+v)
				}
				line = append(line, fmt.Sprintf("%s{%s}=%v", s.Name, strings.Join(lbl, ","), s.Value))
			}
		}
		t.Logf("agent %d: %s", i, strings.Join(line, " "))
	}
}

// warmTree writes the tree of the cluster warm-up tests into export: 32
// files of about 16 blocks in 4 directories. It returns its bytes.
func warmTree(t *testing.T, export string) int {
	t.Helper()
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
	return total
}

// serverSent is the bytes the server read out for clients, from its disk
// or its memory.
func serverSent(t *testing.T, sm *obs.Metrics) float64 {
	t.Helper()
	srv := scrape(t, sm)
	return srv.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerDisk}) +
		srv.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerMemory})
}

// TestWarmClusterHintsUnknownHolder: under hints, members that have not yet
// heard of the others when a job starts (the server's messages of the
// joins are still on their way) look the holders a phase-2 assignment
// names up in the whole list, asked of the server: the tree still crosses
// the server's link about once.
func TestWarmClusterHintsUnknownHolder(t *testing.T) {
	export := t.TempDir()
	total := warmTree(t, export)
	sm := obs.NewMetrics()
	addr := startPolicyServer(t, export, "hints", sm, 0)
	var as []*hintsAgent
	for range 4 {
		as = append(as, newHintsAgent(t, addr, "hints", 1024, ""))
	}
	for _, a := range as {
		agent.ForgetHintsPeers(a.Agent)
	}
	ctx := asRoot()
	items, err := as[0].WarmList(ctx, []string{""})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as[0].WarmCluster(ctx, items, nil, nil); err != nil {
		t.Fatal(err)
	}
	if served := serverSent(t, sm); served > 1.1*float64(total) {
		t.Errorf("the server sent %.0f bytes for a %d-byte tree on 4 agents (%.2f×); want ≤ 1.1×", served, total, served/float64(total))
		logPolicyCounters(t, as)
	}
}
