package study

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot is a figure: lines (Series over X) or bars (one value per category
// per series; Stacked stacks the series).
type Plot struct {
	Name, Title    string
	XLabel, YLabel string
	Series         []Series
	Categories     []string // bar plots: the x categories
	Bars, Stacked  bool
	// LogX, LogY draw line plots on logarithmic axes (every value > 0).
	LogX, LogY bool
}

// Series is one line or one bar group.
type Series struct {
	Label string
	X, Y  []float64
}

// Save renders the plot to path; the extension picks the format (png, svg).
func (p Plot) Save(path string) error {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	pl.Legend.Top = true
	if p.Bars {
		if err := p.addBars(pl); err != nil {
			return err
		}
	} else {
		for i, s := range p.Series {
			pts := make(plotter.XYs, len(s.X))
			for j := range s.X {
				pts[j].X, pts[j].Y = s.X[j], s.Y[j]
			}
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return fmt.Errorf("plot %s: %w", p.Name, err)
			}
			l.Color = plotutil.Color(i)
			sc.Color = plotutil.Color(i)
			sc.Shape = plotutil.Shape(i)
			pl.Add(l, sc)
			pl.Legend.Add(s.Label, l, sc)
		}
	}
	if p.LogX {
		pl.X.Scale, pl.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	// Headroom above the data, so that the legend (top right) never covers it.
	if p.LogY {
		pl.Y.Scale, pl.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		pl.Y.Max *= 30
	} else {
		pl.Y.Max += (pl.Y.Max - pl.Y.Min) * 0.35
	}
	if err := pl.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return nil
}

func (p Plot) addBars(pl *plot.Plot) error {
	n := len(p.Series)
	w := vg.Points(18)
	if !p.Stacked && n > 0 {
		w = vg.Points(60 / float64(n))
	}
	var prev *plotter.BarChart
	for i, s := range p.Series {
		b, err := plotter.NewBarChart(plotter.Values(s.Y), w)
		if err != nil {
			return fmt.Errorf("plot %s: %w", p.Name, err)
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Color = color.Black
		b.LineStyle.Width = vg.Points(0.3)
		if p.Stacked {
			if prev != nil {
				b.StackOn(prev)
			}
		} else {
			b.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		}
		prev = b
		pl.Add(b)
		pl.Legend.Add(s.Label, b)
	}
	pl.NominalX(p.Categories...)
	pl.X.Min, pl.X.Max = pl.X.Min-0.5, pl.X.Max+0.5 // whole bars at both ends
	return nil
}
