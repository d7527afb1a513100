package study

import (
	"context"
	"fmt"

	"github.com/coopfs/coopfs/internal/sim"
)

// Sarkar algorithms, in the seed's order (N, G, H, L, O) plus the baseline.
var sarkarAlgs = []string{"nchance", "gms", "hints", "globallru", "optimal", "baseline"}

// The hint-based parts: the algorithm registered as
// "hints" is run in every configuration; table 5.7 runs it with option
// server_memory set to each of these uses.
const sarkarHints = "hints"

var sarkarMemUses = []struct{ option, label string }{
	{"disk", "Disk Cache"}, {"coop", "Coop Cache"}, {"discard", "Discard Cache"},
}

// Seed 002's published numbers.
var (
	// Table 5.3, hit distribution (%) averaged over the four periods.
	seedTable53 = map[string][4]float64{ // local, remote, server, disk
		"nchance": {47.2, 49.8, 0.0, 3.0}, "gms": {45.5, 52.5, 0.0, 2.0}, "hints": {47.3, 50.4, 0.2, 2.1},
		"globallru": {47.3, 50.9, 0.0, 1.8}, "optimal": {47.4, 50.9, 0.0, 1.7},
	}
	// Table 5.7, average column: server memory hit ratio (%) and block
	// access time (ms) with 4 MB client caches and 16 MB server memory.
	seedTable57 = map[string][2]float64{"disk": {0.45, 3.23}, "coop": {1.83, 2.77}, "discard": {2.46, 2.57}}
)

// sarkarScale holds the sizes of one run of the study.
type sarkarScale struct {
	clients     int
	accesses    int
	warmUp      int
	cacheMB     []int // client cache sweep, 16 (the default) last
	active      []float64
	defActive   float64
	gen         sim.GenConfig
	memClientMB int
	memServerMB int
}

func sarkarSizes(quick bool) sarkarScale {
	s := sarkarScale{clients: 42, accesses: 1600000, warmUp: 400000, cacheMB: []int{4, 8, 12, 16},
		active: []float64{0.50, 0.60, 0.75}, defActive: 0.6, memClientMB: 4, memServerMB: 16}
	s.gen = sim.GenConfig{Pattern: sim.GenOffice, Files: 2000, Private: 300, MaxFile: 256}
	if quick {
		// A quarter of the system: fewer clients and files, caches and
		// server memory divided by 4 (labels keep the seed's sizes).
		s.clients, s.accesses, s.warmUp = 12, 150000, 40000
		s.gen.Files, s.gen.Private, s.gen.MaxFile = 500, 75, 64
	}
	return s
}

// Sarkar reproduces seed 002's chapter 5 on a generated Sprite-like
// workload (the Sprite traces are not available): figure 5.1 (access time
// and its breakdown), table 5.3 (hit distribution), figure 5.2 (manager
// load by cause), figures 5.8/5.9 (client cache 4–16 MB), figures 5.10/5.11
// (50–75 % active clients) and table 5.7 (uses of server memory).
func Sarkar(ctx context.Context, env *Env) (*Report, error) {
	sc := sarkarSizes(env.Quick)
	div := 1
	if env.Quick {
		div = 4
	}
	base := env.Params
	base.Clients, base.WarmUp = sc.clients, sc.warmUp
	blocksPerMB := int((1 << 20) / base.BlockSize)
	mkParams := func(clientMB, serverMB int) sim.Params {
		p := base
		p.ClientCacheBlocks = clientMB * blocksPerMB / div
		p.ServerCacheBlocks = serverMB * blocksPerMB / div
		return p
	}
	mkWork := func(active float64) (sim.Workload, error) {
		if env.Trace != nil {
			return env.Trace, nil
		}
		g := sc.gen
		g.Clients, g.Accesses, g.Seed, g.Active = sc.clients, sc.accesses, base.Seed, active
		return sim.Generate(g)
	}
	def, err := mkWork(sc.defActive)
	if err != nil {
		return nil, err
	}
	r := &Report{Study: "sarkar"}
	if env.Quick {
		r.Notes = append(r.Notes, fmt.Sprintf("quick: %d clients, %d accesses, caches and server memory divided by 4 (labels keep the seed's sizes)", sc.clients, sc.accesses))
	}
	r.Notes = append(r.Notes, "workload: "+def.Name()+" (generated office/engineering workload standing in for the Sprite traces)")

	// Figure 5.1 / table 5.3 / figure 5.2 and the cache sweep (5.8, 5.9).
	var cfgs []Config
	for _, mb := range sc.cacheMB {
		name := fmt.Sprintf("cache-%dMB", mb)
		if mb == 16 {
			name = "default"
		}
		cfgs = append(cfgs, Config{Name: name, Params: mkParams(mb, 128), Workload: def})
	}
	// Active-client sweep (5.10, 5.11).
	for _, a := range sc.active {
		if a == sc.defActive {
			continue // the default configuration is this point
		}
		w, err := mkWork(a)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, Config{Name: fmt.Sprintf("active-%d%%", int(a*100+0.5)), Params: mkParams(16, 128), Workload: w})
	}
	env.progressf("sarkar: %d configurations × %d algorithms", len(cfgs), len(sarkarAlgs))
	rows, err := RunMatrix(ctx, env, sarkarAlgs, cfgs)
	if err != nil {
		return nil, err
	}
	// Table 5.7: the uses of server memory (hint-based only).
	if Has(sarkarHints) {
		var mem []Config
		for _, u := range sarkarMemUses {
			p := mkParams(sc.memClientMB, sc.memServerMB).WithOption("server_memory", u.option)
			mem = append(mem, Config{Name: "mem-" + u.option, Params: p, Workload: def})
		}
		env.progressf("sarkar: table 5.7, %d uses of server memory", len(mem))
		more, err := RunMatrix(ctx, env, []string{sarkarHints}, mem)
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	} else {
		r.Notes = append(r.Notes, "table 5.7 skipped: the hint-based algorithm is not registered")
	}
	r.Rows = rows
	sarkarTables(r, sc)
	sarkarPlots(r, sc)
	return r, nil
}

func pct(x float64) string { return fmt.Sprintf("%.2f", 100*x) }
func ms(x float64) string  { return fmt.Sprintf("%.3f", x) }

func sarkarTables(r *Report, sc sarkarScale) {
	t := Table{Name: "table5_3", Title: "Table 5.3: hit distribution (%) at the default configuration, ours | seed 002 (Sprite, average of 4 periods)",
		Header: []string{"algorithm", "local", "remote", "server", "disk", "seed local", "seed remote", "seed server", "seed disk", "avg ms"}}
	for _, a := range sarkarAlgs {
		m, ok := find(r.Rows, a, "default")
		if !ok {
			continue
		}
		row := []string{a, pct(m.HitDistr.Local), pct(m.HitDistr.Remote), pct(m.HitDistr.Server), pct(m.HitDistr.Disk)}
		if s, ok := seedTable53[a]; ok {
			for _, v := range s {
				row = append(row, fmt.Sprintf("%.1f", v))
			}
		} else {
			row = append(row, "-", "-", "-", "-")
		}
		t.Rows = append(t.Rows, append(row, ms(m.AvgAccessMs)))
	}
	r.Tables = append(r.Tables, t)

	o := Table{Name: "overhead", Title: "Overhead at the default configuration (seed 002 5.2.2-5.2.4: lookup messages 3 for manager-based, 2.001 for hints; hint correctness 99.94%)",
		Header: []string{"algorithm", "mgr/access", "consistency", "lookup", "replacement", "lookup msgs/miss", "repl msgs/local miss", "hint correct %", "unnecessary fwd %"}}
	for _, a := range []string{"nchance", "gms", "hints"} {
		m, ok := find(r.Rows, a, "default")
		if !ok {
			continue
		}
		c := m.ManagerByCause
		o.Rows = append(o.Rows, []string{a, fmt.Sprintf("%.4f", m.ManagerMsgsPerAccess), fmt.Sprintf("%.4f", c.Consistency),
			fmt.Sprintf("%.4f", c.Lookup), fmt.Sprintf("%.4f", c.Replacement), fmt.Sprintf("%.3f", m.LookupMsgsPerMiss),
			fmt.Sprintf("%.3f", m.ReplMsgsPerLocalMiss), pct(m.HintCorrectness), pct(m.UnnecessaryForwards)})
	}
	r.Tables = append(r.Tables, o)
	sarkarHintAccuracy(r, sc) // tables 5.4 and 5.6

	if _, ok := find(r.Rows, sarkarHints, "mem-disk"); ok {
		t7 := Table{Name: "table5_7", Title: fmt.Sprintf("Table 5.7: uses of server memory (hint-based, %d MB client caches, %d MB server memory), ours | seed 002 average", sc.memClientMB, sc.memServerMB),
			Header: []string{"server memory use", "hit ratio %", "access ms", "seed hit ratio %", "seed access ms"}}
		for _, u := range sarkarMemUses {
			m, _ := find(r.Rows, sarkarHints, "mem-"+u.option)
			s := seedTable57[u.option]
			t7.Rows = append(t7.Rows, []string{u.label, pct(m.ServerHitRatio), ms(m.AvgAccessMs), fmt.Sprintf("%.2f", s[0]), fmt.Sprintf("%.2f", s[1])})
		}
		r.Tables = append(r.Tables, t7)
	}
}

func sarkarPlots(r *Report, sc sarkarScale) {
	// Figure 5.1: stacked access-time breakdown per algorithm.
	var cats []string
	parts := []Series{{Label: "local"}, {Label: "remote"}, {Label: "server"}, {Label: "disk"}, {Label: "messages"}}
	for _, a := range sarkarAlgs {
		m, ok := find(r.Rows, a, "default")
		if !ok {
			continue
		}
		cats = append(cats, a)
		b := m.Breakdown
		for i, v := range []float64{b.Local, b.Remote, b.Server, b.Disk, b.Message + b.Extra} {
			parts[i].Y = append(parts[i].Y, v)
		}
	}
	r.Plots = append(r.Plots, Plot{Name: "fig5_1", Title: "Fig 5.1: block access time", YLabel: "ms per block read",
		Categories: cats, Series: parts, Bars: true, Stacked: true})
	// Figure 5.2: manager load by cause.
	cats = nil
	load := []Series{{Label: "consistency"}, {Label: "lookup"}, {Label: "replacement"}}
	for _, a := range []string{"nchance", "gms", "hints"} {
		m, ok := find(r.Rows, a, "default")
		if !ok {
			continue
		}
		cats = append(cats, a)
		c := m.ManagerByCause
		for i, v := range []float64{c.Consistency, c.Lookup, c.Replacement} {
			load[i].Y = append(load[i].Y, v)
		}
	}
	r.Plots = append(r.Plots, Plot{Name: "fig5_2", Title: "Fig 5.2: manager load", YLabel: "manager messages per access",
		Categories: cats, Series: load, Bars: true, Stacked: true})
	// Figures 5.8-5.11: sweeps.
	sweep := func(name, title, xl, yl string, algs []string, xs []float64, cfg func(i int) string, y func(sim.Metrics) float64) {
		var ss []Series
		for _, a := range algs {
			s := Series{Label: a}
			for i, x := range xs {
				if m, ok := find(r.Rows, a, cfg(i)); ok {
					s.X, s.Y = append(s.X, x), append(s.Y, y(m))
				}
			}
			if len(s.X) > 0 {
				ss = append(ss, s)
			}
		}
		r.Plots = append(r.Plots, Plot{Name: name, Title: title, XLabel: xl, YLabel: yl, Series: ss})
	}
	var mbs []float64
	for _, mb := range sc.cacheMB {
		mbs = append(mbs, float64(mb))
	}
	cacheCfg := func(i int) string {
		if sc.cacheMB[i] == 16 {
			return "default"
		}
		return fmt.Sprintf("cache-%dMB", sc.cacheMB[i])
	}
	var act []float64
	for _, a := range sc.active {
		act = append(act, 100*a)
	}
	actCfg := func(i int) string {
		if sc.active[i] == sc.defActive {
			return "default"
		}
		return fmt.Sprintf("active-%d%%", int(sc.active[i]*100+0.5))
	}
	avg := func(m sim.Metrics) float64 { return m.AvgAccessMs }
	mgr := func(m sim.Metrics) float64 { return m.ManagerMsgsPerAccess }
	main5 := sarkarAlgs[:5]
	sweep("fig5_8", "Fig 5.8: access time vs client cache size", "client cache (MB)", "ms per block read", main5, mbs, cacheCfg, avg)
	sweep("fig5_9", "Fig 5.9: manager load vs client cache size", "client cache (MB)", "manager messages per access", main5[:3], mbs, cacheCfg, mgr)
	sweep("fig5_10", "Fig 5.10: access time vs active clients", "active clients (%)", "ms per block read", main5, act, actCfg, avg)
	sweep("fig5_11", "Fig 5.11: manager load vs active clients", "active clients (%)", "manager messages per access", main5[:3], act, actCfg, mgr)
}

// sarkarHintAccuracy adds seed 002 table 5.4 (block location hint accuracy)
// and table 5.6 (unnecessary forwards) for the hint-based algorithm across
// the client cache sweep.
func sarkarHintAccuracy(r *Report, sc sarkarScale) {
	t := Table{Name: "table5_4", Title: "Table 5.4/5.6: hint-based accuracy by client cache size, ours | seed 002 average at 16 MB (correctness 99.94, absolute 99.93, false negatives 0.010, unnecessary forwards 1.97)",
		Header: []string{"config", "hint correct %", "absolute %", "false neg %", "unnecessary fwd %", "lookup msgs/miss"}}
	for _, mb := range sc.cacheMB {
		name := fmt.Sprintf("cache-%dMB", mb)
		if mb == 16 {
			name = "default"
		}
		m, ok := find(r.Rows, sarkarHints, name)
		if !ok {
			continue
		}
		t.Rows = append(t.Rows, []string{name, pct(m.HintCorrectness), pct(m.AbsoluteCorrectness),
			fmt.Sprintf("%.3f", 100*m.FalseNegatives), pct(m.UnnecessaryForwards), fmt.Sprintf("%.3f", m.LookupMsgsPerMiss)})
	}
	if len(t.Rows) > 0 {
		r.Tables = append(r.Tables, t)
	}
}
