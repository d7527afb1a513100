package coop

import (
	"fmt"
	"image/color"
	"io"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/coopfs/coopfs/internal/obs"
)

// Plot is a figure: lines (Series over X) or grouped bars (one value per
// category per series).
type Plot struct {
	Name, Title    string
	XLabel, YLabel string
	Series         []Series
	Categories     []string // bar plots: the x categories
	Bars           bool
}

// Series is one line or one bar group. Dashed lines are references
// (link limits), drawn without points; Lines are curves of many points
// (completion over time), drawn without them too.
type Series struct {
	Label  string
	X, Y   []float64
	Dashed bool
	Lines  bool
}

// Save renders the plot to path; the extension picks the format (png, svg).
func (p Plot) Save(path string) error {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	pl.Legend.Top = true
	pl.Legend.Left = true
	pl.Y.Min = 0
	if p.Bars {
		n := len(p.Series)
		// Groups fill about 80 % of a 6-inch plot area.
		w := vg.Points(min(60, 350/float64(max(len(p.Categories), 1))) / float64(max(n, 1)))
		pl.Legend.Left = false
		for i, s := range p.Series {
			b, err := plotter.NewBarChart(plotter.Values(s.Y), w)
			if err != nil {
				return fmt.Errorf("plot %s: %w", p.Name, err)
			}
			b.Color = plotutil.Color(i)
			b.LineStyle.Color = color.Black
			b.LineStyle.Width = vg.Points(0.3)
			b.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
			pl.Add(b)
			pl.Legend.Add(s.Label, b)
		}
		pl.NominalX(p.Categories...)
	} else {
		for i, s := range p.Series {
			pts := make(plotter.XYs, len(s.X))
			for j := range s.X {
				pts[j].X, pts[j].Y = s.X[j], s.Y[j]
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return fmt.Errorf("plot %s: %w", p.Name, err)
			}
			l.Color = plotutil.Color(i)
			if s.Dashed || s.Lines {
				if s.Dashed {
					l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				} else {
					l.Width = vg.Points(1.5)
				}
				pl.Add(l)
				pl.Legend.Add(s.Label, l)
				continue
			}
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return fmt.Errorf("plot %s: %w", p.Name, err)
			}
			sc.Color = plotutil.Color(i)
			sc.Shape = draw.CircleGlyph{}
			pl.Add(l, sc)
			pl.Legend.Add(s.Label, l, sc)
		}
	}
	if err := pl.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return nil
}

func newTab(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 2, 4, 2, ' ', 0) }

// Table prints one line per (policy, N).
func (r *CopyReport) Table(w io.Writer) {
	fmt.Fprintf(w, "concurrent copy: %d MB file, server link %s (%.1f MB/s), client links %s (%.1f MB/s)\n",
		r.Size/1e6, r.ServerLink, r.ServerMBps, r.ClientLink, r.ClientMBps)
	t := newTab(w)
	fmt.Fprintln(t, "policy\tN\taggregate MB/s\t% of N×client\tmean client MB/s\tpeer reads\tserver mem reads\tserver disk reads\ttimeouts\tnacks\twaits\twholefile chunks peer/server\tCPU busy\tbytes ok")
	for _, row := range r.Rows {
		s := row.Stats
		ideal := float64(row.Clients) * r.ClientMBps
		chunks := "-"
		if p, sv := s.Total(func(c *ClientStats) float64 { return c.WholePeerChunks }), s.Total(func(c *ClientStats) float64 { return c.WholeServerChunks }); p+sv > 0 {
			chunks = fmt.Sprintf("%.0f/%.0f", p, sv)
		}
		fmt.Fprintf(t, "%s\t%d\t%.1f\t%.0f%%\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%.0f%%\t%v\n",
			row.Policy, row.Clients, row.AggMBps, 100*row.AggMBps/ideal, row.MeanMBps,
			s.ReadsBy(obs.LayerPeer), s.ReadsBy(obs.LayerServerMemory), s.ReadsBy(obs.LayerServerDisk),
			s.Total(func(c *ClientStats) float64 { return c.Timeouts }),
			s.Total(func(c *ClientStats) float64 { return c.Nacks }),
			s.Total(func(c *ClientStats) float64 { return c.ForwardWaits }), chunks,
			100*s.MachineCPUBusy, row.Verified)
	}
	t.Flush()
	r.fanoutTable(w)
}

// Plots draws aggregate throughput vs N per policy, with the server link
// and N × client link as references (seed 000 figure 5).
func (r *CopyReport) Plots() []Plot {
	p := Plot{Name: "coop-copy", Title: fmt.Sprintf("Concurrent copy of a %d MB file (server link %s, client links %s)", r.Size/1e6, r.ServerLink, r.ClientLink),
		XLabel: "clients", YLabel: "aggregate read throughput (MB/s)"}
	byPol := map[string]*Series{}
	var order []string
	var ns []float64
	seen := map[int]bool{}
	for _, row := range r.Rows {
		s := byPol[row.Policy]
		if s == nil {
			s = &Series{Label: row.Policy}
			byPol[row.Policy] = s
			order = append(order, row.Policy)
		}
		s.X = append(s.X, float64(row.Clients))
		s.Y = append(s.Y, row.AggMBps)
		if !seen[row.Clients] {
			seen[row.Clients] = true
			ns = append(ns, float64(row.Clients))
		}
	}
	for _, pol := range order {
		p.Series = append(p.Series, *byPol[pol])
	}
	if len(ns) > 0 && r.ServerMBps > 0 {
		srv, cl := Series{Label: "server link", Dashed: true}, Series{Label: "N × client link", Dashed: true}
		for _, n := range ns {
			srv.X, srv.Y = append(srv.X, n), append(srv.Y, r.ServerMBps)
			cl.X, cl.Y = append(cl.X, n), append(cl.Y, n*r.ClientMBps)
		}
		p.Series = append(p.Series, srv, cl)
	}
	return append([]Plot{p}, r.fanoutPlots()...)
}
