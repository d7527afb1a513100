package study

// The nasd study: seed 004 (Caching for NASD) figures 3-7 in the simulator —
// server-side schemes over the trace configurations (figure 3), the 1-Chance
// variants (figure 4), the nine server/client combinations (figure 5), and
// the sensitivity of 1-N vs 1-1 to the client cache size (figure 6) and to
// the hops between clients and servers (figure 7).

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/coopfs/coopfs/internal/coord/servercoop"
	"github.com/coopfs/coopfs/internal/sim/nasd"
)

// NASDConfig configures the nasd study. The system is seed 004 table 2
// (nasd.DefaultConfig); the workload nasd.DefaultWorkload at every trace
// configuration.
type NASDConfig struct {
	// Quick runs at 1/8 scale: caches and working sets alike (a few seconds).
	Quick bool `json:"quick"`
	// WarmUpFraction of each run's accesses warms the caches (0.25).
	WarmUpFraction float64 `json:"warmup_fraction"`
	Seed           uint64  `json:"seed"`
	// Progress, if set, is told about each run as it starts.
	Progress func(msg string) `json:"-"`
}

// NASDPoint is one run: a point of one of the seed's figures.
type NASDPoint struct {
	Figure    string     `json:"figure"`    // fig3 ... fig7
	Algorithm string     `json:"algorithm"` // nasd-<server>-<client> or the scheme/variant label
	Config    string     `json:"config"`    // "default" (seed 004 table 2, configuration 8) or what differs
	Series    string     `json:"series"`    // the curve in the figure
	X         float64    `json:"x"`         // trace configuration, client cache blocks, or hops
	AvgMs     float64    `json:"avg_access_ms"`
	MissRate  float64    `json:"block_miss_rate"`
	LocalHit  float64    `json:"local_hit_ratio"`
	ForwardMs float64    `json:"forward_ms_per_access"`
	Stats     nasd.Stats `json:"stats"`
}

// NASDResult is the whole study.
type NASDResult struct {
	Config NASDConfig  `json:"config"`
	Points []NASDPoint `json:"points"`
}

var (
	nasdN    = nasd.Side{Scheme: servercoop.NonCoop}
	nasdG    = nasd.Side{Scheme: servercoop.Global}
	nasd1    = nasd.Side{Scheme: servercoop.OneChance, Target: servercoop.Manager}
	nasdVars = []nasd.Side{nasd1,
		{Scheme: servercoop.OneChance, Target: servercoop.Random},
		{Scheme: servercoop.OneChance, Target: servercoop.Hints},
		{Scheme: servercoop.OneChance, Target: servercoop.Better},
		{Scheme: servercoop.OneChance, Target: servercoop.Manager, ReturnOnHit: true}}
)

// NASD runs the study.
func NASD(ctx context.Context, cfg NASDConfig) (*NASDResult, error) {
	if cfg.WarmUpFraction == 0 {
		cfg.WarmUpFraction = 0.25
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	r := &NASDResult{Config: cfg}
	base := nasd.DefaultConfig()
	base.Seed = cfg.Seed
	wbase := nasd.DefaultWorkload()
	wbase.Seed = cfg.Seed
	if cfg.Quick {
		base.ServerCacheBlocks /= 8
		base.ClientCacheBlocks /= 8
		wbase.Scale = 0.125
	}
	run := func(fig, series string, x float64, spread int, c nasd.Config) error {
		wc := wbase
		wc.Spread = spread
		w, err := nasd.NewWorkload(wc)
		if err != nil {
			return err
		}
		label := fmt.Sprintf("config%d", spread)
		if spread == wbase.Servers {
			label = "default"
		}
		if c.ClientCacheBlocks != base.ClientCacheBlocks {
			label += fmt.Sprintf(",client_cache=%d", c.ClientCacheBlocks)
		}
		if c.Hops != base.Hops {
			label += fmt.Sprintf(",hops=%d", c.Hops)
		}
		alg := "nasd-" + c.Server.Label() + "-" + c.Client.Label()
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf("%s %s %s", fig, alg, label))
		}
		n := int64(0)
		if all, err := countAccesses(w); err == nil {
			n = int64(float64(all) * cfg.WarmUpFraction)
		}
		st, err := nasd.Run(ctx, c, w, n)
		if err != nil {
			return fmt.Errorf("%s %s %s: %w", fig, alg, label, err)
		}
		rd := float64(max(st.Reads, 1))
		r.Points = append(r.Points, NASDPoint{Figure: fig, Algorithm: alg, Config: label, Series: series, X: x,
			AvgMs: st.AvgMs(), MissRate: st.MissRate(), LocalHit: float64(st.LocalHits) / rd,
			ForwardMs: st.ForwardMs / rd, Stats: st})
		return nil
	}
	configs := make([]int, wbase.Servers)
	for i := range configs {
		configs[i] = i + 1
	}
	// Figures 3 and 4: servers only (no client caches).
	for _, k := range configs {
		for _, sv := range []nasd.Side{nasdN, nasdG, nasd1} {
			c := base
			c.ClientCacheBlocks, c.Server, c.Client = 0, sv, nasdN
			if err := run("fig3", sv.Scheme.String(), float64(k), k, c); err != nil {
				return nil, err
			}
		}
		for _, sv := range nasdVars {
			c := base
			c.ClientCacheBlocks, c.Server, c.Client = 0, sv, nasdN
			if err := run("fig4", sv.Label(), float64(k), k, c); err != nil {
				return nil, err
			}
		}
	}
	// Figure 5: the nine combinations.
	for _, k := range configs {
		for _, sv := range []nasd.Side{nasdN, nasdG, nasd1} {
			for _, cl := range []nasd.Side{nasdN, nasdG, nasd1} {
				c := base
				c.Server, c.Client = sv, cl
				if err := run("fig5", sv.Scheme.Letter()+"-"+cl.Scheme.Letter(), float64(k), k, c); err != nil {
					return nil, err
				}
			}
		}
	}
	// Figures 6 and 7: 1-N vs 1-1 on configuration 8.
	for _, mult := range []float64{0.5, 1, 2, 4, 8} {
		for _, cl := range []nasd.Side{nasdN, nasd1} {
			c := base
			c.ClientCacheBlocks = int(float64(base.ClientCacheBlocks) * mult)
			c.Client = cl
			if err := run("fig6", "1-"+cl.Scheme.Letter(), float64(c.ClientCacheBlocks), wbase.Servers, c); err != nil {
				return nil, err
			}
		}
	}
	for _, h := range []int{1, 2, 4, 8, 16, 32} {
		for _, cl := range []nasd.Side{nasdN, nasd1} {
			c := base
			c.Hops, c.Client = h, cl
			if err := run("fig7", "1-"+cl.Scheme.Letter(), float64(h), wbase.Servers, c); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

func countAccesses(w *nasd.Workload) (int64, error) {
	src, err := w.Open()
	if err != nil {
		return 0, err
	}
	var n int64
	for {
		if _, err := src.Next(); err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		n++
	}
}

var nasdFigures = []struct{ id, title, x string }{
	{"fig3", "Server side schemes vs workload distribution (seed 004 figure 3)", "trace configuration (1 = most uneven)"},
	{"fig4", "1-Chance variants (seed 004 figure 4)", "trace configuration (1 = most uneven)"},
	{"fig5", "Server-client combinations (seed 004 figure 5)", "trace configuration (1 = most uneven)"},
	{"fig6", "Sensitivity to the client cache size, configuration 8 (seed 004 figure 6)", "client cache (blocks)"},
	{"fig7", "Sensitivity to hops between clients and servers (seed 004 figure 7)", "hops"},
}

// series returns the figure's curves in order of first appearance.
func (r *NASDResult) series(fig string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range r.Points {
		if p.Figure == fig && !seen[p.Series] {
			seen[p.Series] = true
			out = append(out, p.Series)
		}
	}
	return out
}

func (r *NASDResult) xs(fig string) []float64 {
	var out []float64
	seen := map[float64]bool{}
	for _, p := range r.Points {
		if p.Figure == fig && !seen[p.X] {
			seen[p.X] = true
			out = append(out, p.X)
		}
	}
	return out
}

func (r *NASDResult) at(fig, series string, x float64) *NASDPoint {
	for i := range r.Points {
		if p := &r.Points[i]; p.Figure == fig && p.Series == series && p.X == x {
			return p
		}
	}
	return nil
}

// WriteText writes one table per figure: average response time per block
// in ms (block miss rate in parentheses), a row per x, a column per series.
func (r *NASDResult) WriteText(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	for _, f := range nasdFigures {
		fmt.Fprintf(tw, "%s\n%s\t", f.title, f.x)
		ser := r.series(f.id)
		for _, s := range ser {
			fmt.Fprintf(tw, "%s\t", s)
		}
		fmt.Fprintln(tw)
		for _, x := range r.xs(f.id) {
			fmt.Fprintf(tw, "%g\t", x)
			for _, s := range ser {
				if p := r.at(f.id, s, x); p != nil {
					fmt.Fprintf(tw, "%.3f (%.1f%%)\t", p.AvgMs, 100*p.MissRate)
				} else {
					fmt.Fprint(tw, "-\t")
				}
			}
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, "average response time per block in ms (block miss rate)")
	return tw.Flush()
}

// WriteCSV writes one row per run.
func (r *NASDResult) WriteCSV(out io.Writer) error {
	w := csv.NewWriter(out)
	w.Write([]string{"figure", "algorithm", "config", "series", "x", "avg_access_ms", "block_miss_rate",
		"local_hit_ratio", "remote_client_hits", "server_hits", "remote_server_hits", "disk_reads", "forward_ms_per_access"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, p := range r.Points {
		s := p.Stats
		w.Write([]string{p.Figure, p.Algorithm, p.Config, p.Series, f(p.X), f(p.AvgMs), f(p.MissRate), f(p.LocalHit),
			strconv.FormatInt(s.RemoteClient, 10), strconv.FormatInt(s.ServerHits, 10),
			strconv.FormatInt(s.RemoteServer, 10), strconv.FormatInt(s.DiskReads, 10), f(p.ForwardMs)})
	}
	w.Flush()
	return w.Error()
}

// WriteJSON writes the result as one object (config and points).
func (r *NASDResult) WriteJSON(out io.Writer) error {
	e := json.NewEncoder(out)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// Plot draws figures 3-7 into dir as nasd-figN.ext (png or svg).
func (r *NASDResult) Plot(dir, ext string) ([]string, error) {
	var files []string
	for _, f := range nasdFigures {
		fig := plot.New()
		fig.Title.Text = f.title
		fig.X.Label.Text = f.x
		fig.Y.Label.Text = "average response time per block (ms)"
		var args []any
		for _, s := range r.series(f.id) {
			var pts plotXYs
			for _, x := range r.xs(f.id) {
				if p := r.at(f.id, s, x); p != nil {
					pts = append(pts, [2]float64{x, p.AvgMs})
				}
			}
			args = append(args, s, pts)
		}
		if err := plotutil.AddLinePoints(fig, args...); err != nil {
			return nil, fmt.Errorf("%s: %w", f.id, err)
		}
		if f.id == "fig6" || f.id == "fig7" {
			fig.X.Scale = plot.LogScale{}
			fig.X.Tick.Marker = plot.LogTicks{Prec: -1}
		}
		fig.Legend.Top = true
		p := filepath.Join(dir, "nasd-"+f.id+"."+ext)
		if err := fig.Save(7*vg.Inch, 4.5*vg.Inch, p); err != nil {
			return nil, fmt.Errorf("save %s: %w", p, err)
		}
		files = append(files, p)
	}
	return files, nil
}

// plotXYs adapts points to plotter.XYer.
type plotXYs [][2]float64

func (p plotXYs) Len() int                    { return len(p) }
func (p plotXYs) XY(i int) (float64, float64) { return p[i][0], p[i][1] }
