package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/nscluster"
	"github.com/coopfs/coopfs/internal/bench/testbed"
	"github.com/coopfs/coopfs/internal/sim"
	"github.com/coopfs/coopfs/internal/sim/study"
)

// simSpacing is the virtual time between two accesses in the simulator:
// longer than any access takes in its cost model.
const simSpacing = 100 * time.Millisecond

// Report is a replay's outcome: one row per policy.
type Report struct {
	Workload    string `json:"workload"`
	Accesses    int    `json:"accesses"`
	Reads       int    `json:"reads"`
	Clients     int    `json:"clients"`
	Files       int    `json:"files"`
	DataBytes   int64  `json:"data_bytes"`
	BlockSize   int64  `json:"block_size"`
	ClientCache int64  `json:"client_cache"`
	ServerCache int64  `json:"server_cache"`
	WarmUp      int    `json:"warmup_accesses"`
	// Mode is how the live replay played the counted accesses:
	// "sequential" (one at a time in trace order) or "parallel" (one
	// closed-loop player per client).
	Mode       string `json:"mode"`
	ServerLink string `json:"server_link"`
	ClientLink string `json:"client_link"`
	// DiskLatency is the live export's read latency (0: page cache).
	DiskLatency time.Duration `json:"disk_latency_ns,omitempty"`
	Started     time.Time     `json:"started"`
	Rows        []*Row        `json:"rows"`
	Notes       []string      `json:"notes,omitempty"`
}

// Row is one policy, simulated and live.
type Row struct {
	Policy    string `json:"policy"`
	Algorithm string `json:"sim_algorithm"`
	Sim       *Side  `json:"sim,omitempty"`
	Live      *Side  `json:"live,omitempty"`
	// LiveUnavailable says why there is no live column (e.g. the server
	// does not know the policy).
	LiveUnavailable string  `json:"live_unavailable,omitempty"`
	BadReads        int64   `json:"bad_reads"`
	LiveSeconds     float64 `json:"live_seconds"`
}

// runPolicy simulates the trace under policy's algorithm and replays it
// live; a policy the server rejects gets LiveUnavailable.
func runPolicy(ctx context.Context, cfg *Config, t *trace, slice *sim.Slice, policy, dir string) (*Row, error) {
	row := &Row{Policy: policy, Algorithm: simAlgorithm(policy)}
	fmt.Fprintf(cfg.Progress, "%s: simulating (%s)...\n", policy, row.Algorithm)
	alg, p, err := study.Build(row.Algorithm, cfg.params(t.clients))
	if err != nil {
		return nil, err
	}
	m, err := sim.Run(ctx, slice, alg, p, sim.RunOptions{Algorithm: row.Algorithm})
	if err != nil {
		return nil, fmt.Errorf("replay: simulate %s: %w", policy, err)
	}
	s := fromSim(m)
	row.Sim = &s
	fmt.Fprintf(cfg.Progress, "%s: replaying live on %d client hosts...\n", policy, t.clients)
	live, err := runLive(ctx, cfg, t, policy, dir)
	if errors.Is(err, nscluster.ErrServerStart) {
		row.LiveUnavailable = "not available: " + err.Error()
		fmt.Fprintf(cfg.Progress, "%s: %s\n", policy, row.LiveUnavailable)
		return row, nil
	}
	if err != nil {
		return nil, err
	}
	ls := fromLive(policy, live)
	ls.CoopOverheadPct = overheadPct(ls.CoopBytes, live.elapsed, cfg.ServerLink, cfg.ClientLink, t.clients)
	ls.ReplacementPct = overheadPct(ls.ReplacementBytes, live.elapsed, cfg.ServerLink, cfg.ClientLink, t.clients)
	span := t.span(cfg.WarmUp)
	ls.CoopTracePct = overheadPct(ls.CoopBytes, span, cfg.ServerLink, cfg.ClientLink, t.clients)
	ls.ReplacementTracePct = overheadPct(ls.ReplacementBytes, span, cfg.ServerLink, cfg.ClientLink, t.clients)
	row.Live, row.BadReads, row.LiveSeconds = &ls, live.bad, live.elapsed.Seconds()
	return row, nil
}

// overheadPct is bytes over what the links carry in d: every message
// leaves one host's link and enters another's, so its bytes over the sum of
// the links' rates (each direction counted once) is the average share of a
// link it took.
func overheadPct(bytes float64, d time.Duration, serverLink, clientLink string, clients int) float64 {
	s, _ := testbed.ParseRate(serverLink)
	c, _ := testbed.ParseRate(clientLink)
	capBits := float64(s) + float64(clients)*float64(c)
	if capBits == 0 || d <= 0 {
		return 0
	}
	return 100 * bytes * 8 / (capBits * d.Seconds())
}

// Unavailable says why live replays cannot run here, or nil.
func Unavailable() error { return nscluster.Unavailable() }

// Run replays cfg's workload through the simulator and live, policy by
// policy. A policy the server rejects gets a row with LiveUnavailable; a
// testbed that cannot run here is an error (Unavailable says why).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := Unavailable(); err != nil {
		return nil, fmt.Errorf("replay needs the namespace testbed: %w", err)
	}
	t, err := load(cfg.Workload, cfg.MaxAccesses)
	if err != nil {
		return nil, err
	}
	rep := &Report{Workload: t.name, Accesses: len(t.accesses), Reads: t.reads, Clients: t.clients,
		Files: len(t.blocks), DataBytes: t.bytes(cfg.BlockSize), BlockSize: cfg.BlockSize,
		ClientCache: cfg.ClientCache, ServerCache: cfg.ServerCache, ServerLink: cfg.ServerLink,
		ClientLink: cfg.ClientLink, DiskLatency: cfg.DiskLatency, Started: time.Now(), Mode: "sequential"}
	if cfg.Parallel {
		rep.Mode = "parallel"
	}
	if cfg.WarmUp > 0 && len(t.accesses) > cfg.WarmUp {
		rep.WarmUp = cfg.WarmUp
	}
	fmt.Fprintf(cfg.Progress, "replay: %d accesses (%d reads) of %s, %d clients, %d files (%d MiB)\n",
		rep.Accesses, rep.Reads, rep.Workload, rep.Clients, rep.Files, rep.DataBytes>>20)
	dir, err := os.MkdirTemp("", "coopfs-replay-")
	if err != nil {
		return nil, fmt.Errorf("replay: run directory: %w", err)
	}
	if cfg.Keep {
		rep.Notes = append(rep.Notes, "run directory kept: "+dir)
	} else {
		defer func() {
			// Never remove a tree with a live mount in it (it would
			// delete through the mount): the clusters are closed by now.
			if live, _ := cluster.MountsUnder(dir); len(live) > 0 {
				fmt.Fprintf(cfg.Progress, "replay: mounts left under %s, not removing it: %v\n", dir, live)
				return
			}
			os.RemoveAll(dir)
		}()
	}
	// The simulator sees the accesses one at a time, as the live replay
	// plays them: spaced so that nothing queues (directory's simulation
	// models queueing for the disk and the links, the others do not).
	spaced := make([]sim.Access, len(t.accesses))
	for i, a := range t.accesses {
		a.Time = time.Duration(i) * simSpacing
		spaced[i] = a
	}
	slice := &sim.Slice{Label: t.name, Accesses: spaced}
	for _, policy := range cfg.Policies {
		row, err := runPolicy(ctx, &cfg, t, slice, policy, dir)
		if err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, row)
		if row.BadReads > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d reads returned another block's data", policy, row.BadReads))
		}
		if row.Live == nil {
			continue
		}
		if cr := row.Live.Extra["client_counted_reads"]; int64(cr) != row.Live.Reads {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: the clients counted %.0f of the %d block reads in a layer; "+
				"the others, served without a fetch, count as local hits", policy, cr, row.Live.Reads))
		}
	}
	return rep, nil
}
