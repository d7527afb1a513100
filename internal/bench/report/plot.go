package report

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// pair is one group of the plot: a measurement and its ceiling.
type pair struct {
	label         string
	value, ceilng float64
}

// plotPairs are the MB/s rows: each with its ceiling's median (0 if none).
// Rows that only serve as a ceiling are not groups of their own.
func (r *Report) plotPairs(unit string) []pair {
	isCeiling := map[string]bool{}
	for _, row := range r.Rows {
		if row.Ceiling != "" {
			isCeiling[row.Ceiling] = true
		}
	}
	var ps []pair
	for _, row := range r.Rows {
		if row.Unit != unit || isCeiling[row.Key] {
			continue
		}
		p := pair{label: row.Key, value: row.Median}
		if c := r.Get(row.Ceiling); c != nil && c.Unit == unit {
			p.ceilng = c.Median
			p.label = fmt.Sprintf("%s\n%.2f x %s", row.Key, row.Ratio, c.Key)
		}
		ps = append(ps, p)
	}
	return ps
}

// Plot draws the rows of unit (e.g. UnitMBps) as grouped bars, each
// measurement next to its ceiling with the ratio in the label, and saves
// it to each of paths (the extension picks the format: .png, .svg, .pdf).
func (r *Report) Plot(unit string, paths ...string) error {
	ps := r.plotPairs(unit)
	if len(ps) == 0 {
		return fmt.Errorf("report: no %s rows to plot", unit)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("coopfs bench %s (median of reps; ratio = median of per-rep ratios)", r.Bench)
	p.Y.Label.Text = unit
	var vals, ceils plotter.Values
	var names []string
	for _, x := range ps {
		vals = append(vals, x.value)
		ceils = append(ceils, x.ceilng)
		names = append(names, x.label)
	}
	w := vg.Points(22)
	measured, err := plotter.NewBarChart(vals, w)
	if err != nil {
		return err
	}
	measured.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	measured.Offset = -w / 2
	ceiling, err := plotter.NewBarChart(ceils, w)
	if err != nil {
		return err
	}
	ceiling.Color = color.RGBA{R: 0xbb, G: 0xbb, B: 0xbb, A: 0xff}
	ceiling.Offset = w / 2
	p.Add(measured, ceiling, plotter.NewGrid())
	p.Legend.Add("coopfs", measured)
	p.Legend.Add("ceiling (same run)", ceiling)
	p.Legend.Top = true
	p.Legend.Left = true
	var top float64
	for _, x := range ps {
		top = max(top, x.value, x.ceilng)
	}
	p.Y.Min, p.Y.Max = 0, top*1.25 // room for the legend above the bars
	p.NominalX(names...)
	width := vg.Length(max(5, 1.6*float64(len(ps)))) * vg.Inch
	for _, path := range paths {
		if err := p.Save(width, 4*vg.Inch, path); err != nil {
			return fmt.Errorf("report: save plot: %w", err)
		}
	}
	return nil
}
