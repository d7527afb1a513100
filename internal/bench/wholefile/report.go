package wholefile

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// PerClient is one policy's run of a clients-in-turn experiment: the
// server's bytes and the seconds of each client, in order.
type PerClient struct {
	Policy      string    `json:"policy"`
	ServerBytes []float64 `json:"server_bytes"`
	Seconds     []float64 `json:"seconds"`
}

// laterShare is the server's bytes for clients 2..n against client 1's.
func (p PerClient) laterShare() float64 {
	if len(p.ServerBytes) < 2 || p.ServerBytes[0] == 0 {
		return 0
	}
	var later float64
	for _, b := range p.ServerBytes[1:] {
		later += b
	}
	return later / float64(len(p.ServerBytes)-1) / p.ServerBytes[0]
}

// OverloadRow is one policy's overloaded-server run: each client's
// seconds (1 and 2 the first pair, 3 and 4 the second), each pair's
// (until both of it finished), when the second pair started.
type OverloadRow struct {
	Policy      string    `json:"policy"`
	Clients     []float64 `json:"client_seconds"`
	Start       float64   `json:"second_pair_start_seconds"`
	FirstPair   float64   `json:"first_pair_seconds"`
	SecondPair  float64   `json:"second_pair_seconds"`
	ServerBytes float64   `json:"server_bytes"`
	VsFirst     float64   `json:"second_pair_faster_than_first"` // 1 - second/first
	SpeedUp     float64   `json:"second_pair_speedup_vs_none"`   // 1 - t/t(none)
}

// OverheadRow is one policy's cold reads of one size by one client.
type OverheadRow struct {
	Policy   string    `json:"policy"`
	Size     int64     `json:"size"`
	Seconds  []float64 `json:"seconds"`
	Median   float64   `json:"median_seconds"`
	Overhead float64   `json:"overhead_vs_none"` // median/median(none) - 1
}

// WarmRow is one warm-up of the tree to every client.
type WarmRow struct {
	Mode        string  `json:"mode"` // independent or cluster
	Policy      string  `json:"policy"`
	Seconds     float64 `json:"seconds"`
	ServerBytes float64 `json:"server_bytes"`
	Ratio       float64 `json:"server_bytes_per_tree"`
}

// Report is the outcome of a run.
type Report struct {
	Config struct {
		Policies               []string `json:"policies"`
		StaggerSize            int64    `json:"stagger_size"`
		WebFiles               int      `json:"web_files"`
		WebMean                int64    `json:"web_mean"`
		WebReads               int      `json:"web_reads"`
		OverloadSize           int64    `json:"overload_size"`
		OverloadStart          float64  `json:"overload_start"`
		OverheadSizes          []int64  `json:"overhead_sizes"`
		OverheadReps           int      `json:"overhead_reps"`
		WarmSize               int64    `json:"warm_size"`
		WarmFiles              int      `json:"warm_files"`
		WarmClients            int      `json:"warm_clients"`
		ServerLink, ClientLink string
	} `json:"config"`
	Stagger  []PerClient       `json:"stagger,omitempty"`
	Web      []PerClient       `json:"web,omitempty"`
	Overload []OverloadRow     `json:"overload,omitempty"`
	Overhead []OverheadRow     `json:"overhead,omitempty"`
	WarmTree int64             `json:"warm_tree_bytes,omitempty"`
	Warm     []WarmRow         `json:"warmup,omitempty"`
	Skipped  map[string]string `json:"skipped,omitempty"` // policy → why
}

func newReport(cfg Config) *Report {
	r := &Report{Skipped: map[string]string{}}
	c := &r.Config
	c.Policies, c.StaggerSize, c.WebFiles, c.WebMean, c.WebReads = cfg.Policies, cfg.StaggerSize, cfg.WebFiles, cfg.WebMean, cfg.WebReads
	c.OverloadSize, c.OverloadStart, c.OverheadSizes, c.OverheadReps = cfg.OverloadSize, cfg.OverloadStart, cfg.OverheadSizes, cfg.OverheadReps
	c.WarmSize, c.WarmFiles, c.WarmClients, c.ServerLink, c.ClientLink = cfg.WarmSize, cfg.WarmFiles, cfg.WarmClients, cfg.ServerLink, cfg.ClientLink
	return r
}

func (r *Report) skip(policy string, err error) { r.Skipped[policy] = err.Error() }
func (r *Report) skipped(policy string) bool    { _, ok := r.Skipped[policy]; return ok }

// finish computes the ratios against `none`.
func (r *Report) finish() {
	for i := range r.Overload {
		if o := &r.Overload[i]; o.FirstPair > 0 {
			o.VsFirst = 1 - o.SecondPair/o.FirstPair
		}
		for _, n := range r.Overload {
			if n.Policy == "none" && n.SecondPair > 0 {
				r.Overload[i].SpeedUp = 1 - r.Overload[i].SecondPair/n.SecondPair
			}
		}
	}
	for i := range r.Overhead {
		for _, n := range r.Overhead {
			if n.Policy == "none" && n.Size == r.Overhead[i].Size && n.Median > 0 {
				r.Overhead[i].Overhead = r.Overhead[i].Median/n.Median - 1
			}
		}
	}
}

func mb(b float64) string { return fmt.Sprintf("%.1f", b/(1<<20)) }

// WriteText prints the tables.
func (r *Report) WriteText(w io.Writer) error {
	r.finish()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	perClient := func(title string, rows []PerClient, note string) {
		if len(rows) == 0 {
			return
		}
		fmt.Fprintf(tw, "%s\n", title)
		fmt.Fprintf(tw, "policy\tserver MB per client (1, 2, ...)\tseconds per client\t%s\t\n", note)
		for _, p := range rows {
			var bs, ss []string
			for i := range p.ServerBytes {
				bs = append(bs, mb(p.ServerBytes[i]))
				ss = append(ss, fmt.Sprintf("%.1f", p.Seconds[i]))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f %%\t\n", p.Policy, strings.Join(bs, " "), strings.Join(ss, " "), 100*p.laterShare())
		}
		fmt.Fprintln(tw, "\t\t\t\t")
	}
	perClient(fmt.Sprintf("stagger: one %s MB file read by each client in turn", mb(float64(r.Config.StaggerSize))), r.Stagger, "later clients / client 1")
	perClient(fmt.Sprintf("web: %d files, mean %s KB, Zipf, %d reads per client, 16 KB log append every 10 reads, clients in turn",
		r.Config.WebFiles, fmt.Sprint(r.Config.WebMean>>10), r.Config.WebReads), r.Web, "clients 2.. / client 1")
	r.writeOverload(tw)
	if len(r.Overhead) > 0 {
		fmt.Fprintf(tw, "overhead: one client reads a file cold (median of %d)\n", r.Config.OverheadReps)
		fmt.Fprintf(tw, "policy\tsize MB\tmedian s\tvs none\t\n")
		for _, o := range r.Overhead {
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%+.1f %%\t\n", o.Policy, mb(float64(o.Size)), o.Median, 100*o.Overhead)
		}
		fmt.Fprintln(tw, "\t\t\t\t")
	}
	if len(r.Warm) > 0 {
		fmt.Fprintf(tw, "warmup: a %s MB tree (%d files) to %d clients\n", mb(float64(r.WarmTree)), r.Config.WarmFiles, r.Config.WarmClients)
		fmt.Fprintf(tw, "mode\tpolicy\tseconds\tserver MB\tserver bytes / tree\t\n")
		for _, x := range r.Warm {
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%.2f\t\n", x.Mode, x.Policy, x.Seconds, mb(x.ServerBytes), x.Ratio)
		}
		fmt.Fprintln(tw, "\t\t\t\t\t")
	}
	var sk []string
	for p, why := range r.Skipped {
		sk = append(sk, p+": "+why)
	}
	slices.Sort(sk)
	for _, s := range sk {
		fmt.Fprintf(tw, "skipped %s\n", s)
	}
	return tw.Flush()
}

// writeOverload prints the overloaded server's table.
func (r *Report) writeOverload(tw io.Writer) {
	if len(r.Overload) == 0 {
		return
	}
	fmt.Fprintf(tw, "overload: two %s MB files a and b; clients 1, 2 read a, b; clients 3, 4 read a, b once %.0f %% of the first pair's bytes crossed the server's link\n",
		mb(float64(r.Config.OverloadSize)), 100*r.Config.OverloadStart)
	fmt.Fprintf(tw, "policy\tclients s (1 2 3 4)\tsecond pair at s\tfirst pair s\tsecond pair s\tfaster than first\tfaster than none's second\tserver MB\t\n")
	for _, o := range r.Overload {
		var cs []string
		for _, c := range o.Clients {
			cs = append(cs, fmt.Sprintf("%.1f", c))
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f %%\t%.1f %%\t%s\t\n", o.Policy, strings.Join(cs, " "), o.Start,
			o.FirstPair, o.SecondPair, 100*o.VsFirst, 100*o.SpeedUp, mb(o.ServerBytes))
	}
	fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t")
}

// WriteJSON writes the report.
func (r *Report) WriteJSON(w io.Writer) error {
	r.finish()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Plot draws the run's figures at paths (one per format): the server's
// bytes per client of the stagger and web experiments (one group of bars
// per client, one bar per policy), and, beside each path with "-overload"
// and "-warmup" before its extension, the overloaded server's pairs and
// the warm-ups, for the experiments that ran.
func (r *Report) Plot(paths ...string) error {
	figs := []figure{r.perClientPlot(), r.overloadPlot(), r.warmupPlot()}
	drawn := 0
	for _, f := range figs {
		if f.p == nil {
			continue
		}
		drawn++
		width := vg.Length(max(6, 1.1*float64(f.groups))) * vg.Inch
		for _, path := range paths {
			ext := filepath.Ext(path)
			if err := f.p.Save(width, 4*vg.Inch, strings.TrimSuffix(path, ext)+f.suffix+ext); err != nil {
				return fmt.Errorf("bench wholefile: save plot: %w", err)
			}
		}
	}
	if drawn == 0 {
		return fmt.Errorf("bench wholefile: nothing to plot (no experiment ran)")
	}
	return nil
}

// series is one bar per group, in one color.
type series struct {
	name string
	vals plotter.Values
}

// bars draws grouped bars: one group per name of groups, one bar per
// series in it; the figure is saved with suffix after the plot's name (no
// figure if the bars cannot be drawn).
func bars(suffix, title, ylabel string, groups []string, ss []series) figure {
	colors := []color.Color{color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x1f, 0x77, 0xb4, 0xff},
		color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}}
	p := plot.New()
	p.Title.Text, p.Y.Label.Text = title, ylabel
	w := vg.Points(10)
	for k, s := range ss {
		b, err := plotter.NewBarChart(s.vals, w)
		if err != nil {
			return figure{}
		}
		b.Color = colors[k%len(colors)]
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(k)-float64(len(ss)-1)/2)
		p.Add(b)
		p.Legend.Add(s.name, b)
	}
	p.Legend.Top = true
	p.NominalX(groups...)
	p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5 // half a group of room at each end (the legend's)
	return figure{suffix, p, len(groups)}
}

type figure = struct {
	suffix string
	p      *plot.Plot
	groups int
}

// perClientPlot is the stagger and web experiments' server MB per client.
func (r *Report) perClientPlot() figure {
	var names []string
	for _, set := range []struct {
		name string
		rows []PerClient
	}{{"stagger", r.Stagger}, {"web", r.Web}} {
		if len(set.rows) > 0 {
			for c := range set.rows[0].ServerBytes {
				names = append(names, fmt.Sprintf("%s\nclient %d", set.name, c+1))
			}
		}
	}
	var ss []series
	for _, pol := range r.Config.Policies {
		var vals plotter.Values
		found := false
		for _, set := range [][]PerClient{r.Stagger, r.Web} {
			if len(set) == 0 {
				continue
			}
			row := slices.IndexFunc(set, func(p PerClient) bool { return p.Policy == pol })
			for c := range set[0].ServerBytes {
				v := 0.0
				if row >= 0 && c < len(set[row].ServerBytes) {
					v, found = set[row].ServerBytes[c]/(1<<20), true
				}
				vals = append(vals, v)
			}
		}
		if found {
			ss = append(ss, series{pol, vals})
		}
	}
	if len(ss) == 0 {
		return figure{}
	}
	return bars("", "coopfs bench wholefile: server MB per client, clients in turn", "MB from the server", names, ss)
}

// overloadPlot is each policy's pairs' seconds in the overloaded server.
func (r *Report) overloadPlot() figure {
	return pairBars("-overload", fmt.Sprintf("overloaded server: two %s MB files, seconds per pair", mb(float64(r.Config.OverloadSize))),
		"seconds", r.Overload, [2]string{"first pair", "second pair"},
		func(o OverloadRow) (string, float64, float64) { return o.Policy, o.FirstPair, o.SecondPair })
}

// warmupPlot is the warm-ups' seconds and server bytes per tree.
func (r *Report) warmupPlot() figure {
	return pairBars("-warmup", fmt.Sprintf("warm-up of a %s MB tree to %d clients", mb(float64(r.WarmTree)), r.Config.WarmClients),
		"", r.Warm, [2]string{"seconds / 100", "server bytes / tree"},
		func(x WarmRow) (string, float64, float64) { return x.Mode + "\n" + x.Policy, x.Seconds / 100, x.Ratio })
}

// pairBars draws two bars per row (no figure without rows): of names[0]
// and names[1], the values bar gives with the row's group name.
func pairBars[T any](suffix, title, ylabel string, rows []T, names [2]string, bar func(T) (string, float64, float64)) figure {
	if len(rows) == 0 {
		return figure{}
	}
	var groups []string
	a, b := series{name: names[0]}, series{name: names[1]}
	for _, row := range rows {
		g, x, y := bar(row)
		groups = append(groups, g)
		a.vals, b.vals = append(a.vals, x), append(b.vals, y)
	}
	return bars(suffix, title, ylabel, groups, []series{a, b})
}
