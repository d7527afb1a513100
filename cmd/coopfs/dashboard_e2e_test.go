package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/coopfs/coopfs/internal/obs"
)

// dashboardQueries returns every PromQL expression of the Grafana
// dashboard: the panels' targets and the variables' label_values()
// selectors, with Grafana's variables replaced by what selects everything.
func dashboardQueries(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query string `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	vars := strings.NewReplacer("$__rate_interval", "1m", "$job", ".*", "$instance", ".*")
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, vars.Replace(tg.Expr))
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*), *\w+\)$`)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			m := labelValues.FindStringSubmatch(v.Query)
			if m == nil {
				t.Errorf("variable query %q is not label_values(SELECTOR, LABEL)", v.Query)
				continue
			}
			out = append(out, vars.Replace(m[1]))
		}
	}
	return out
}

// TestGrafanaDashboardMetrics parses every query of
// deploy/grafana/coopfs-dashboard.json with Prometheus's own PromQL parser
// and checks that each series selector in it matches a series that a live
// server (directory policy), a write-back mount or a proxy exports: a
// dashboard panel over a metric nobody exports would stay empty.
func TestGrafanaDashboardMetrics(t *testing.T) {
	needFUSE(t)
	queries := dashboardQueries(t, "../../deploy/grafana/coopfs-dashboard.json")
	smetrics, mmetrics := e2eFreeAddr(t), e2eFreeAddr(t)
	export := t.TempDir()
	os.WriteFile(export+"/f", make([]byte, 2<<20), 0o644)
	srv := startServer(t, export, "--policy", "directory", "--metrics", smetrics)
	m := startMount(t, srv.addr, "--metrics", mmetrics, "--disk-cache", t.TempDir(), "--write-policy", "write-back")
	if _, err := os.ReadFile(m.path("f")); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, srv.addr)
	var all obs.Samples
	for _, addr := range []string{smetrics, mmetrics, p.metrics} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ss, err := obs.Fetch(ctx, addr)
		cancel()
		if err != nil {
			t.Fatalf("scrape %s: %v", addr, err)
		}
		all = append(all, ss...)
	}
	promql := parser.NewParser(parser.Options{})
	for _, q := range queries {
		expr, err := promql.ParseExpr(q)
		if err != nil {
			t.Errorf("query %q does not parse: %v", q, err)
			continue
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if ok && !selects(all, vs) {
				t.Errorf("query %q: no live process exports a series for %s", q, vs)
			}
			return nil
		})
	}
	t.Logf("%d queries checked against %d live series", len(queries), len(all))
}

// selects reports whether one of the samples matches every matcher of vs
// (a label the sample lacks is the empty value, as in Prometheus).
func selects(ss obs.Samples, vs *parser.VectorSelector) bool {
	for _, s := range ss {
		ok := true
		for _, m := range vs.LabelMatchers {
			v := s.Labels[m.Name]
			if m.Name == "__name__" {
				v = s.Name
			}
			if !m.Matches(v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
