package obs

import (
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/prometheus/client_golang/prometheus"
)

// tierCollector exposes a cache tier's Stats, read at scrape time.
type tierCollector struct {
	tier  string
	stats func() cache.Stats
	descs [6]*prometheus.Desc
}

// NewTierCollector returns a collector that reports a cache tier's Stats at
// every scrape as coopfs_cache_{entries,bytes,capacity_bytes} gauges and
// coopfs_cache_{hits,misses,evictions}_total counters, labelled tier=name.
// Register one per tier: m.Register(obs.NewTierCollector("memory", c.Stats)).
func NewTierCollector(name string, stats func() cache.Stats) prometheus.Collector {
	c := &tierCollector{tier: name, stats: stats}
	for i, d := range []struct{ name, help string }{
		{"coopfs_cache_entries", "Blocks held by the cache tier."},
		{"coopfs_cache_bytes", "Bytes held by the cache tier."},
		{"coopfs_cache_capacity_bytes", "Capacity of the cache tier in bytes."},
		{"coopfs_cache_hits_total", "Lookups the cache tier answered."},
		{"coopfs_cache_misses_total", "Lookups the cache tier missed."},
		{"coopfs_cache_evictions_total", "Blocks the cache tier dropped to make room."},
	} {
		c.descs[i] = prometheus.NewDesc(d.name, d.help, nil, prometheus.Labels{"tier": name})
	}
	return c
}

func (c *tierCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *tierCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	g, k := prometheus.GaugeValue, prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(c.descs[0], g, float64(s.Entries))
	ch <- prometheus.MustNewConstMetric(c.descs[1], g, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(c.descs[2], g, float64(s.Capacity))
	ch <- prometheus.MustNewConstMetric(c.descs[3], k, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(c.descs[4], k, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(c.descs[5], k, float64(s.Evictions))
}
