package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() *Report {
	r := New("local", "coopfs bench local --reps 3")
	r.Params["size"] = "1GiB"
	for _, v := range []float64{1000, 1500, 1200} {
		r.Row("nullfs", "do-nothing go-fuse", UnitMBps).Add(v)
	}
	for _, v := range []float64{900, 1000, 1100} {
		r.Row("mem", "memory cache", UnitMBps).Compare("nullfs", 0.8).Add(v)
	}
	for _, v := range []float64{300, 310, 290} {
		r.Row("cold", "cold", UnitMBps).Add(v)
	}
	r.Row("rand", "random 4 KiB", UnitOpsSec).Add(20000)
	r.Notes = append(r.Notes, "a note")
	r.Finish()
	return r
}

func TestMedianAndRatios(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median %v", m)
	}
	if m := Median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median %v", m)
	}
	if Median(nil) != 0 {
		t.Error("median of nothing")
	}
	r := sample()
	mem := r.Get("mem")
	if mem.Median != 1000 {
		t.Errorf("median %v", mem.Median)
	}
	// per-rep ratios: 0.9, 0.667, 0.917 → median 0.9, not 1000/1200
	if len(mem.Ratios) != 3 || mem.Ratio < 0.899 || mem.Ratio > 0.901 {
		t.Errorf("ratios %v → %v", mem.Ratios, mem.Ratio)
	}
	if mem.Met == nil || !*mem.Met {
		t.Error("target 0.8 not met at 0.9")
	}
	if r.Get("cold").Met != nil {
		t.Error("row without target has a verdict")
	}
}

func TestTargetMissed(t *testing.T) {
	r := New("x", "")
	r.Row("c", "ceiling", UnitMBps).Add(100)
	r.Row("m", "measured", UnitMBps).Compare("c", 0.5).Add(40)
	r.Finish()
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), ">= 0.50 MISSED") || !strings.Contains(b.String(), "0.40") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"command: coopfs bench local --reps 3", "params: size=1GiB", "mem ", "1000", "900 1000 1100", "0.90", ">= 0.80 met", "note: a note", "ops/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Bench != "local" || len(back.Rows) != 4 || back.Rows[1].Ratio < 0.89 || back.Rows[1].Met == nil {
		t.Errorf("round trip: %+v", back)
	}
}

func TestPlot(t *testing.T) {
	dir := t.TempDir()
	png, svg := filepath.Join(dir, "p.png"), filepath.Join(dir, "p.svg")
	r := sample()
	if err := r.Plot(UnitMBps, png, svg); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{png, svg} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	// Ceiling-only rows are not groups: mem (with nullfs) and cold.
	if ps := r.plotPairs(UnitMBps); len(ps) != 2 || ps[0].ceilng != r.Get("nullfs").Median || ps[1].ceilng != 0 {
		t.Errorf("pairs %+v", ps)
	}
	if err := r.Plot("furlongs", filepath.Join(dir, "x.png")); err == nil {
		t.Error("plotted no rows")
	}
}

// A ceiling measured below the figure it bounds is a broken measurement,
// and the report says so; a plain comparison above 1 is not flagged.
func TestBrokenCeiling(t *testing.T) {
	r := New("local", "")
	r.Row("nullfs", "do-nothing", UnitMBps).Add(804)
	r.Row("mem", "memory cache", UnitMBps).Bounds("nullfs", 0.8).Add(2566)
	r.Row("export", "export", UnitMBps).Add(100)
	r.Row("cached", "served by a cache", UnitMBps).Compare("export", 0).Add(300)
	r.Row("fine", "below its bound", UnitMBps).Bounds("export", 0).Add(50)
	r.Finish()
	r.Finish() // idempotent
	if !r.Get("mem").Broken || r.Get("cached").Broken || r.Get("fine").Broken {
		t.Errorf("broken: mem %v cached %v fine %v", r.Get("mem").Broken, r.Get("cached").Broken, r.Get("fine").Broken)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "ceiling nullfs (804 MB/s) is below mem (2566 MB/s)") {
		t.Errorf("notes %q", r.Notes)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "3.19   nullfs  CEILING BROKEN") || !strings.Contains(b.String(), "note: BROKEN CEILING") {
		t.Errorf("table:\n%s", b.String())
	}
}
