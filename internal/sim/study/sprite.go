package study

import (
	"context"
	"fmt"

	"github.com/coopfs/coopfs/internal/sim"
)

// Seed 002 table 5.7 per Sprite period: server memory hit ratio (%) and
// block access time (ms) with 4 MB client caches and 16 MB server memory.
var seedTable57Periods = map[string][2][4]float64{
	"disk":    {{0.12, 0.47, 0.22, 0.20}, {3.43, 3.22, 3.89, 3.64}},
	"coop":    {{1.16, 1.96, 0.98, 1.35}, {2.86, 2.79, 3.22, 3.12}},
	"discard": {{1.55, 2.56, 1.22, 1.76}, {2.66, 2.58, 2.81, 2.74}},
}

// SpriteStudy runs seed 002's algorithms on the four generated Sprite
// periods (sim.SpritePeriods: the office generator fitted to the workload
// statistics of tables 5.1 and 5.5) with table 5.2's parameters, and reports
// each period's workload statistics, manager load, lookup messages, hint
// correctness and table 5.7 beside the thesis. Quick runs a tenth of every
// period.
func SpriteStudy(ctx context.Context, env *Env) (*Report, error) {
	periods := sim.SpritePeriods()
	r := &Report{Study: "sprite"}
	base := env.Params
	base.Clients = 42
	blocksPerMB := int((1 << 20) / base.BlockSize)
	var cfgs, mem []Config
	stats := make([]sim.WorkloadStats, len(periods))
	for i, p := range periods {
		g := p.Gen
		if env.Quick {
			g.Accesses /= 10
		}
		w, err := sim.Generate(g)
		if err != nil {
			return nil, err
		}
		if stats[i], err = sim.MeasureWorkload(w); err != nil {
			return nil, err
		}
		cfgs = append(cfgs, Config{Name: p.Name, Params: base, Workload: w})
		for _, u := range sarkarMemUses {
			q := base
			q.ClientCacheBlocks, q.ServerCacheBlocks = 4*blocksPerMB, 16*blocksPerMB
			mem = append(mem, Config{Name: p.Name + "/mem-" + u.option, Params: q.WithOption("server_memory", u.option), Workload: w})
		}
	}
	if env.Quick {
		r.Notes = append(r.Notes, "quick: a tenth of every period's accesses (the statistics then differ from the thesis's)")
	}
	env.progressf("sprite: %d periods × %d algorithms, then table 5.7", len(periods), len(sarkarAlgs))
	rows, err := RunMatrix(ctx, env, sarkarAlgs, cfgs)
	if err != nil {
		return nil, err
	}
	more, err := RunMatrix(ctx, env, []string{sarkarHints}, mem)
	if err != nil {
		return nil, err
	}
	r.Rows = append(rows, more...)
	spriteTables(r, periods, stats)
	return r, nil
}

func spriteTables(r *Report, periods []sim.SpritePeriod, stats []sim.WorkloadStats) {
	ws := Table{Name: "workload", Title: "Tables 5.1 and 5.5: workload statistics, ours | thesis (Sprite)",
		Header: []string{"period", "block reads", "unique blocks", "active clients", "sharing", "invalidations/access",
			"thesis reads", "thesis unique", "thesis active", "thesis sharing", "thesis inval."}}
	for i, p := range periods {
		s, t := stats[i], p.Thesis
		ws.Rows = append(ws.Rows, []string{p.Name, fmt.Sprint(s.BlockReads), fmt.Sprint(s.UniqueBlocks), fmt.Sprint(s.ActiveClients),
			fmt.Sprintf("%.2f", s.Sharing), fmt.Sprintf("%.4f", s.InvalidationRate),
			fmt.Sprint(t.BlockReads), fmt.Sprint(t.UniqueBlocks), fmt.Sprint(t.ActiveClients), fmt.Sprintf("%.2f", t.Sharing), fmt.Sprintf("%.3f", t.InvalidationRate)})
	}
	r.Tables = append(r.Tables, ws)

	o := Table{Name: "overhead", Title: "Manager load (messages per access), lookup messages per local miss and hint correctness; thesis: hints' manager load up to ~30x below GMS and N-chance, 2.001 lookup messages, 99.94 % correct hints",
		Header: []string{"period", "nchance mgr", "gms mgr", "hints mgr", "gms/hints", "nchance/hints", "hints lookup/miss", "hint correct %", "hints ms", "gms ms", "nchance ms", "globallru ms", "optimal ms", "baseline ms"}}
	for _, p := range periods {
		n, _ := find(r.Rows, "nchance", p.Name)
		g, _ := find(r.Rows, "gms", p.Name)
		h, _ := find(r.Rows, "hints", p.Name)
		l, _ := find(r.Rows, "globallru", p.Name)
		op, _ := find(r.Rows, "optimal", p.Name)
		b, _ := find(r.Rows, "baseline", p.Name)
		ratio := func(a, b float64) string {
			if b == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f", a/b)
		}
		o.Rows = append(o.Rows, []string{p.Name, fmt.Sprintf("%.4f", n.ManagerMsgsPerAccess), fmt.Sprintf("%.4f", g.ManagerMsgsPerAccess),
			fmt.Sprintf("%.4f", h.ManagerMsgsPerAccess), ratio(g.ManagerMsgsPerAccess, h.ManagerMsgsPerAccess),
			ratio(n.ManagerMsgsPerAccess, h.ManagerMsgsPerAccess), fmt.Sprintf("%.3f", h.LookupMsgsPerMiss), pct(h.HintCorrectness),
			ms(h.AvgAccessMs), ms(g.AvgAccessMs), ms(n.AvgAccessMs), ms(l.AvgAccessMs), ms(op.AvgAccessMs), ms(b.AvgAccessMs)})
	}
	r.Tables = append(r.Tables, o)

	t7 := Table{Name: "table5_7", Title: "Table 5.7 per period: server memory hit ratio (%) and access time (ms), hint-based, 4 MB client caches, 16 MB server memory, ours | thesis",
		Header: []string{"period", "use", "hit %", "ms", "thesis hit %", "thesis ms"}}
	for i, p := range periods {
		for _, u := range sarkarMemUses {
			m, _ := find(r.Rows, sarkarHints, p.Name+"/mem-"+u.option)
			s := seedTable57Periods[u.option]
			t7.Rows = append(t7.Rows, []string{p.Name, u.label, pct(m.ServerHitRatio), ms(m.AvgAccessMs),
				fmt.Sprintf("%.2f", s[0][i]), fmt.Sprintf("%.2f", s[1][i])})
		}
	}
	r.Tables = append(r.Tables, t7)
}
