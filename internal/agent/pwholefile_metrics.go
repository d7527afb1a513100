package agent

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The wholefile policy's client counters, exported at scrape time.
var wholeClientMetrics = []struct {
	name, help string
	labels     prometheus.Labels
	val        func(s *wholeStats) *atomic.Uint64
}{
	{"coopfs_wholefile_hits_total", "Opens whose local copy was current (the commit counter matched): no data moved.", nil, func(s *wholeStats) *atomic.Uint64 { return &s.hits }},
	{"coopfs_wholefile_fetches_total", "Whole-file fetches from the holders of the current version.", nil, func(s *wholeStats) *atomic.Uint64 { return &s.fetches }},
	{"coopfs_wholefile_segments_total", "Chunks of whole-file fetches by where they came from (peer: a holder; server: ranges no holder delivered).", prometheus.Labels{"source": "peer"}, func(s *wholeStats) *atomic.Uint64 { return &s.peerSegments }},
	{"coopfs_wholefile_segments_total", "Chunks of whole-file fetches by where they came from (peer: a holder; server: ranges no holder delivered).", prometheus.Labels{"source": "server"}, func(s *wholeStats) *atomic.Uint64 { return &s.serverSegments }},
	{"coopfs_wholefile_resplits_total", "Segments split to move a slow or failed holder's work to another holder.", nil, func(s *wholeStats) *atomic.Uint64 { return &s.resplits }},
	{"coopfs_wholefile_peer_failures_total", "Holders that failed a chunk (no answer, a block missing, a bad block): their segment went to others.", nil, func(s *wholeStats) *atomic.Uint64 { return &s.peerFailures }},
	{"coopfs_wholefile_bad_blocks_total", "Blocks holders sent that failed the length or SHA-256 check.", nil, func(s *wholeStats) *atomic.Uint64 { return &s.badBlocks }},
	{"coopfs_wholefile_served_blocks_total", "Blocks this client served to peers fetching a whole file.", nil, func(s *wholeStats) *atomic.Uint64 { return &s.served }},
	{"coopfs_wholefile_client_commits_total", "Closes after writes this client committed.", nil, func(s *wholeStats) *atomic.Uint64 { return &s.commits }},
	{"coopfs_wholefile_client_valid_commits_total", "Commits after which this client's copy was the valid one.", nil, func(s *wholeStats) *atomic.Uint64 { return &s.validCommits }},
	{"coopfs_wholefile_haves_sent_total", "Files this client told the server it holds whole (it joined their valid-cache map).", nil, func(s *wholeStats) *atomic.Uint64 { return &s.haves }},
	{"coopfs_wholefile_drops_sent_total", "Files this client left the map or the fetchers of (its tiers evicted part of a held one, or it closed one it had not read whole).", nil, func(s *wholeStats) *atomic.Uint64 { return &s.drops }},
	{"coopfs_wholefile_partial_fetches_total", "Whole-file fetches from clients whose copy was still arriving (no client held the file whole yet).", nil, func(s *wholeStats) *atomic.Uint64 { return &s.partialFetches }},
	{"coopfs_wholefile_partial_waits_total", "Peer requests this client waited on for a block on its way here.", nil, func(s *wholeStats) *atomic.Uint64 { return &s.partialWaits }},
	{"coopfs_wholefile_cached_opens_total", "Opens of a file held whole under a server callback: no message (counted in hits too).", nil, func(s *wholeStats) *atomic.Uint64 { return &s.cachedOpens }},
}

// wholeCollector exports a wholeClient's counters.
type wholeCollector struct{ w *wholeClient }

func wholeDesc(name, help string, labels prometheus.Labels) *prometheus.Desc {
	var vars []string
	if labels != nil {
		vars = []string{"source"}
	}
	return prometheus.NewDesc(name, help, vars, nil)
}

func (c wholeCollector) Describe(ch chan<- *prometheus.Desc) {
	seen := map[string]bool{}
	for _, m := range wholeClientMetrics {
		if !seen[m.name] {
			seen[m.name] = true
			ch <- wholeDesc(m.name, m.help, m.labels)
		}
	}
}

func (c wholeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range wholeClientMetrics {
		var lv []string
		if m.labels != nil {
			lv = []string{m.labels["source"]}
		}
		ch <- prometheus.MustNewConstMetric(wholeDesc(m.name, m.help, m.labels), prometheus.CounterValue, float64(m.val(&c.w.stats).Load()), lv...)
	}
}
