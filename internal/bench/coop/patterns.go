package coop

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coopfs/coopfs/internal/obs"
)

// Variants of the synthetic benchmarks: a policy, and for directory
// whether discard notifications are sent.
const (
	VarNone        = "none"
	VarDirectory   = "directory"
	VarNoDiscard   = "directory-nodiscard"
	VarHints       = "hints"
	VarBalanced    = "directory-balanced" // serve --forward-choice balanced
	runCold        = "cold"
	runWarm        = "warm"
	patternsSeed   = 1
	patternsFileNm = "dataset"
)

// PatternsConfig is the synthetic benchmarks (seed 000 §IV-D) or, with
// the variants directory and directory-nodiscard, the discard comparison.
type PatternsConfig struct {
	Common
	Name        string // "patterns" or "discard": names the report and plots
	Clients     int
	Patterns    []string
	Variants    []string
	Size        int64
	Reads       int
	BlockSize   string // serve --block-size; also the read size
	ClientCache string
	// DiscardQueue is the mounts' --discard-queue (0: the mount's default).
	DiscardQueue int
}

// PatternRow is one (pattern, variant, run).
type PatternRow struct {
	Pattern      string    `json:"pattern"`
	Variant      string    `json:"variant"`
	Run          string    `json:"run"` // cold, warm
	MeanUS       float64   `json:"mean_block_read_us"`
	ClientMeanUS []float64 `json:"client_mean_us"`
	ClientP99US  []float64 `json:"client_p99_us"`
	WallS        float64   `json:"wall_s"`
	Direct       bool      `json:"o_direct"`
	Verified     bool      `json:"verified"`
	Stats        Stats     `json:"stats"`
}

// PatternsReport is the result of RunPatterns.
type PatternsReport struct {
	Name        string       `json:"name"`
	Clients     int          `json:"clients"`
	Size        int64        `json:"size"`
	Reads       int          `json:"reads_per_client"`
	BlockSize   string       `json:"block_size"`
	ClientCache string       `json:"client_cache"`
	ServerLink  string       `json:"server_link"`
	ClientLink  string       `json:"client_link"`
	Rows        []PatternRow `json:"rows"`
	ElapsedSecs float64      `json:"elapsed_s"`
}

// RunPatterns runs every pattern under every variant, each on a fresh
// cluster: a cold run (empty client caches) and then a warm run.
func RunPatterns(ctx context.Context, cfg PatternsConfig) (*PatternsReport, error) {
	start := time.Now()
	bs, err := ParseSize(cfg.BlockSize)
	if err != nil {
		return nil, err
	}
	rep := &PatternsReport{Name: cfg.Name, Clients: cfg.Clients, Size: cfg.Size, Reads: cfg.Reads,
		BlockSize: cfg.BlockSize, ClientCache: cfg.ClientCache, ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink}
	for _, p := range cfg.Patterns {
		if _, err := Offsets(p, 1, 1, 0, 1, 1); err != nil {
			return nil, err
		}
	}
	export, _, err := cfg.dataset(patternsFileNm, cfg.Size)
	if err != nil {
		return nil, err
	}
	for _, pat := range cfg.Patterns {
		for _, v := range cfg.Variants {
			rows, err := patternOnce(ctx, &cfg, export, pat, v, int(bs))
			rep.Rows = append(rep.Rows, rows...)
			if err != nil {
				rep.ElapsedSecs = time.Since(start).Seconds()
				return rep, fmt.Errorf("%s %s: %w", pat, v, err)
			}
		}
	}
	rep.ElapsedSecs = time.Since(start).Seconds()
	return rep, nil
}

func patternOnce(ctx context.Context, cfg *PatternsConfig, export, pat, variant string, bs int) ([]PatternRow, error) {
	cc := clusterConfig{Clients: cfg.Clients, ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink,
		BlockSize: cfg.BlockSize, ClientCache: cfg.ClientCache, ServerCache: serverCacheFor(cfg.Size),
		Export: export, Dir: filepath.Join(cfg.Dir, fmt.Sprintf("%s-%s-%s", cfg.Name, pat, variant))}
	switch variant {
	case VarNone:
		cc.Policy = "none"
	case VarDirectory:
		cc.Policy = "directory"
	case VarNoDiscard:
		cc.Policy, cc.NoDiscard = "directory", true
	case VarBalanced:
		cc.Policy = VarBalanced
	case VarHints:
		cc.Policy = "hints"
	default:
		return nil, fmt.Errorf("unknown variant %q: want none, directory, directory-nodiscard, directory-balanced or hints", variant)
	}
	cc.DiscardQueue = cfg.DiscardQueue
	cfg.progress("%s %s %s: starting testbed with %d clients", cfg.Name, pat, variant, cfg.Clients)
	c, err := startCluster(ctx, cfg.Exec, cc)
	if err != nil {
		return nil, err
	}
	defer c.close()
	if err := c.warm(ctx, []string{patternsFileNm}); err != nil {
		return nil, err
	}
	var rows []PatternRow
	for _, run := range []string{runCold, runWarm} {
		startAt := time.Now().Add(500 * time.Millisecond)
		args := func(i int, m *mount) []string {
			return []string{"--mode", pat, "--file", filepath.Join(m.dir, patternsFileNm),
				"--export-file", filepath.Join(export, patternsFileNm), "--io", strconv.Itoa(bs),
				"--reads", strconv.Itoa(cfg.Reads), "--client", strconv.Itoa(i), "--clients", strconv.Itoa(cfg.Clients),
				"--seed", strconv.Itoa(patternsSeed), "--start-at", strconv.FormatInt(startAt.UnixNano(), 10)}
		}
		res, st, err := c.measure(ctx, pat+"-"+run, nil, args, nil, nil)
		if err != nil {
			return rows, err
		}
		row := PatternRow{Pattern: pat, Variant: variant, Run: run, Stats: st, Verified: true, Direct: true}
		var first, last int64
		for _, r := range res {
			row.ClientMeanUS = append(row.ClientMeanUS, r.MeanUS)
			row.ClientP99US = append(row.ClientP99US, r.P99US)
			row.MeanUS += r.MeanUS / float64(len(res))
			row.Verified = row.Verified && r.Verified
			row.Direct = row.Direct && r.Direct
			if first == 0 || r.StartNS < first {
				first = r.StartNS
			}
			last = max(last, r.EndNS)
		}
		row.WallS = float64(last-first) / 1e9
		rows = append(rows, row)
		cfg.progress("%s %-14s %-19s %s: mean block read %7.0f µs, wall %.1f s, local %.0f peer %.0f server %.0f, forwards %.0f misses %.0f (%.2f%%), cpu %.0f%%",
			cfg.Name, pat, variant, run, row.MeanUS, row.WallS, st.ReadsBy(obs.LayerLocalMemory), st.ReadsBy(obs.LayerPeer),
			st.ReadsBy(obs.LayerServerMemory)+st.ReadsBy(obs.LayerServerDisk), st.Forwards, st.ForwardMisses,
			100*st.ForwardMissRate(), 100*st.MachineCPUBusy)
	}
	return rows, nil
}

func (r *PatternsReport) find(pat, variant, run string) *PatternRow {
	for i := range r.Rows {
		if x := &r.Rows[i]; x.Pattern == pat && x.Variant == variant && x.Run == run {
			return x
		}
	}
	return nil
}

// Table prints the block read times, the reads by layer and the forward
// hits and misses, and per client the misses (seed tables 2-5).
func (r *PatternsReport) Table(w io.Writer) {
	fmt.Fprintf(w, "%s: %d clients, %d reads of %s each, %d MB data set, client caches %s, server link %s, client links %s\n",
		r.Name, r.Clients, r.Reads, r.BlockSize, r.Size/1e6, r.ClientCache, r.ServerLink, r.ClientLink)
	t := newTab(w)
	fmt.Fprintln(t, "pattern\trun\tvariant\tmean read µs\tvs none\tlocal\tpeer\tserver\tserved by server\tforwards\tfwd hits\tfwd misses\tmiss rate\twall s\tCPU\tok")
	for _, row := range r.Rows {
		s := row.Stats
		vs := ""
		if base := r.find(row.Pattern, VarNone, row.Run); base != nil && row.Variant != VarNone && base.MeanUS > 0 {
			vs = fmt.Sprintf("%+.0f%%", 100*(row.MeanUS/base.MeanUS-1))
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%.0f\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f%%\t%.1f\t%.0f%%\t%v\n",
			row.Pattern, row.Run, row.Variant, row.MeanUS, vs,
			s.ReadsBy(obs.LayerLocalMemory), s.ReadsBy(obs.LayerPeer),
			s.ReadsBy(obs.LayerServerMemory)+s.ReadsBy(obs.LayerServerDisk), s.ServedByServer, s.Forwards,
			s.Total(func(c *ClientStats) float64 { return c.ForwardHits }), s.ForwardMisses,
			100*s.ForwardMissRate(), row.WallS, 100*s.MachineCPUBusy, row.Verified)
	}
	t.Flush()
	for _, what := range []string{"hits", "misses"} {
		fmt.Fprintf(w, "\nforward %s at each client (directory variants; seed tables 2-3)\n", what)
		t = newTab(w)
		hdr := []string{"pattern", "run", "variant"}
		for i := range r.Clients {
			hdr = append(hdr, strconv.Itoa(i+1))
		}
		fmt.Fprintln(t, strings.Join(hdr, "\t"))
		for _, row := range r.Rows {
			if row.Variant == VarNone {
				continue
			}
			cols := []string{row.Pattern, row.Run, row.Variant}
			for _, c := range row.Stats.Clients {
				v := c.ForwardHits
				if what == "misses" {
					v = c.ForwardMisses
				}
				cols = append(cols, strconv.FormatFloat(v, 'f', 0, 64))
			}
			fmt.Fprintln(t, strings.Join(cols, "\t"))
		}
		t.Flush()
	}
}

// Plots: mean block read time per pattern and run for each variant
// (figure 6), and the forward miss rate of the directory variants
// (tables 4-5).
func (r *PatternsReport) Plots() []Plot {
	var cats []string
	var pats []string
	var variants []string
	seenP, seenV := map[string]bool{}, map[string]bool{}
	for _, row := range r.Rows {
		if !seenP[row.Pattern] {
			seenP[row.Pattern] = true
			pats = append(pats, row.Pattern)
		}
		if !seenV[row.Variant] {
			seenV[row.Variant] = true
			variants = append(variants, row.Variant)
		}
	}
	short := map[string]string{PatSequential: "seq", PatRandom: "random", PatHotcoldLocal: "hc-local", PatHotcoldGlobal: "hc-global"}
	for _, p := range pats {
		cats = append(cats, short[p]+"\n"+runCold, short[p]+"\n"+runWarm)
	}
	lat := Plot{Name: "coop-" + r.Name + "-readtime", Bars: true, Categories: cats,
		Title:  fmt.Sprintf("Average 4 KiB block read time, %d clients", r.Clients),
		YLabel: "mean block read time (µs)"}
	miss := Plot{Name: "coop-" + r.Name + "-missrate", Bars: true, Categories: cats,
		Title: "Forward miss rate", YLabel: "forward misses / forwards (%)"}
	for _, v := range variants {
		sl, sm := Series{Label: v}, Series{Label: v}
		for _, p := range pats {
			for _, run := range []string{runCold, runWarm} {
				row := r.find(p, v, run)
				var y, m float64
				if row != nil {
					y, m = row.MeanUS, 100*row.Stats.ForwardMissRate()
				}
				sl.Y, sm.Y = append(sl.Y, y), append(sm.Y, m)
			}
		}
		lat.Series = append(lat.Series, sl)
		if v != VarNone {
			miss.Series = append(miss.Series, sm)
		}
	}
	return []Plot{lat, miss}
}
