package demo

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText prints the result for people.
func (r *Result) WriteText(w io.Writer) error {
	if r.Hosts != nil {
		return r.Hosts.WriteText(w)
	}
	if r.Loopback != nil {
		return r.Loopback.WriteText(w)
	}
	return nil
}

// Plot draws the testbed run (time and server bytes per policy) to each
// path (.png or .svg); a loopback run has no plot.
func (r *Result) Plot(paths ...string) error {
	if r.Hosts == nil {
		return nil
	}
	return r.Hosts.Plot(paths...)
}

// speedup is none's time over p's (0 when none did not run).
func (r *HostsReport) speedup(p *PolicyRun) float64 {
	base := r.run("none")
	if base == nil || p.Elapsed <= 0 {
		return 0
	}
	return base.Elapsed.Seconds() / p.Elapsed.Seconds()
}

// WriteText prints the side-by-side table, a bar per policy and the reads
// by layer.
func (r *HostsReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "coopfs demo: %d client hosts read the same %d files of %s from one server: client1 first,\n"+
		"then the other %d at once; each host in its own network namespace, server link %s, client links %s (tc tbf)\n\n",
		r.Clients, r.Files, mib(float64(r.FileSize)), r.Clients-1, r.ServerLink, r.ClientLink)
	r.writeTable(&b)
	r.writeBars(&b)
	r.writeLayers(&b)
	b.WriteString("\nUnder none every client pulls every block through the server's link. Under directory the server\n" +
		"forwards each miss to a client that holds the block, which sends it over its own, faster link.\n" +
		"Under hints a client asks the holder its hints name (the hints of the last client that opened the\n" +
		"file, handed out by the server on open), without the server; a client whose hints came from one\n" +
		"that had nothing cached yet asks the server.\n")
	if r.Dir != "" {
		fmt.Fprintf(&b, "Kept: %s\n", r.Dir)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable writes one row per policy: both phases, the total, the
// speed-up, the server's bytes.
func (r *HostsReport) writeTable(b *strings.Builder) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tclient1 alone\tthe others at once\ttotal\tspeed-up vs none\tserver sent\tof bytes read\tsha256\t")
	for _, p := range r.Runs {
		if p.Unavailable != "" {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\t\n", p.Policy, "-")
			continue
		}
		ok := "ok"
		if !p.Verified() {
			ok = "MISMATCH"
		}
		sp := "-"
		if s := r.speedup(p); s > 0 {
			sp = fmt.Sprintf("%.2fx", s)
		}
		read := p.BytesRead()
		share := "-"
		if read > 0 {
			share = fmt.Sprintf("%.0f%%", 100*p.ServerBytesOut/float64(read))
		}
		fmt.Fprintf(tw, "%s\t%.1fs\t%.1fs\t%.1fs\t%s\t%s\t%s\t%s\t\n", p.Policy, p.First.Seconds(), p.Rest.Seconds(),
			p.Elapsed.Seconds(), sp, mib(p.ServerBytesOut), share, ok)
	}
	tw.Flush()
	for _, p := range r.Runs {
		if p.Unavailable != "" {
			fmt.Fprintf(b, "%s: %s\n", p.Policy, p.Unavailable)
		}
	}
}

// writeBars writes a bar of the total time per policy.
func (r *HostsReport) writeBars(b *strings.Builder) {
	b.WriteString("\nTime until every client has read the data set (shorter is better):\n")
	var longest float64
	for _, p := range r.Runs {
		longest = max(longest, p.Elapsed.Seconds())
	}
	for _, p := range r.Runs {
		if p.Unavailable != "" || longest == 0 {
			continue
		}
		n := int(40*p.Elapsed.Seconds()/longest + 0.5)
		fmt.Fprintf(b, "  %-10s %s %.1fs\n", p.Policy, strings.Repeat("#", max(n, 1)), p.Elapsed.Seconds())
	}
}

// writeLayers writes where each policy's reads were served.
func (r *HostsReport) writeLayers(b *strings.Builder) {
	b.WriteString("\nWhere the clients' block reads were served:\n")
	for _, p := range r.Runs {
		if p.Unavailable != "" {
			continue
		}
		var total float64
		for _, l := range p.ClientReads {
			total += l.Reads
		}
		var parts []string
		for _, l := range p.ClientReads {
			if total > 0 {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", l.Layer, 100*l.Reads/total))
			}
		}
		fmt.Fprintf(b, "  %-10s %s\n", p.Policy, strings.Join(parts, ", "))
		for _, c := range p.PerClient {
			for _, m := range c.Mismatches {
				fmt.Fprintf(b, "  %s %s: %s\n", p.Policy, c.Name, m)
			}
		}
	}
}

// Plot draws two bar charts side by side: the time every client took to
// read the data set, and the bytes the server sent, per policy.
func (r *HostsReport) Plot(paths ...string) error {
	var names []string
	var secs, sent plotter.Values
	for _, p := range r.Runs {
		if p.Unavailable != "" {
			continue
		}
		label := p.Policy
		if s := r.speedup(p); s > 0 {
			label = fmt.Sprintf("%s\n%.1fx", p.Policy, s)
		}
		names = append(names, label)
		secs = append(secs, p.Elapsed.Seconds())
		sent = append(sent, p.ServerBytesOut/(1<<20))
	}
	if len(names) == 0 {
		return fmt.Errorf("demo: no policy ran, nothing to plot")
	}
	mk := func(title, ylabel string, vs plotter.Values, c color.Color) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		bc, err := plotter.NewBarChart(vs, vg.Points(30))
		if err != nil {
			return nil, err
		}
		bc.Color = c
		p.Add(bc, plotter.NewGrid())
		p.NominalX(names...)
		var top float64
		for _, v := range vs {
			top = max(top, v)
		}
		p.Y.Min, p.Y.Max = 0, top*1.15
		return p, nil
	}
	left, err := mk(fmt.Sprintf("%d clients read %s each", r.Clients, mib(float64(r.FileSize)*float64(r.Files))), "seconds", secs,
		color.RGBA{0x1f, 0x77, 0xb4, 0xff})
	if err != nil {
		return err
	}
	right, err := mk(fmt.Sprintf("bytes the server sent (link %s)", r.ServerLink), "MiB", sent, color.RGBA{0xd6, 0x27, 0x28, 0xff})
	if err != nil {
		return err
	}
	const width, height = 9 * vg.Inch, 4 * vg.Inch
	for _, path := range paths {
		var canvas vg.CanvasWriterTo
		if strings.HasSuffix(path, ".svg") {
			canvas = vgsvg.New(width, height)
		} else {
			canvas = vgimg.PngCanvas{Canvas: vgimg.New(width, height)}
		}
		dc := draw.New(canvas)
		tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadY: vg.Inch / 8}
		cs := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
		left.Draw(cs[0][0])
		right.Draw(cs[0][1])
		if err := writeCanvas(path, canvas); err != nil {
			return err
		}
	}
	return nil
}

func writeCanvas(path string, c vg.CanvasWriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("demo: plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("demo: plot: %w", err)
	}
	return f.Close()
}
