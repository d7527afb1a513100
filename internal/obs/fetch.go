package obs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one scraped value. Histograms and summaries are flattened the way
// the text format writes them: NAME_bucket{le=...}, NAME{quantile=...},
// NAME_sum, NAME_count.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
	Type   string // counter, gauge, summary, histogram, untyped
	Help   string
}

// Samples is a scrape, sorted by name and then labels.
type Samples []Sample

// Sum returns the sum of the values of the samples called name whose labels
// include every pair of match (nil matches all).
func (ss Samples) Sum(name string, match map[string]string) float64 {
	var t float64
	for _, s := range ss {
		if s.Name == name && s.matches(match) {
			t += s.Value
		}
	}
	return t
}

// SumBy returns, for each value of label key, the sum of the samples called
// name whose labels include every pair of match (nil matches all).
func (ss Samples) SumBy(name, key string, match map[string]string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ss {
		if s.Name == name && s.matches(match) {
			out[s.Labels[key]] += s.Value
		}
	}
	return out
}

// Get returns the first sample called name whose labels include match.
func (ss Samples) Get(name string, match map[string]string) (Sample, bool) {
	for _, s := range ss {
		if s.Name == name && s.matches(match) {
			return s, true
		}
	}
	return Sample{}, false
}

func (s Sample) matches(match map[string]string) bool {
	for k, v := range match {
		if s.Labels[k] != v {
			return false
		}
	}
	return true
}

// Fetch scrapes http://addr/metrics (addr is HOST:PORT, or a full URL) and
// parses the text exposition format.
func Fetch(ctx context.Context, addr string) (Samples, error) {
	return FetchWith(ctx, http.DefaultClient, addr)
}

// FetchWith is Fetch through client (e.g. one that dials inside a network
// namespace).
func FetchWith(ctx context.Context, client *http.Client, addr string) (Samples, error) {
	url := addr
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	if !strings.HasSuffix(strings.TrimSuffix(url, "/"), "/metrics") {
		url = strings.TrimSuffix(url, "/") + "/metrics"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics address %q: %w", addr, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the method and URL we already name
		}
		return nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, fmt.Errorf("fetching %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return Parse(resp.Body)
}

// Parse reads metrics in the Prometheus text exposition format.
func Parse(r io.Reader) (Samples, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	var out Samples
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		out = appendFamily(out, fams[name])
	}
	slices.SortStableFunc(out, func(a, b Sample) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(labelString(a.Labels), labelString(b.Labels))
	})
	return out, nil
}

func appendFamily(out Samples, f *dto.MetricFamily) Samples {
	name, help := f.GetName(), f.GetHelp()
	typ := strings.ToLower(f.GetType().String())
	add := func(n string, labels map[string]string, v float64) {
		out = append(out, Sample{Name: n, Labels: labels, Value: v, Type: typ, Help: help})
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		with := func(k, v string) map[string]string {
			l := maps.Clone(labels)
			l[k] = v
			return l
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			add(name, labels, m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			add(name, labels, m.GetGauge().GetValue())
		case dto.MetricType_SUMMARY:
			s := m.GetSummary()
			for _, q := range s.GetQuantile() {
				add(name, with("quantile", fmt.Sprint(q.GetQuantile())), q.GetValue())
			}
			add(name+"_sum", labels, s.GetSampleSum())
			add(name+"_count", labels, float64(s.GetSampleCount()))
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			bs := h.GetBucket()
			for _, b := range bs {
				add(name+"_bucket", with("le", fmt.Sprint(b.GetUpperBound())), float64(b.GetCumulativeCount()))
			}
			if len(bs) == 0 || !math.IsInf(bs[len(bs)-1].GetUpperBound(), 1) {
				add(name+"_bucket", with("le", "+Inf"), float64(h.GetSampleCount()))
			}
			add(name+"_sum", labels, h.GetSampleSum())
			add(name+"_count", labels, float64(h.GetSampleCount()))
		default:
			add(name, labels, m.GetUntyped().GetValue())
		}
	}
	return out
}

// labelString renders labels as {a="x",b="y"} in key order ("" if none).
func labelString(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(l)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, l[k])
	}
	b.WriteByte('}')
	return b.String()
}

// LabelString renders a sample's labels as {a="x",b="y"} in key order, or ""
// when it has none.
func (s Sample) LabelString() string { return labelString(s.Labels) }
