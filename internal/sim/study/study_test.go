package study

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range Algorithms() {
		if seen[a.Name] {
			t.Errorf("algorithm %q registered twice", a.Name)
		}
		seen[a.Name] = true
		p := sim.DefaultParams()
		p.Clients, p.ClientCacheBlocks, p.ServerCacheBlocks = 2, 4, 4
		if _, _, err := Build(a.Name, p); err != nil {
			t.Errorf("%s: %v", a.Name, err)
		}
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "baseline") {
		t.Errorf("unknown algorithm error %v should list the names", err)
	}
	if _, err := LookupStudy("sarkar"); err != nil {
		t.Error(err)
	}
}

func TestMatrixAndOutputs(t *testing.T) {
	w, err := sim.Generate(sim.GenConfig{Pattern: sim.GenZipf, Clients: 4, Accesses: 3000, Files: 100, MaxFile: 8, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	p := sim.DefaultParams()
	p.Clients, p.ClientCacheBlocks, p.ServerCacheBlocks, p.WarmUp = 4, 16, 16, 500
	small := p
	small.ClientCacheBlocks = 4
	var progress bytes.Buffer
	env := &Env{Params: p, Progress: &progress}
	rows, err := RunMatrix(context.Background(), env, []string{"baseline", "optimal", "not-there"},
		[]Config{{Name: "default", Params: p, Workload: w}, {Name: "small", Params: small, Workload: w}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || rows[0].Algorithm != "baseline" || rows[0].Config != "default" || rows[3].Config != "small" {
		t.Fatalf("rows %+v", rows)
	}
	if !strings.Contains(progress.String(), "skipping not-there") {
		t.Errorf("progress %q", progress.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, rows); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"algorithm", "config", "avg_access_ms", "local_hit_ratio", "manager_msgs_per_access",
		"lookup_msgs_per_miss", "replacement_msgs_per_local_miss", "hint_correctness", "discard_hit_ratio", "forward_miss_rate", "hits"} {
		if _, ok := back[0][key]; !ok {
			t.Errorf("JSON lacks key %q", key)
		}
	}
	dir := t.TempDir()
	r := &Report{Study: "t", Rows: rows, Tables: []Table{{Name: "x", Title: "X", Header: []string{"a"}, Rows: [][]string{{"1"}}}},
		Plots: []Plot{
			{Name: "line", Series: []Series{{Label: "a", X: []float64{1, 2}, Y: []float64{3, 4}}}},
			{Name: "bars", Bars: true, Stacked: true, Categories: []string{"p", "q"}, Series: []Series{{Label: "a", Y: []float64{1, 2}}, {Label: "b", Y: []float64{2, 1}}}},
		}}
	var text bytes.Buffer
	files, err := WriteReport(&text, r, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 7 || !strings.Contains(text.String(), "optimal") {
		t.Errorf("files %v text %q", files, text.String())
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "t.csv"))
	if lines := strings.Count(string(csv), "\n"); lines != 5 {
		t.Errorf("csv has %d lines", lines)
	}
}

func TestSarkarQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick study")
	}
	env := &Env{Quick: true, Params: sim.DefaultParams()}
	r, err := Sarkar(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	WriteReport(&buf, r, "")
	t.Log(buf.String())
	n, _ := find(r.Rows, "nchance", "default")
	o, _ := find(r.Rows, "optimal", "default")
	if o.HitDistr.Disk > n.HitDistr.Disk {
		t.Errorf("optimal disk %.4f > nchance %.4f", o.HitDistr.Disk, n.HitDistr.Disk)
	}
}
