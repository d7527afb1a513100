package meta

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/coopfs/coopfs/internal/bench/report"
)

// WriteJSON writes the result as indented JSON.
func (res *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// WriteText prints the side-by-side table: one line per workload with the
// three targets' median times, the ratios and the coopfs client's
// messages; then the message rates, the close-to-open phase and the notes.
func (res *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	r := res.Report
	fmt.Fprintf(&b, "coopfs bench meta  (%s; %d CPUs, kernel %s, %s)\n", r.Started.Format("2006-01-02 15:04"), r.Host.CPUs, r.Host.Kernel, r.Host.Go)
	if r.Command != "" {
		fmt.Fprintf(&b, "command: %s\n", r.Command)
	}
	fmt.Fprintf(&b, "tree: %s: %d files, %d directories, %.0f MB; passthrough: %s; medians of %s repetitions\n\n",
		res.Tree.Source, res.Tree.Files, res.Tree.Dirs, float64(res.Tree.Bytes)/1e6, r.Params["passthrough"], r.Params["repeat"])
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\text4 s\tpassthrough s\tcoopfs s\tpassthrough/ext4\tcoopfs/passthrough\ttarget\tcoopfs messages\tby type\t")
	for _, st := range res.Steps {
		e, p, c := r.Get(RowKey(st.Key, TargetExt4)), r.Get(RowKey(st.Key, TargetPass)), r.Get(RowKey(st.Key, TargetCoopfs))
		verdict := ""
		if c.Met != nil {
			verdict = fmt.Sprintf("<= %.1f %s", c.Target, map[bool]string{true: "met", false: "MISSED"}[*c.Met])
		}
		msgs := ""
		if m := r.Get("msgs/" + st.Key); m != nil {
			msgs = fmt.Sprintf("%.0f", m.Median)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\t%s\t%s\t%s\t\n", st.Key, e.Median, p.Median, c.Median,
			p.Ratio, c.Ratio, verdict, msgs, res.topTypes(st.Key, 4))
	}
	tw.Flush()
	if c := r.Get(RowKey(StepRTT, TargetCoopfs)); c != nil && len(c.Samples) > 0 {
		verdict := "MISSED"
		if c.Median <= TargetRTTMus {
			verdict = "met"
		}
		e, p := r.Get(RowKey(StepRTT, TargetExt4)), r.Get(RowKey(StepRTT, TargetPass))
		p90 := func(t string) float64 { return r.Get(RowKey(StepRTT+"-p90", t)).Median }
		fmt.Fprintf(&b, "\nmetadata round trip (lstat of %d names whose entries expired; median / p90 µs): ext4 %.1f / %.1f, passthrough %.1f / %.1f, coopfs %.1f / %.1f (target <= %.0f µs median: %s; coopfs sent %s)\n",
			RTTFiles, e.Median, p90(TargetExt4), p.Median, p90(TargetPass), c.Median, p90(TargetCoopfs), TargetRTTMus, verdict, res.topTypes(StepRTT, 4))
		b.WriteString(res.rttCosts())
	}
	if pd, pf := r.Get("msgs-per-dir/"+StepGrepWarm), r.Get("msgs-per-file/"+StepGrepWarm); pd != nil {
		verdict := "MISSED"
		if m := r.Get("msgs/" + StepGrepWarm); m != nil && m.Median <= float64(res.Tree.Dirs) {
			verdict = "met"
		}
		fmt.Fprintf(&b, "\nwarm grep -r: %.2f messages per directory, %.2f per file (target: at most 1 per directory and none per file: %s)\n",
			pd.Median, pf.Median, verdict)
	}
	if c := res.C2O; c != nil {
		fmt.Fprintf(&b, "\nclose-to-open across two coopfs mounts, %d files, %.1f MB:\n", c.Files, float64(c.Bytes)/1e6)
		for _, rd := range c.Rounds {
			check := "every byte as written"
			if rd.Stale > 0 {
				check = fmt.Sprintf("STALE: %d files differ from what was written (first %s)", rd.Stale, rd.FirstStale)
			}
			fmt.Fprintf(&b, "  %s: write %.2f s, read %.2f s (%s; reader sent %s)\n", rd.Name, rd.WriteSecs, rd.ReadSecs, check, fmtTypes(rd.ReadMessages, 4))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// topTypes formats the n most frequent message types of a step (medians).
func (res *Result) topTypes(step string, n int) string {
	m := map[string]float64{}
	for typ, v := range res.Messages[step] {
		if med := report.Median(v); med > 0 {
			m[typ] = med
		}
	}
	return fmtTypes(m, n)
}

func fmtTypes(m map[string]float64, n int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for i, k := range keys {
		if i == n {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// ratioTo is the median of the per-repetition ratios row / ceiling, as the
// table gives them.
func ratioTo(row, ceiling *report.Row) float64 {
	var rs []float64
	for i := range min(len(row.Samples), len(ceiling.Samples)) {
		if ceiling.Samples[i] > 0 {
			rs = append(rs, row.Samples[i]/ceiling.Samples[i])
		}
	}
	return report.Median(rs)
}

// Plot draws, per workload, each target's time divided by the
// passthrough's (the median of the per-repetition ratios; the passthrough is 1), with the targets' lines, and
// saves it to each of paths (.png, .svg, .pdf).
func (res *Result) Plot(paths ...string) error {
	r := res.Report
	var names []string
	series := map[string]plotter.Values{}
	for _, st := range res.Steps {
		p := r.Get(RowKey(st.Key, TargetPass))
		if p == nil || p.Median <= 0 {
			continue
		}
		names = append(names, st.Key)
		for _, t := range []string{TargetExt4, TargetPass, TargetCoopfs} {
			series[t] = append(series[t], ratioTo(r.Get(RowKey(st.Key, t)), p))
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("bench meta: nothing to plot")
	}
	pl := plot.New()
	pl.Title.Text = "coopfs bench meta: time relative to the FUSE passthrough (median of per-repetition ratios; lower is better)"
	pl.Y.Label.Text = "time / passthrough time"
	w := vg.Points(14)
	colors := map[string]color.Color{
		TargetExt4:   color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff},
		TargetPass:   color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		TargetCoopfs: color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	}
	top := 2.2
	for i, t := range []string{TargetExt4, TargetPass, TargetCoopfs} {
		bars, err := plotter.NewBarChart(series[t], w)
		if err != nil {
			return err
		}
		bars.Color = colors[t]
		bars.Offset = vg.Length(i-1) * w
		pl.Add(bars)
		pl.Legend.Add(t, bars)
		top = max(top, slices.Max(series[t]))
	}
	for _, x := range []struct {
		y     float64
		label string
	}{{TargetWarm, "warm target 1.3"}, {TargetCold, "cold, tar, rm target 2"}} {
		line := plotter.NewFunction(func(float64) float64 { return x.y })
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		line.Color = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
		if x.y == TargetWarm {
			line.Color = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
		}
		pl.Add(line)
		pl.Legend.Add(x.label, line)
	}
	pl.Add(plotter.NewGrid())
	pl.Legend.Top, pl.Legend.Left = true, true
	pl.Y.Min, pl.Y.Max = 0, top*1.3
	pl.X.Min, pl.X.Max = -0.6, float64(len(names))-0.4
	pl.NominalX(names...)
	pl.X.Tick.Label.Rotation = 0.5
	pl.X.Tick.Label.XAlign = draw.XRight
	width := vg.Length(max(6, 0.9*float64(len(names)))) * vg.Inch
	for _, path := range paths {
		if err := pl.Save(width, 4.5*vg.Inch, path); err != nil {
			return fmt.Errorf("bench meta: save plot: %w", err)
		}
	}
	return nil
}

// rttCosts is the probe's per-call CPU time and context switches of each
// process, one line per target ("" when none were measured).
func (res *Result) rttCosts() string {
	var b strings.Builder
	for _, t := range []string{TargetExt4, TargetPass, TargetCoopfs} {
		var parts []string
		for _, role := range []string{callerRole, roleDaemon, roleMount, roleServer} {
			cpu := res.Get(RowKey(StepRTT+"-cpu", t+"-"+role))
			sw := res.Get(RowKey(StepRTT+"-switches", t+"-"+role))
			pre := res.Get(RowKey(StepRTT+"-preempted", t+"-"+role))
			if cpu == nil || sw == nil || pre == nil {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %.1f µs CPU, %.2f switches, %.2f preempted", role, cpu.Median, sw.Median, pre.Median))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "  per call, %s: %s\n", t, strings.Join(parts, "; "))
		}
	}
	return b.String()
}
