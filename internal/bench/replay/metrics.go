package replay

import (
	"sort"
	"strings"

	"github.com/coopfs/coopfs/internal/bench/nscluster"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/sim"
)

// Side is one column of the comparison: what the simulator or the live
// cluster measured for one policy. Ratios are fractions (0..1).
type Side struct {
	Reads int64 `json:"reads"`
	// Hit ratios by layer: the client's memory, another client, the
	// server's memory (its cache or discard cache), the server's disk.
	LocalMemory  float64 `json:"local_memory"`
	Peer         float64 `json:"peer"`
	ServerMemory float64 `json:"server_memory"`
	ServerDisk   float64 `json:"server_disk"`
	// ManagerMsgsPerAccess counts messages to and from the manager (the
	// server acting as one) per access, by cause.
	ManagerMsgsPerAccess float64            `json:"manager_msgs_per_access"`
	ManagerByCause       map[string]float64 `json:"manager_msgs_by_cause"`
	// LookupMsgsPerMiss: messages on the path of a local miss, request
	// and reply included (2 = asked the holder or the server directly).
	LookupMsgsPerMiss float64 `json:"lookup_msgs_per_miss"`
	// HintCorrectness is the fraction of hinted lookups that found the
	// block at a client; nil where the policy has no hints or the live
	// processes do not count them.
	HintCorrectness *float64 `json:"hint_correctness,omitempty"`
	// AvgReadMs is the average block read time: the simulator's from its
	// cost model (seed 002 table 5.2 latencies), live the time of each
	// pread through the mount. Compare each side's ratio to none's.
	AvgReadMs float64 `json:"avg_read_ms"`
	// CoopBytes is the bytes of cooperation's control messages (live
	// only: forwards, negative replies, discard notifications, hint
	// hand-outs, hinted lookups, age exchanges, digest checks);
	// CoopOverheadPct is them over what the links could carry during the
	// counted part of the run (overheadPct).
	CoopBytes       float64 `json:"coop_bytes,omitempty"`
	CoopOverheadPct float64 `json:"coop_overhead_pct_of_links,omitempty"`
	// ReplacementBytes is the bytes of evicted blocks sent to another
	// cache (hints' best-guess forwards and discard-cache copies), and
	// ReplacementPct them over what the links could carry.
	ReplacementBytes float64 `json:"replacement_bytes,omitempty"`
	ReplacementPct   float64 `json:"replacement_pct_of_links,omitempty"`
	// CoopTracePct and ReplacementTracePct are the same bytes over what
	// the links carry in the trace's own time for the counted accesses
	// (its timestamps: the office the trace stands for), where the replay
	// plays them as fast as the cluster answers; 0 for a trace without
	// times.
	CoopTracePct        float64 `json:"coop_overhead_pct_of_links_trace_time,omitempty"`
	ReplacementTracePct float64 `json:"replacement_pct_of_links_trace_time,omitempty"`
	// ServerBytesOut is what the server sent (live only).
	ServerBytesOut float64 `json:"server_bytes_out,omitempty"`
	// Extra holds raw counts worth seeing (live: per message type).
	Extra map[string]float64 `json:"extra,omitempty"`
}

func fromSim(m sim.Metrics) Side {
	s := Side{Reads: m.Reads, LocalMemory: m.HitDistr.Local, Peer: m.HitDistr.Remote,
		ServerMemory: m.HitDistr.Server, ServerDisk: m.HitDistr.Disk,
		ManagerMsgsPerAccess: m.ManagerMsgsPerAccess,
		ManagerByCause: map[string]float64{"consistency": m.ManagerByCause.Consistency,
			"lookup": m.ManagerByCause.Lookup, "replacement": m.ManagerByCause.Replacement},
		LookupMsgsPerMiss: m.LookupMsgsPerMiss, AvgReadMs: m.AvgAccessMs}
	if m.Counts.LocalMisses > 0 && (m.HintCorrectness > 0 || strings.HasPrefix(m.Algorithm, "hints")) {
		h := m.HintCorrectness
		s.HintCorrectness = &h
	}
	return s
}

// Message types by their role, as counted at the server (manager
// messages) or at every sender (lookup messages, cooperation's control
// traffic).
var (
	consistencyTypes = map[string]bool{"Open": true, "OpenReply": true, "Release": true, "ReleaseBatch": true,
		"GetAttr": true, "AttrReply": true, "CallbackRegister": true, "CallbackBreak": true,
		"DelegateWrite": true, "DelegateReturn": true,
		// hints: the hand-out on open, the peer list, the digest check of
		// peer-served blocks.
		"HintsOpen": true, "HintsReply": true, "HintsExport": true, "HintsPeers": true,
		"HintsDigest": true, "HintsDigestRep": true}
	replacementTypes = map[string]bool{"Discard": true, "HintsDiscard": true}
	missPathTypes    = map[string]bool{"ReadBlock": true, "BlockReply": true, "Forward": true, "PeerData": true,
		"PeerNack": true, "HintsRead": true, "HintsBlock": true}
	// coopControlTypes exist only because clients cooperate and carry no
	// block: forwards, negative replies, discard notifications, hint
	// hand-outs, hinted lookups, age exchanges, digest checks.
	coopControlTypes = map[string]bool{"Forward": true, "PeerNack": true, "Discard": true,
		"HintsPeers": true, "HintsOpen": true, "HintsReply": true, "HintsExport": true, "HintsRead": true,
		"HintsForwardAck": true, "HintsDigest": true, "HintsDigestRep": true}
	// replacementDataTypes carry evicted blocks to another cache (hints:
	// best-guess forwards to a peer, young master copies to the server's
	// discard cache).
	replacementDataTypes = map[string]bool{"HintsForward": true, "HintsDiscard": true}
)

func diff(a, b obs.Samples, name, key string, match map[string]string) map[string]float64 {
	out := b.SumBy(name, key, match)
	for k, v := range a.SumBy(name, key, match) {
		out[k] -= v
	}
	return out
}

// fromLive turns a live run's counters into a Side.
func fromLive(policy string, r *liveRun) Side {
	s := Side{Reads: r.reads, ManagerByCause: map[string]float64{}, Extra: map[string]float64{}}
	misses := s.addLayers(r)
	if r.reads > 0 {
		s.AvgReadMs = float64(r.readTime.Microseconds()) / 1000 / float64(r.reads)
	}
	s.ServerBytesOut = r.after.Server.Sum(obs.MetricBytesOut, nil) - r.before.Server.Sum(obs.MetricBytesOut, nil)
	s.addManager(policy, r)
	s.addLookups(r, misses)
	for _, k := range hintCounterNames(r.after) {
		s.Extra[k] = sumAll(r.after, k) - sumAll(r.before, k)
	}
	if look := s.Extra["coopfs_hints_lookups_total"]; look > 0 {
		// The simulator's hint correctness: hinted lookups that found the
		// block at a client, the hinted one or one its hint led to.
		c := (s.Extra["coopfs_hints_hint_hits_total"] + s.Extra["coopfs_hints_chain_hits_total"]) / look
		s.HintCorrectness = &c
	}
	s.CoopBytes = sentBytes(r, coopControlTypes)
	s.ReplacementBytes = sentBytes(r, replacementDataTypes)
	return s
}

// addLayers sets the hit ratios from the clients' reads by layer and
// returns the reads not served locally.
func (s *Side) addLayers(r *liveRun) float64 {
	layers := map[string]float64{}
	var total float64
	for i := range r.after.Clients {
		for l, v := range diff(r.before.Clients[i], r.after.Clients[i], obs.MetricReads, "layer", nil) {
			layers[l] += v
			total += v
		}
	}
	// The denominator is the reads the driver issued: a read no layer
	// counted was served by the client without a fetch, that is locally.
	s.Extra["client_counted_reads"] = total
	remote := layers[obs.LayerPeer] + layers[obs.LayerServerMemory] + layers[obs.LayerServerDisk]
	if reads := float64(r.reads); reads > 0 {
		s.LocalMemory = max(0, reads-remote) / reads
		s.Peer = layers[obs.LayerPeer] / reads
		s.ServerMemory = layers[obs.LayerServerMemory] / reads
		s.ServerDisk = layers[obs.LayerServerDisk] / reads
	}
	return remote
}

// addManager counts the manager messages: what the server received and
// sent for consistency, lookups (directory: every miss asks it) and
// replacement.
func (s *Side) addManager(policy string, r *liveRun) {
	srvIn := diff(r.before.Server, r.after.Server, obs.MetricMessages, "type", map[string]string{"dir": obs.DirIn})
	srvOut := diff(r.before.Server, r.after.Server, obs.MetricMessages, "type", map[string]string{"dir": obs.DirOut})
	var cons, look, repl float64
	for t, v := range srvIn {
		switch {
		case consistencyTypes[t]:
			cons += v
		case replacementTypes[t]:
			repl += v
		case t == "ReadBlock" && policy == "directory":
			look += v
		}
	}
	for t, v := range srvOut {
		switch {
		case consistencyTypes[t]:
			cons += v
		case (t == "BlockReply" || t == "Forward") && policy == "directory":
			look += v
		}
	}
	if r.accesses > 0 {
		a := float64(r.accesses)
		s.ManagerByCause = map[string]float64{"consistency": cons / a, "lookup": look / a, "replacement": repl / a}
		s.ManagerMsgsPerAccess = (cons + look + repl) / a
	}
}

// addLookups counts every message on a miss's path, once at its sender,
// per local miss, and keeps every type's count in Extra.
func (s *Side) addLookups(r *liveRun, misses float64) {
	sent := map[string]float64{}
	all := append([]obs.Samples{r.after.Server}, r.after.Clients...)
	base := append([]obs.Samples{r.before.Server}, r.before.Clients...)
	for i := range all {
		for t, v := range diff(base[i], all[i], obs.MetricMessages, "type", map[string]string{"dir": obs.DirOut}) {
			sent[t] += v
		}
	}
	var path float64
	for t, v := range sent {
		if missPathTypes[t] {
			path += v
		}
		if v != 0 {
			s.Extra["sent_"+t] = v
		}
	}
	if misses > 0 {
		s.LookupMsgsPerMiss = path / misses
	}
}

// hintCounterNames lists the counters whose name mentions hints (gauges
// do not subtract).
func hintCounterNames(c nscluster.Counters) []string {
	seen := map[string]bool{}
	for _, ss := range append([]obs.Samples{c.Server}, c.Clients...) {
		for _, x := range ss {
			if strings.Contains(x.Name, "hint") && strings.HasSuffix(x.Name, "_total") {
				seen[x.Name] = true
			}
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sumAll(c nscluster.Counters, name string) float64 {
	v := c.Server.Sum(name, nil)
	for _, ss := range c.Clients {
		v += ss.Sum(name, nil)
	}
	return v
}

// sentBytes sums the bytes of the messages of the given types, each
// counted once at its sender.
func sentBytes(r *liveRun, types map[string]bool) float64 {
	var n float64
	all := append([]obs.Samples{r.after.Server}, r.after.Clients...)
	base := append([]obs.Samples{r.before.Server}, r.before.Clients...)
	for i := range all {
		for t, v := range diff(base[i], all[i], obs.MetricMessageBytes, "type", map[string]string{"dir": obs.DirOut}) {
			if types[t] {
				n += v
			}
		}
	}
	return n
}
