package coop

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Time to full fan-out: when each client of a concurrent copy got its
// first byte and its last, and the completion curves (the fraction of
// clients done, and of bytes delivered, against time) that compare the
// policies.

// ClientTimes is one client's copy, in seconds: StartS from the run's first
// start, FirstByteS and LastByteS from the client's own start.
type ClientTimes struct {
	Client     int       `json:"client"`
	StartS     float64   `json:"start_s"`
	FirstByteS float64   `json:"first_byte_s"`
	LastByteS  float64   `json:"last_byte_s"`
	Bytes      int64     `json:"bytes"`
	Progress   []BytesAt `json:"progress,omitempty"` // AtNS from the client's start
	Failed     bool      `json:"failed,omitempty"`   // no result (the fault run's victim)
}

// clientTimes turns the workers' results (nil: none) into their times.
func clientTimes(res []*Result) []ClientTimes {
	var first int64
	for _, r := range res {
		if r != nil && (first == 0 || r.StartNS < first) {
			first = r.StartNS
		}
	}
	out := make([]ClientTimes, len(res))
	for i, r := range res {
		out[i].Client = i
		if r == nil {
			out[i].Failed = true
			continue
		}
		out[i].StartS = float64(r.StartNS-first) / 1e9
		out[i].LastByteS = r.Elapsed().Seconds()
		if r.FirstByteNS != 0 {
			out[i].FirstByteS = float64(r.FirstByteNS-r.StartNS) / 1e9
		}
		out[i].Bytes, out[i].Progress = r.Bytes, r.Progress
	}
	return out
}

// medianMax returns the median and the maximum of xs (0, 0 if empty).
func medianMax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[n-1]
}

// firstLast returns the row's clients' times to first and to last byte
// (the clients that finished).
func (row *CopyRow) firstLast() (ttfb, ttlb []float64) {
	for _, c := range row.PerClient {
		if !c.Failed {
			ttfb, ttlb = append(ttfb, c.FirstByteS), append(ttlb, c.LastByteS)
		}
	}
	return ttfb, ttlb
}

// clientsDone is the completion curve by clients: at each client's end
// (from the run's first start), the fraction of the row's clients done; it
// starts at (0, 0).
func (row *CopyRow) clientsDone() (xs, ys []float64) {
	var ends []float64
	for _, c := range row.PerClient {
		if !c.Failed {
			ends = append(ends, c.StartS+c.LastByteS)
		}
	}
	slices.Sort(ends)
	n := float64(max(len(row.PerClient), 1))
	xs, ys = []float64{0}, []float64{0}
	for i, t := range ends {
		// a step: the fraction before this end, then after
		xs, ys = append(xs, t, t), append(ys, float64(i)/n, float64(i+1)/n)
	}
	return xs, ys
}

// bytesDone is the completion curve by bytes: at each progress point of
// any client, the fraction of the N × size bytes the clients have read.
func (row *CopyRow) bytesDone(size int64) (xs, ys []float64) {
	type ev struct {
		t float64
		c int
		b int64
	}
	var evs []ev
	for i, c := range row.PerClient {
		for _, p := range c.Progress {
			evs = append(evs, ev{c.StartS + float64(p.AtNS)/1e9, i, p.Bytes})
		}
	}
	slices.SortStableFunc(evs, func(a, b ev) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
	total := float64(size) * float64(max(len(row.PerClient), 1))
	if total <= 0 {
		return nil, nil
	}
	have := make([]int64, len(row.PerClient))
	var sum int64
	xs, ys = []float64{0}, []float64{0}
	for _, e := range evs {
		if e.b > have[e.c] { // progress only grows
			sum += e.b - have[e.c]
			have[e.c] = e.b
		}
		xs, ys = append(xs, e.t), append(ys, float64(sum)/total)
	}
	return xs, ys
}

// fanoutTable prints, per (policy, N), the time to first and last byte
// (median and slowest) against the ideal (the file at the client link),
// then every client's.
func (r *CopyReport) fanoutTable(w io.Writer) {
	ideal := 0.0
	if r.ClientMBps > 0 {
		ideal = float64(r.Size) / 1e6 / r.ClientMBps
	}
	fmt.Fprintf(w, "\ntime to first / last byte (s; ideal last byte %.1f s: the file at the client link)\n", ideal)
	t := newTab(w)
	fmt.Fprintln(t, "policy\tN\tfirst byte median\tfirst byte max\tlast byte median\tlast byte max\tslowest / ideal\tper client: first/last")
	for i := range r.Rows {
		row := &r.Rows[i]
		ttfb, ttlb := row.firstLast()
		fm, fx := medianMax(ttfb)
		lm, lx := medianMax(ttlb)
		slow := "-"
		if ideal > 0 {
			slow = fmt.Sprintf("%.2f", lx/ideal)
		}
		var per []string
		for _, c := range row.PerClient {
			if c.Failed {
				per = append(per, "-")
				continue
			}
			per = append(per, fmt.Sprintf("%.2f/%.1f", c.FirstByteS, c.LastByteS))
		}
		fmt.Fprintf(t, "%s\t%d\t%.3f\t%.3f\t%.1f\t%.1f\t%s\t%s\n", row.Policy, row.Clients, fm, fx, lm, lx, slow, strings.Join(per, " "))
	}
	t.Flush()
}

// fanoutPlots draws, for each N, the completion curves of every policy:
// the fraction of clients done and the fraction of bytes delivered against
// the time since the first client started.
func (r *CopyReport) fanoutPlots() []Plot {
	var ns []int
	for _, row := range r.Rows {
		if len(row.PerClient) > 0 && !slices.Contains(ns, row.Clients) {
			ns = append(ns, row.Clients)
		}
	}
	var out []Plot
	for _, n := range ns {
		byClients := Plot{Name: fmt.Sprintf("coop-fanout-clients-%d", n),
			Title:  fmt.Sprintf("Time to full fan-out: %d clients read a %d MB file (client links %s)", n, r.Size/1e6, r.ClientLink),
			XLabel: "seconds since the first client started", YLabel: "fraction of clients done"}
		byBytes := Plot{Name: fmt.Sprintf("coop-fanout-bytes-%d", n),
			Title:  fmt.Sprintf("Bytes delivered: %d clients read a %d MB file (client links %s)", n, r.Size/1e6, r.ClientLink),
			XLabel: "seconds since the first client started", YLabel: "fraction of N × file delivered"}
		for i := range r.Rows {
			row := &r.Rows[i]
			if row.Clients != n || len(row.PerClient) == 0 {
				continue
			}
			x, y := row.clientsDone()
			byClients.Series = append(byClients.Series, Series{Label: row.Policy, X: x, Y: y, Lines: true})
			x, y = row.bytesDone(r.Size)
			byBytes.Series = append(byBytes.Series, Series{Label: row.Policy, X: x, Y: y, Lines: true})
		}
		if r.ClientMBps > 0 && r.Size > 0 {
			ideal := float64(r.Size) / 1e6 / r.ClientMBps
			ref := Series{Label: "ideal (file at the client link)", X: []float64{0, ideal, ideal}, Y: []float64{0, 0, 1}, Dashed: true}
			byClients.Series = append(byClients.Series, ref)
			byBytes.Series = append(byBytes.Series, Series{Label: ref.Label, X: []float64{0, ideal}, Y: []float64{0, 1}, Dashed: true})
		}
		out = append(out, byClients, byBytes)
	}
	return out
}
