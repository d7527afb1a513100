package server

import "github.com/prometheus/client_golang/prometheus"

// callbackMetrics are the counters of the callback service (callbacks.go).
func (s *Server) callbackMetrics() []prometheus.Collector {
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	cb := s.cbs
	return []prometheus.Collector{
		counter("coopfs_server_callback_grants_total", "Callbacks granted to clients (one per object handed out).", func() float64 { return float64(cb.grants.Load()) }),
		counter("coopfs_server_callback_breaks_total", "CallbackBreak messages sent to holders.", func() float64 { return float64(cb.breaksSent.Load()) }),
		counter("coopfs_server_callback_break_timeouts_total", "Holders disconnected for not acknowledging a break in time.", func() float64 { return float64(cb.breakTimeouts.Load()) }),
		counter("coopfs_server_callback_races_total", "Grants that raced with a break of their object (answered by a break).", func() float64 { return float64(cb.races.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coopfs_server_callbacks_held", Help: "Objects with at least one callback holder."}, func() float64 {
			cb.mu.Lock()
			defer cb.mu.Unlock()
			return float64(len(cb.t.holders))
		}),
	}
}
