package replay

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// line is one measurement of the table: how to read it from a Side.
type line struct {
	name string
	get  func(r *Report, row *Row, s *Side) (float64, bool)
	fmt  string
}

func pct(f func(s *Side) float64) func(*Report, *Row, *Side) (float64, bool) {
	return func(_ *Report, _ *Row, s *Side) (float64, bool) { return 100 * f(s), true }
}

var lines = []line{
	{"local memory hits %", pct(func(s *Side) float64 { return s.LocalMemory }), "%.1f"},
	{"peer (remote client) hits %", pct(func(s *Side) float64 { return s.Peer }), "%.1f"},
	{"server memory hits %", pct(func(s *Side) float64 { return s.ServerMemory }), "%.1f"},
	{"server disk reads %", pct(func(s *Side) float64 { return s.ServerDisk }), "%.1f"},
	{"manager msgs / access", func(_ *Report, _ *Row, s *Side) (float64, bool) { return s.ManagerMsgsPerAccess, true }, "%.3f"},
	{"lookup msgs / miss", func(_ *Report, _ *Row, s *Side) (float64, bool) { return s.LookupMsgsPerMiss, true }, "%.2f"},
	{"hint correctness %", func(_ *Report, _ *Row, s *Side) (float64, bool) {
		if s.HintCorrectness == nil {
			return 0, false
		}
		return 100 * *s.HintCorrectness, true
	}, "%.1f"},
	{"avg block read ms", func(_ *Report, _ *Row, s *Side) (float64, bool) { return s.AvgReadMs, true }, "%.3f"},
	{"read time / none", func(r *Report, row *Row, s *Side) (float64, bool) {
		base := r.side("none", s == row.Sim)
		if base == nil || base.AvgReadMs == 0 {
			return 0, false
		}
		return s.AvgReadMs / base.AvgReadMs, true
	}, "%.2f"},
	{"coop control % of links", func(_ *Report, row *Row, s *Side) (float64, bool) {
		if s == row.Sim {
			return 0, false
		}
		return s.CoopOverheadPct, true
	}, "%.3f"},
	{"replacement data % of links", func(_ *Report, row *Row, s *Side) (float64, bool) {
		if s == row.Sim {
			return 0, false
		}
		return s.ReplacementPct, true
	}, "%.3f"},
	{"coop control % (trace time)", func(_ *Report, row *Row, s *Side) (float64, bool) {
		if s == row.Sim || s.CoopTracePct == 0 {
			return 0, false
		}
		return s.CoopTracePct, true
	}, "%.3f"},
	{"replacement % (trace time)", func(_ *Report, row *Row, s *Side) (float64, bool) {
		if s == row.Sim || s.ReplacementTracePct == 0 {
			return 0, false
		}
		return s.ReplacementTracePct, true
	}, "%.3f"},
	{"server sent MiB", func(_ *Report, row *Row, s *Side) (float64, bool) {
		if s == row.Sim {
			return 0, false
		}
		return s.ServerBytesOut / (1 << 20), true
	}, "%.1f"},
}

// side returns policy's sim or live column, or nil.
func (r *Report) side(policy string, simulated bool) *Side {
	for _, row := range r.Rows {
		if row.Policy == policy {
			if simulated {
				return row.Sim
			}
			return row.Live
		}
	}
	return nil
}

// WriteText prints the comparison table.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "coopfs bench replay: %s\n", r.Workload)
	fmt.Fprintf(&b, "%d accesses (%d reads; %d warm-up not counted), %d client hosts, %d files (%.1f MiB), block %d KiB,\n"+
		"client cache %.1f MiB, server memory %.1f MiB, links: server %s, clients %s\n\n",
		r.Accesses, r.Reads, r.WarmUp, r.Clients, r.Files, float64(r.DataBytes)/(1<<20), r.BlockSize>>10,
		float64(r.ClientCache)/(1<<20), float64(r.ServerCache)/(1<<20), r.ServerLink, r.ClientLink)
	if r.DiskLatency > 0 {
		fmt.Fprintf(&b, "live server disk: every read of the export costs %v (slowfs, no page cache)\n\n", r.DiskLatency)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head, sub := "\t", "\t"
	for _, row := range r.Rows {
		head += row.Policy + "\t\t"
		sub += "sim\tlive\t"
	}
	fmt.Fprintln(tw, head)
	fmt.Fprintln(tw, sub)
	for _, l := range lines {
		cells := l.name + "\t"
		for _, row := range r.Rows {
			for _, s := range []*Side{row.Sim, row.Live} {
				v, ok := 0.0, false
				if s != nil {
					v, ok = l.get(r, row, s)
				}
				if ok && !math.IsNaN(v) {
					cells += fmt.Sprintf(l.fmt, v) + "\t"
				} else {
					cells += "-\t"
				}
			}
		}
		fmt.Fprintln(tw, cells)
	}
	tw.Flush()
	for _, row := range r.Rows {
		if row.LiveUnavailable != "" {
			fmt.Fprintf(&b, "%s live: %s\n", row.Policy, row.LiveUnavailable)
		}
	}
	b.WriteString("sim: the simulator's cost model (seed 002 latencies), accesses one at a time; live: preads through the mounts, ")
	if r.Mode == "parallel" {
		b.WriteString("every client at once (each in its trace order).\n")
	} else {
		b.WriteString("one at a time in trace order.\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// layerColors are the plot's colours, nearest layer first.
var layerColors = []color.Color{
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
}

// Plot draws each policy's hit distribution, simulated next to live, as
// stacked bars, and saves it to each path (.png, .svg).
func (r *Report) Plot(paths ...string) error {
	var names []string
	var cols []*Side
	for _, row := range r.Rows {
		for _, x := range []struct {
			tag string
			s   *Side
		}{{"sim", row.Sim}, {"live", row.Live}} {
			if x.s == nil {
				continue
			}
			names = append(names, row.Policy+"\n"+x.tag)
			cols = append(cols, x.s)
		}
	}
	if len(cols) == 0 {
		return fmt.Errorf("replay: nothing to plot")
	}
	p := plot.New()
	p.Title.Text = "coopfs bench replay: where reads were served, simulated vs live"
	p.Y.Label.Text = "% of block reads"
	layers := []struct {
		name string
		get  func(*Side) float64
	}{{"local memory", func(s *Side) float64 { return s.LocalMemory }}, {"peer", func(s *Side) float64 { return s.Peer }},
		{"server memory", func(s *Side) float64 { return s.ServerMemory }}, {"server disk", func(s *Side) float64 { return s.ServerDisk }}}
	var below *plotter.BarChart
	for i, l := range layers {
		var vs plotter.Values
		for _, s := range cols {
			vs = append(vs, 100*l.get(s))
		}
		bc, err := plotter.NewBarChart(vs, vg.Points(24))
		if err != nil {
			return err
		}
		bc.Color = layerColors[i]
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(l.name, bc)
	}
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = 0, 130
	p.NominalX(names...)
	width := vg.Length(max(5, 0.9*float64(len(cols)))) * vg.Inch
	for _, path := range paths {
		if err := p.Save(width, 4*vg.Inch, path); err != nil {
			return fmt.Errorf("replay: save plot: %w", err)
		}
	}
	return nil
}
