package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coopfs/coopfs/internal/obs"
)

// runStats implements `coopfs stats [--json] ADDR`: it scrapes a coopfs
// process's /metrics and prints its counters grouped for people.
func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("stats", "[--json] [--timeout 5s] ADDR\n\nADDR is the HOST:PORT the process was started with --metrics.", stderr)
	asJSON := fs.Bool("json", false, "print the counters as JSON instead of tables")
	timeout := fs.Duration("timeout", 5*time.Second, "give up on ADDR after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "coopfs stats: want exactly one ADDR (HOST:PORT), got %d arguments\n", fs.NArg())
		fs.Usage()
		return errUsage
	}
	addr := fs.Arg(0)
	fctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	ss, err := obs.Fetch(fctx, addr)
	if err != nil {
		return fmt.Errorf("cannot reach coopfs metrics at %s: %w; is the process running with --metrics %s?", addr, err, addr)
	}
	r := buildStatsReport(addr, ss)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.writeText(stdout)
}

// statsReport is what `coopfs stats` prints; the JSON form is this struct.
type statsReport struct {
	Addr     string        `json:"addr"`
	Reads    []layerReads  `json:"reads_by_layer"`
	Bytes    []peerBytes   `json:"bytes"`
	Messages []msgCount    `json:"messages"`
	Other    []otherMetric `json:"other"`
}

type layerReads struct {
	Layer   string  `json:"layer"`
	Reads   float64 `json:"reads"`
	Percent float64 `json:"percent"`
	Bytes   float64 `json:"bytes"`
}

type peerBytes struct {
	PeerKind string  `json:"peer_kind"`
	In       float64 `json:"in"`
	Out      float64 `json:"out"`
}

type msgCount struct {
	Type string  `json:"type"`
	In   float64 `json:"in"`
	Out  float64 `json:"out"`
}

type otherMetric struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
}

func buildStatsReport(addr string, ss obs.Samples) statsReport {
	r := statsReport{Addr: addr, Reads: []layerReads{}, Bytes: []peerBytes{}, Messages: []msgCount{}, Other: []otherMetric{}}
	// Reads by layer, in layer order, then layers this build does not know.
	reads, rbytes := map[string]float64{}, map[string]float64{}
	var total float64
	for _, s := range ss {
		switch s.Name {
		case obs.MetricReads:
			reads[s.Labels["layer"]] += s.Value
			total += s.Value
		case obs.MetricReadBytes:
			rbytes[s.Labels["layer"]] += s.Value
		}
	}
	for _, l := range orderedKeys(reads, obs.Layers()) {
		lr := layerReads{Layer: l, Reads: reads[l], Bytes: rbytes[l]}
		if total > 0 {
			lr.Percent = 100 * reads[l] / total
		}
		r.Reads = append(r.Reads, lr)
	}
	// Bytes in and out by peer kind.
	in, out := map[string]float64{}, map[string]float64{}
	for _, s := range ss {
		switch s.Name {
		case obs.MetricBytesIn:
			in[s.Labels["peer_kind"]] += s.Value
		case obs.MetricBytesOut:
			out[s.Labels["peer_kind"]] += s.Value
		}
	}
	both := maps.Clone(in)
	maps.Copy(both, out)
	for _, k := range orderedKeys(both, []string{obs.KindServer, obs.KindPeer, obs.KindClient}) {
		r.Bytes = append(r.Bytes, peerBytes{PeerKind: k, In: in[k], Out: out[k]})
	}
	// Messages by type.
	msgs := map[string]*msgCount{}
	for _, s := range ss {
		if s.Name != obs.MetricMessages {
			continue
		}
		t := s.Labels["type"]
		if msgs[t] == nil {
			msgs[t] = &msgCount{Type: t}
		}
		if s.Labels["dir"] == obs.DirIn {
			msgs[t].In += s.Value
		} else {
			msgs[t].Out += s.Value
		}
	}
	for _, t := range slices.Sorted(maps.Keys(msgs)) {
		r.Messages = append(r.Messages, *msgs[t])
	}
	// Everything else of ours.
	for _, s := range ss {
		switch s.Name {
		case obs.MetricReads, obs.MetricReadBytes, obs.MetricBytesIn, obs.MetricBytesOut, obs.MetricMessages:
			continue
		}
		if strings.HasPrefix(s.Name, "coopfs_") {
			r.Other = append(r.Other, otherMetric{Name: s.Name, Labels: s.Labels, Value: s.Value})
		}
	}
	return r
}

// orderedKeys returns the keys of m: first those in order that m has, then
// the rest sorted.
func orderedKeys[V any](m map[string]V, order []string) []string {
	var keys []string
	for _, k := range order {
		if _, ok := m[k]; ok {
			keys = append(keys, k)
		}
	}
	var rest []string
	for k := range m {
		if !slices.Contains(order, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}

func (r statsReport) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "coopfs stats for %s\n", r.Addr)

	t := [][]string{{"Reads by layer", "reads", "share", "bytes"}}
	var reads, rbytes float64
	for _, l := range r.Reads {
		t = append(t, []string{"  " + l.Layer, count(l.Reads), fmt.Sprintf("%.1f%%", l.Percent), humanBytes(l.Bytes)})
		reads += l.Reads
		rbytes += l.Bytes
	}
	if len(r.Reads) == 0 {
		t = append(t, []string{"  (none reported)"})
	} else {
		t = append(t, []string{"  total", count(reads), pct(reads), humanBytes(rbytes)})
	}
	writeTable(&b, t)

	t = [][]string{{"Bytes", "in", "out"}}
	var bin, bout float64
	for _, p := range r.Bytes {
		t = append(t, []string{"  " + p.PeerKind, humanBytes(p.In), humanBytes(p.Out)})
		bin += p.In
		bout += p.Out
	}
	if len(r.Bytes) == 0 {
		t = append(t, []string{"  (none reported)"})
	} else {
		t = append(t, []string{"  total", humanBytes(bin), humanBytes(bout)})
	}
	writeTable(&b, t)

	t = [][]string{{"Messages", "in", "out"}}
	for _, m := range r.Messages {
		t = append(t, []string{"  " + m.Type, count(m.In), count(m.Out)})
	}
	if len(r.Messages) == 0 {
		t = append(t, []string{"  (none yet)"})
	}
	writeTable(&b, t)

	if len(r.Other) > 0 {
		t = [][]string{{"Other coopfs metrics", "value"}}
		for _, o := range r.Other {
			s := obs.Sample{Name: o.Name, Labels: o.Labels}
			t = append(t, []string{"  " + o.Name + s.LabelString(), strconv.FormatFloat(o.Value, 'g', -1, 64)})
		}
		writeTable(&b, t)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable writes a blank line and then rows with the first column
// left-aligned and the others right-aligned, two spaces apart.
func writeTable(b *strings.Builder, rows [][]string) {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(c))
		}
	}
	b.WriteByte('\n')
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			if i == 0 {
				fmt.Fprintf(&line, "%-*s", width[0], c)
			} else {
				fmt.Fprintf(&line, "  %*s", width[i], c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
}

func pct(total float64) string {
	if total == 0 {
		return "-"
	}
	return "100.0%"
}

// count prints a counter value as an integer when it is one.
func count(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// humanBytes prints a byte count in binary units: 0 B, 512 B, 1.5 KiB, 3.0 GiB.
func humanBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", int64(v))
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
