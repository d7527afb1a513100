package agent

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Status is what `coopfs status` reports about a mount's agent: its
// server, the round trip to it, the coordination policy, the protection of
// its connections, its peers and the dirty data it holds.
type Status struct {
	Server      string        `json:"server"`
	Connected   bool          `json:"connected"`
	RTT         time.Duration `json:"rtt_ns"` // one StatFs round trip to the server; 0 when it failed
	RTTError    string        `json:"rtt_error,omitempty"`
	Policy      string        `json:"policy"`
	TLS         string        `json:"tls"`
	WritePolicy string        `json:"write_policy"`
	Peers       []PeerStatus  `json:"peers"`
	DirtyFiles  int           `json:"dirty_files"`
	DirtyBytes  int64         `json:"dirty_bytes"` // dirty blocks × block size: an upper bound of the data to write back
}

// PeerStatus is a peer this client has dialed and whether its connection is
// up now.
type PeerStatus struct {
	Addr      string `json:"addr"`
	Reachable bool   `json:"reachable"`
}

// peerLister is the peer network every cooperative policy embeds.
type peerLister interface{ peerStatus() []PeerStatus }

// Status measures the round trip to the server (one StatFs call, bounded by
// ctx) and collects the rest of the status from memory.
func (a *Agent) Status(ctx context.Context) Status {
	st := Status{Server: a.cfg.Server, Policy: a.sess.serverPolicy(), TLS: a.cfg.Security.Mode(),
		WritePolicy: a.cfg.WritePolicy.String(), Peers: []PeerStatus{}}
	if st.Policy == "" {
		st.Policy = "none"
	}
	start := time.Now()
	if _, err := a.StatFs(ctx); err != nil {
		st.RTTError = err.Error()
	} else {
		st.RTT = time.Since(start)
	}
	_, _, st.Connected = a.sess.live()
	if pl, ok := a.policy().(peerLister); ok {
		st.Peers = pl.peerStatus()
	}
	st.DirtyFiles, st.DirtyBytes = a.Dirty()
	return st
}

// Dirty returns the dirty data waiting under write-back: files, and their
// dirty blocks × the block size (an upper bound of the bytes to write
// back). Zero without write-back.
func (a *Agent) Dirty() (files int, bytes int64) {
	if a.wb == nil {
		return 0, 0
	}
	files, blocks := a.wb.e.DirtyCounts()
	return files, int64(blocks) * int64(a.BlockSize())
}

// peerStatus lists the peers dialed, by address.
func (n *peerNet) peerStatus() []PeerStatus {
	n.peerMu.Lock()
	conns := make(map[string]*peerConn, len(n.peers))
	for addr, p := range n.peers {
		conns[addr] = p
	}
	n.peerMu.Unlock()
	out := []PeerStatus{}
	for addr, p := range conns {
		// A dial in progress holds mu for up to its timeout: a peer being
		// dialed counts as not reachable rather than stalling the status.
		up := false
		if p.mu.TryLock() {
			up = p.conn != nil && p.conn.Err() == nil
			p.mu.Unlock()
		}
		out = append(out, PeerStatus{Addr: addr, Reachable: up})
	}
	slices.SortFunc(out, func(x, y PeerStatus) int { return strings.Compare(x.Addr, y.Addr) })
	return out
}
