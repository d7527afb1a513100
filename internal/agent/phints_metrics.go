package agent

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The hints policy's client counters, exported at scrape time. Hint
// correctness as the seed and the simulator define it (of the local misses
// a hint sent to a peer, the fraction a peer served, following holders'
// hints included) is (coopfs_hints_hint_hits_total +
// coopfs_hints_chain_hits_total) over coopfs_hints_lookups_total;
// absolute correctness counts only the first hinted holder. Both are also
// gauges.
var hintsClientMetrics = []struct {
	name, help string
	val        func(s *hintsStats) *atomic.Uint64
}{
	{"coopfs_hints_misses_total", "Local misses (memory and disk) the hints policy looked up.", func(s *hintsStats) *atomic.Uint64 { return &s.misses }},
	{"coopfs_hints_lookups_total", "Local misses sent to a peer by a hint.", func(s *hintsStats) *atomic.Uint64 { return &s.lookups }},
	{"coopfs_hints_hint_hits_total", "Lookups the hinted holder served (the hint was correct).", func(s *hintsStats) *atomic.Uint64 { return &s.hintHits }},
	{"coopfs_hints_chain_hits_total", "Lookups served by a holder reached by following holders' hints.", func(s *hintsStats) *atomic.Uint64 { return &s.chainHits }},
	{"coopfs_hints_redirects_total", "Holders that answered a lookup with their own hint.", func(s *hintsStats) *atomic.Uint64 { return &s.redirects }},
	{"coopfs_hints_lookup_messages_total", "Lookup messages: requests and answers to peers and to the server for local misses (per miss: 2 for a correct hint or a direct server read, 2 more per holder visited; the simulator's count).", func(s *hintsStats) *atomic.Uint64 { return &s.lookupMessages }},
	{"coopfs_hints_stale_total", "Hints dropped: their holder left, failed or restarted (boot id), or had no address.", func(s *hintsStats) *atomic.Uint64 { return &s.stale }},
	{"coopfs_hints_holder_failures_total", "Hinted holders that did not answer (marked failed until heard from).", func(s *hintsStats) *atomic.Uint64 { return &s.holderFailures }},
	{"coopfs_hints_bad_blocks_total", "Blocks peers sent that failed the version or SHA-256 check (read from the server).", func(s *hintsStats) *atomic.Uint64 { return &s.badBlocks }},
	{"coopfs_hints_digest_requests_total", "Digests asked of the server to check a peer's block.", func(s *hintsStats) *atomic.Uint64 { return &s.digestRequests }},
	{"coopfs_hints_local_opens_total", "Opens without a hand-out: this client was still the file's last opener.", func(s *hintsStats) *atomic.Uint64 { return &s.localOpens }},
	{"coopfs_hints_imported_total", "Hints taken from the last opener's hand-out on open.", func(s *hintsStats) *atomic.Uint64 { return &s.imported }},
	{"coopfs_hints_lookups_served_total", "Lookups peers sent this client.", func(s *hintsStats) *atomic.Uint64 { return &s.lookupsServed }},
	{"coopfs_hints_served_total", "Blocks this client served to peers.", func(s *hintsStats) *atomic.Uint64 { return &s.served }},
	{"coopfs_hints_forwards_total", "Evicted master copies forwarded to a peer (best-guess replacement).", func(s *hintsStats) *atomic.Uint64 { return &s.forwards }},
	{"coopfs_hints_forward_failures_total", "Forwards the target did not acknowledge.", func(s *hintsStats) *atomic.Uint64 { return &s.forwardFailures }},
	{"coopfs_hints_forwards_skipped_total", "Master copies dropped because too many forwards were in flight.", func(s *hintsStats) *atomic.Uint64 { return &s.forwardsSkipped }},
	{"coopfs_hints_forwards_received_total", "Master copies peers forwarded to this client.", func(s *hintsStats) *atomic.Uint64 { return &s.forwardsReceived }},
	{"coopfs_hints_lost_total", "Lookups for a block the policy believed cached here but the memory and disk tiers no longer held.", func(s *hintsStats) *atomic.Uint64 { return &s.lost }},
	{"coopfs_hints_forwards_refused_total", "Master copies peers forwarded that failed their check (no capability of the server's, or not the server's SHA-256) and were not kept.", func(s *hintsStats) *atomic.Uint64 { return &s.badForwards }},
	{"coopfs_hints_discards_total", "Young master copies sent to the server's discard cache.", func(s *hintsStats) *atomic.Uint64 { return &s.discards }},
}

var (
	hintsCorrectnessDesc = prometheus.NewDesc("coopfs_hints_correctness",
		"Hint correctness (the seed's): lookups a peer served, the hinted holder or one its hints led to, over lookups sent by a hint (1 before any).", nil, nil)
	hintsAbsoluteDesc = prometheus.NewDesc("coopfs_hints_absolute_correctness",
		"Absolute hint correctness: lookups the first hinted holder served over lookups sent by a hint (1 before any).", nil, nil)
)

func (h *hintsClient) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range hintsClientMetrics {
		ch <- prometheus.NewDesc(m.name, m.help, nil, nil)
	}
	ch <- hintsCorrectnessDesc
	ch <- hintsAbsoluteDesc
}

func (h *hintsClient) Collect(ch chan<- prometheus.Metric) {
	for _, m := range hintsClientMetrics {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(m.name, m.help, nil, nil), prometheus.CounterValue, float64(m.val(&h.stats).Load()))
	}
	c, abs := 1.0, 1.0
	if n := h.stats.lookups.Load(); n > 0 {
		hits := h.stats.hintHits.Load()
		c = float64(hits+h.stats.chainHits.Load()) / float64(n)
		abs = float64(hits) / float64(n)
	}
	ch <- prometheus.MustNewConstMetric(hintsCorrectnessDesc, prometheus.GaugeValue, c)
	ch <- prometheus.MustNewConstMetric(hintsAbsoluteDesc, prometheus.GaugeValue, abs)
}
