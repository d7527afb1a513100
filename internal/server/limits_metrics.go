package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// limitMetrics are the counters of issue 7's machinery: locks, exactly-once
// writes, pinned opens, readdir cursors and requests past their deadline.
func (s *Server) limitMetrics() []prometheus.Collector {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	return []prometheus.Collector{
		gauge("coopfs_server_locks_held", "Advisory locks (fcntl ranges and flock) the server holds for its clients.", func() float64 {
			n, _ := s.locks.counts()
			return float64(n)
		}),
		gauge("coopfs_server_lock_waiters", "Blocking lock requests waiting in the server.", func() float64 {
			_, n := s.locks.counts()
			return float64(n)
		}),
		counter("coopfs_server_write_replays_total", "Resent writes answered without applying them again (reply cache or a file's append record).", func() float64 {
			return float64(s.drcHits.Load())
		}),
		counter("coopfs_server_pinned_opens_total", "Opens served the file a client's lookup pinned, after the name moved on (renames by other clients).", func() float64 {
			return float64(s.pinnedOpens.Load())
		}),
		counter("coopfs_server_readdir_entries_read_total", "Directory entries read from the export for listings.", func() float64 {
			s.dirs.mu.Lock()
			defer s.dirs.mu.Unlock()
			return float64(s.dirs.read)
		}),
		counter("coopfs_server_requests_timed_out_total", "Requests answered ETIMEDOUT: the export did not finish them within the handler timeout.", func() float64 {
			return float64(s.stuck.Load())
		}),
	}
}
