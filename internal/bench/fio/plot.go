package fio

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotColor is the colour of the bars of the i-th target.
func plotColor(i int) color.RGBA {
	cs := []color.RGBA{
		{R: 0x99, G: 0x99, B: 0x99, A: 0xff},
		{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
		{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	}
	return cs[i%len(cs)]
}

// Units returns the units the rows use, in row order.
func (r *Report) Units() []string {
	var us []string
	for _, row := range r.Rows {
		if !contains(us, row.Unit) {
			us = append(us, row.Unit)
		}
	}
	return us
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// UnitFile is the suffix of the plot of unit: "MB/s" → "mbps".
func UnitFile(unit string) string {
	return map[string]string{UnitMBps: "mbps", UnitIOPS: "iops", UnitFilesS: "files", UnitMicros: "us"}[unit]
}

// Plot draws, for each unit, the rows of that unit as bars grouped by job,
// one bar per target, into base-UNIT.EXT for each ext (".png", ".svg").
func (r *Report) Plot(base string, exts ...string) error {
	for _, unit := range r.Units() {
		p, width, err := r.plotUnit(unit)
		if err != nil {
			return err
		}
		for _, ext := range exts {
			path := base + "-" + UnitFile(unit) + ext
			if err := p.Save(width, 4*vg.Inch, path); err != nil {
				return fmt.Errorf("fio: save plot %s: %w", filepath.Base(path), err)
			}
		}
	}
	return nil
}

func (r *Report) plotUnit(unit string) (*plot.Plot, vg.Length, error) {
	var rows []*Row
	for _, row := range r.Rows {
		if row.Unit == unit {
			rows = append(rows, row)
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("coopfs bench fio, %s (median of reps)", unit)
	if unit == UnitMicros {
		p.Title.Text += ", lower is better"
	}
	p.Y.Label.Text = unit
	w := vg.Points(14)
	n := len(r.Targets)
	var top float64
	for i, t := range r.Targets {
		var vals plotter.Values
		for _, row := range rows {
			v := 0.0
			if c := row.Cells[t]; c != nil {
				v = c.Median
			}
			vals = append(vals, v)
			top = max(top, v)
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, 0, fmt.Errorf("fio: plot %s: %w", unit, err)
		}
		bars.Color = plotColor(i)
		bars.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(bars)
		p.Legend.Add(t, bars)
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min, p.Y.Max = 0, top*1.3
	var names []string
	for _, row := range rows {
		names = append(names, strings.ReplaceAll(row.Key, "-direct", "\ndirect"))
	}
	p.NominalX(names...)
	width := vg.Length(max(5, 0.25*float64(n)*float64(len(rows))+1)) * vg.Inch
	return p, width, nil
}
