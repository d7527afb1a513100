package study

import (
	"context"
	"fmt"
	"strconv"

	"github.com/coopfs/coopfs/internal/sim"
)

// NASDStudy is the registered nasd study: seed 004 figures 3-7.
func NASDStudy(ctx context.Context, env *Env) (*Report, error) {
	cfg := NASDConfig{Quick: env.Quick, Seed: uint64(max(env.Params.Seed, 1))}
	if env.Progress != nil {
		cfg.Progress = func(msg string) { env.progressf("  %s", msg) }
	}
	res, err := NASD(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return res.Report(), nil
}

// nasdSeedClaims are seed 004's qualitative results, one per figure (the
// paper gives its figures as plots only).
var nasdSeedClaims = map[string]string{
	"fig3": "cooperative (global, 1chance) beat noncoop, more so when uneven; 1chance a little better than global",
	"fig4": "variants comparable; better always a little better than manager; return gains in most cases",
	"fig5": "1-N best; cooperative servers beat N whatever the clients; cooperative clients often worse than N",
	"fig6": "1-N better at 2048 blocks; 1-1 better above 4096",
	"fig7": "1-N better at 1 hop; 1-N grows faster and finally exceeds 1-1",
}

// Report turns the result into the study's rows (one per algorithm and
// configuration), one table and one plot per figure, and notes.
func (r *NASDResult) Report() *Report {
	rep := &Report{Study: "nasd"}
	seen := map[[2]string]bool{}
	for _, p := range r.Points {
		k := [2]string{p.Algorithm, p.Config}
		if seen[k] {
			continue
		}
		seen[k] = true
		rep.Rows = append(rep.Rows, p.metrics())
	}
	for _, f := range nasdFigures {
		ser := r.series(f.id)
		t := Table{Name: "nasd-" + f.id, Title: f.title + " — avg ms per block (miss %)",
			Header: append([]string{f.x}, ser...)}
		pl := Plot{Name: "nasd-" + f.id, Title: f.title, XLabel: f.x, YLabel: "average response time per block (ms)"}
		for _, s := range ser {
			sr := Series{Label: s}
			for _, x := range r.xs(f.id) {
				if p := r.at(f.id, s, x); p != nil {
					sr.X, sr.Y = append(sr.X, x), append(sr.Y, p.AvgMs)
				}
			}
			pl.Series = append(pl.Series, sr)
		}
		for _, x := range r.xs(f.id) {
			row := []string{strconv.FormatFloat(x, 'g', -1, 64)}
			for _, s := range ser {
				if p := r.at(f.id, s, x); p != nil {
					row = append(row, fmt.Sprintf("%.3f (%.1f%%)", p.AvgMs, 100*p.MissRate))
				} else {
					row = append(row, "-")
				}
			}
			t.Rows = append(t.Rows, row)
		}
		rep.Tables = append(rep.Tables, t)
		rep.Plots = append(rep.Plots, pl)
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s [seed 004]: %s", f.id, nasdSeedClaims[f.id]))
	}
	rep.Notes = append(rep.Notes,
		"nasd: workloads are synthetic stand-ins for the seed's ten application traces (internal/sim/nasd WorkloadConfig); trace configuration k stores client i's blocks on server i mod k",
		"nasd: avg_access_ms includes the network time of forwards (and manager messages), charged to the access that caused them")
	return rep
}

// metrics maps a point onto the simulator's common metrics.
func (p NASDPoint) metrics() sim.Metrics {
	s := p.Stats
	rd := s.Reads
	ratio := func(a int64) float64 {
		if rd == 0 {
			return 0
		}
		return float64(a) / float64(rd)
	}
	m := sim.Metrics{Algorithm: p.Algorithm, Config: p.Config, Workload: fmt.Sprintf("nasd-config%g", p.X),
		Accesses: rd, Reads: rd, AvgAccessMs: p.AvgMs,
		Hits: sim.Hits{Local: s.LocalHits, Remote: s.RemoteClient, Server: s.ServerHits + s.RemoteServer, Disk: s.DiskReads},
		HitDistr: sim.HitDistr{Local: ratio(s.LocalHits), Remote: ratio(s.RemoteClient),
			Server: ratio(s.ServerHits + s.RemoteServer), Disk: ratio(s.DiskReads)},
		DiskAccesses: s.DiskReads}
	m.LocalHitRatio, m.ServerHitRatio = m.HitDistr.Local, m.HitDistr.Server
	m.Breakdown = sim.Breakdown{Extra: p.AvgMs}
	fwd := s.Server.Forwards + s.Client.Forwards + s.Server.ToOverflow + s.Client.ToOverflow
	m.Counts = sim.Counts{Forwards: fwd, LocalMisses: rd - s.LocalHits,
		ForwardedReqs: s.Server.RefHits + s.Client.RefHits, ForwardMisses: s.Server.StaleRefs + s.Client.StaleRefs}
	m.ManagerMsgsPerAccess = 2 * ratio(s.Server.ManagerAsks+s.Client.ManagerAsks)
	m.ManagerByCause.Replacement = m.ManagerMsgsPerAccess
	if refs := m.Counts.ForwardedReqs; refs > 0 {
		m.ForwardMissRate = float64(m.Counts.ForwardMisses) / float64(refs)
	}
	return m
}
