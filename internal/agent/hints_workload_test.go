package agent_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/coopfs/coopfs/internal/obs"
)

// TestHintsSharedWorkload: six clients with small caches open and read
// files of a shared set, Zipf-popular, each at its own pace, so that
// hints, forwards, the discard cache and stale hints all occur. Every read
// must return the export's bytes; the figures are logged (hint
// correctness, lookup messages per miss, where reads were served).
func TestHintsSharedWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	export := t.TempDir()
	const files, blocks, clients, idle, opens = 40, 8, 6, 4, 150
	contents := make([][]byte, files)
	for i := range contents {
		contents[i] = pattern(blocks*hbs, byte(30+i))
		writeExport(t, export, fmt.Sprintf("f%02d", i), contents[i])
	}
	sm := obs.NewMetrics()
	addr := startPolicyServer(t, export, "hints", sm, 64*hbs)
	var cs []*hintsAgent
	for i := 0; i < clients; i++ {
		cs = append(cs, newHintsAgent(t, addr, "hints", 48, ""))
	}
	for i := 0; i < idle; i++ { // idle clients: memory for the cooperative cache
		newHintsAgent(t, addr, "hints", 128, "")
	}
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			z := rand.NewZipf(rng, 1.2, 2, files-1)
			for n := 0; n < opens; n++ {
				f := int(z.Uint64())
				got, err := readAll(asRoot(), c.Agent, fmt.Sprintf("f%02d", f))
				if err != nil || string(got) != string(contents[f]) {
					t.Errorf("client %d, file %d: %d bytes, %v", i, f, len(got), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var sum = map[string]float64{}
	for _, c := range cs {
		ss := scrape(t, c.m)
		for _, name := range []string{"coopfs_hints_misses_total", "coopfs_hints_lookups_total", "coopfs_hints_hint_hits_total",
			"coopfs_hints_chain_hits_total", "coopfs_hints_lookup_messages_total", "coopfs_hints_forwards_total",
			"coopfs_hints_discards_total", "coopfs_hints_stale_total", "coopfs_hints_bad_blocks_total", "coopfs_hints_redirects_total"} {
			sum[name] += ss.Sum(name, nil)
		}
		for _, l := range obs.Layers() {
			sum[l] += ss.Sum(obs.MetricReads, map[string]string{"layer": l})
		}
	}
	ss := scrape(t, sm)
	t.Logf("reads: local memory %.0f, peer %.0f, server memory %.0f, server disk %.0f",
		sum[obs.LayerLocalMemory], sum[obs.LayerPeer], sum[obs.LayerServerMemory], sum[obs.LayerServerDisk])
	lookups := max(1, sum["coopfs_hints_lookups_total"])
	correct := (sum["coopfs_hints_hint_hits_total"] + sum["coopfs_hints_chain_hits_total"]) / lookups
	t.Logf("misses %.0f; sent by a hint %.0f; hint correctness %.3f (absolute %.3f); lookup messages per miss %.2f",
		sum["coopfs_hints_misses_total"], sum["coopfs_hints_lookups_total"], correct,
		sum["coopfs_hints_hint_hits_total"]/lookups, sum["coopfs_hints_lookup_messages_total"]/max(1, sum["coopfs_hints_misses_total"]))
	t.Logf("forwards %.0f, discards %.0f (kept %.0f, hits %.0f), stale hints %.0f, hand-outs %.0f of %.0f opens",
		sum["coopfs_hints_forwards_total"], sum["coopfs_hints_discards_total"],
		ss.Sum("coopfs_hints_discard_kept_total", nil), ss.Sum("coopfs_hints_discard_cache_hits_total", nil),
		sum["coopfs_hints_stale_total"], ss.Sum("coopfs_hints_handouts_total", nil), ss.Sum("coopfs_hints_opens_total", nil))
	if sum["coopfs_hints_bad_blocks_total"] != 0 {
		t.Errorf("%v peer blocks failed their check among honest clients", sum["coopfs_hints_bad_blocks_total"])
	}
	if sum[obs.LayerPeer] == 0 {
		t.Error("no read was served by a peer")
	}
	if correct < 0.5 { // a sanity bound: about 0.97 on this workload
		t.Errorf("hint correctness %.3f", correct)
	}
}
