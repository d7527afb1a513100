package coop

import (
	"os"
	"strconv"
	"strings"

	"github.com/coopfs/coopfs/internal/obs"
)

// ClientStats are one mount's counters over a measured phase.
type ClientStats struct {
	Reads           map[string]float64 `json:"reads"` // by layer
	PeerBytesIn     float64            `json:"peer_bytes_in"`
	PeerBytesOut    float64            `json:"peer_bytes_out"`
	ForwardsRecv    float64            `json:"forwards_received"`
	ForwardHits     float64            `json:"forward_hits"`
	ForwardMisses   float64            `json:"forward_misses"`
	ForwardWaits    float64            `json:"forward_waits"`
	DiscardBatched  float64            `json:"discard_batched"`
	DiscardOnDemand float64            `json:"discard_on_demand"`
	Forwarded       float64            `json:"forwarded_requests"`
	ForwardedHits   float64            `json:"forwarded_peer_hits"`
	Nacks           float64            `json:"forwarded_nacks"`
	Timeouts        float64            `json:"forwarded_timeouts"`
	CPUSeconds      float64            `json:"cpu_seconds"`
	// The wholefile policy's chunks of whole-file fetches, by source, and
	// the holders that failed one.
	WholePeerChunks   float64 `json:"wholefile_peer_chunks,omitempty"`
	WholeServerChunks float64 `json:"wholefile_server_chunks,omitempty"`
	WholePeerFailures float64 `json:"wholefile_peer_failures,omitempty"`
	Gone              bool    `json:"gone,omitempty"` // the process was dead at the end
}

// Stats are the server's and the mounts' counters over a measured phase
// (the difference of two scrapes) and the machine's CPU use.
type Stats struct {
	ServerRequests   float64       `json:"server_directory_requests"`
	Forwards         float64       `json:"server_forwards"`
	ForwardMisses    float64       `json:"server_forward_misses"`
	ServedByServer   float64       `json:"server_served_by_server"`
	Notifications    float64       `json:"server_notifications"`
	Retries          float64       `json:"server_retries"`
	Pings            float64       `json:"server_pings"`
	Failures         float64       `json:"server_failures"`
	ServerBytesOut   float64       `json:"server_bytes_out"`
	ServerCPUSeconds float64       `json:"server_cpu_seconds"`
	Clients          []ClientStats `json:"clients"`
	MachineCPUBusy   float64       `json:"machine_cpu_busy"` // 0..1 of all CPUs
}

// Total sums a client counter over all clients.
func (s *Stats) Total(f func(*ClientStats) float64) float64 {
	var t float64
	for i := range s.Clients {
		t += f(&s.Clients[i])
	}
	return t
}

// ReadsBy sums the clients' reads served by layer.
func (s *Stats) ReadsBy(layer string) float64 {
	return s.Total(func(c *ClientStats) float64 { return c.Reads[layer] })
}

// ForwardMissRate is the server's forward misses over its forwards.
func (s *Stats) ForwardMissRate() float64 {
	if s.Forwards == 0 {
		return 0
	}
	return s.ForwardMisses / s.Forwards
}

func diff(a, b obs.Samples, name string, match map[string]string) float64 {
	return a.Sum(name, match) - b.Sum(name, match)
}

// statsBetween computes the counters' growth from before to after.
func statsBetween(before, after Counters) Stats {
	var s Stats
	a, b := after.Server, before.Server
	s.ServerRequests = diff(a, b, "coopfs_directory_requests_total", nil)
	s.Forwards = diff(a, b, "coopfs_directory_forwards_total", nil)
	s.ForwardMisses = diff(a, b, "coopfs_directory_forward_misses_total", nil)
	s.ServedByServer = diff(a, b, "coopfs_directory_served_by_server_total", nil)
	s.Notifications = diff(a, b, "coopfs_directory_notifications_total", nil)
	s.Retries = diff(a, b, "coopfs_directory_retries_total", nil)
	s.Pings = diff(a, b, "coopfs_directory_pings_total", nil)
	s.Failures = diff(a, b, "coopfs_directory_failures_total", nil)
	s.ServerBytesOut = diff(a, b, obs.MetricBytesOut, map[string]string{"peer_kind": obs.KindClient})
	s.ServerCPUSeconds = diff(a, b, "process_cpu_seconds_total", nil)
	for i := range after.Clients {
		a := after.Clients[i]
		var b obs.Samples
		if i < len(before.Clients) {
			b = before.Clients[i]
		}
		if a == nil {
			s.Clients = append(s.Clients, ClientStats{Gone: true, Reads: map[string]float64{}})
			continue
		}
		c := ClientStats{Reads: map[string]float64{}}
		for _, l := range obs.Layers() {
			if v := diff(a, b, obs.MetricReads, map[string]string{"layer": l}); v != 0 {
				c.Reads[l] = v
			}
		}
		peer := map[string]string{"peer_kind": obs.KindPeer}
		c.PeerBytesIn = diff(a, b, obs.MetricBytesIn, peer)
		c.PeerBytesOut = diff(a, b, obs.MetricBytesOut, peer)
		c.ForwardsRecv = diff(a, b, "coopfs_forwards_received_total", nil)
		c.ForwardHits = diff(a, b, "coopfs_forward_hits_total", nil)
		c.ForwardMisses = diff(a, b, "coopfs_forward_misses_total", nil)
		c.ForwardWaits = diff(a, b, "coopfs_forward_waits_total", nil)
		c.DiscardBatched = diff(a, b, "coopfs_discard_notifications_batched_total", nil)
		c.DiscardOnDemand = diff(a, b, "coopfs_discard_notifications_on_demand_total", nil)
		c.Forwarded = diff(a, b, "coopfs_forwarded_requests_total", nil)
		c.ForwardedHits = diff(a, b, "coopfs_forwarded_peer_hits_total", nil)
		c.Nacks = diff(a, b, "coopfs_forwarded_nacks_total", nil)
		c.Timeouts = diff(a, b, "coopfs_forwarded_timeouts_total", nil)
		c.CPUSeconds = diff(a, b, "process_cpu_seconds_total", nil)
		c.WholePeerChunks = diff(a, b, "coopfs_wholefile_segments_total", map[string]string{"source": "peer"})
		c.WholeServerChunks = diff(a, b, "coopfs_wholefile_segments_total", map[string]string{"source": "server"})
		c.WholePeerFailures = diff(a, b, "coopfs_wholefile_peer_failures_total", nil)
		s.Clients = append(s.Clients, c)
	}
	return s
}

// cpuTimes is the machine's aggregate CPU time from /proc/stat, in ticks.
type cpuTimes struct{ busy, total float64 }

func readCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var t cpuTimes
	for i, v := range f[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		t.total += x
		if i != 3 && i != 4 { // idle, iowait
			t.busy += x
		}
	}
	return t
}

func busyBetween(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 0
	}
	return (b.busy - a.busy) / (b.total - a.total)
}
