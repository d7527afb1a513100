package fio

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func itoa(v int64) string   { return strconv.FormatInt(v, 10) }
func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// synthetic is a report of two repetitions over every target.
func synthetic() *Report {
	r := NewReport("coopfs bench fio --quick", AllTargets())
	r.Params["size"] = "32MiB"
	w := r.Row("seq-write-1", "sequential writes", UnitMBps)
	for _, s := range []struct {
		t  string
		vs []float64
	}{{TargetExt4, []float64{1000, 800}}, {TargetPass, []float64{250, 200}}, {TargetCoopWT, []float64{250, 240}}, {TargetCoopWB, []float64{500, 400}}} {
		for _, v := range s.vs {
			w.Add(s.t, v)
		}
	}
	l := r.Row(KeyTTFB, "first byte", UnitMicros)
	l.Add(TargetExt4, 100)
	l.Add(TargetPass, 200)
	l.Add(TargetCoopWT, 1000)
	l.Add(TargetCoopWB, 500)
	f := r.Row(KeySmallRead, "small files", UnitFilesS)
	f.Add(TargetExt4, 3000)
	f.Add(TargetPass, 1500)
	f.Add(TargetCoopWT, 600)
	f.Fail(TargetCoopWB, errors.New("open f000000: no such file or directory"))
	r.Finish()
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestRatios(t *testing.T) {
	r := synthetic()
	w := r.Get("seq-write-1")
	wt := w.Cells[TargetCoopWT]
	// Per-repetition ratios 0.25 and 0.30 to ext4, 1.0 and 1.2 to bindfs.
	if !near(wt.Median, 245) || !near(wt.VsExt4, 0.275) || !near(wt.VsPass, 1.1) {
		t.Errorf("coopfs-wt %+v", wt)
	}
	if c := w.Cells[TargetExt4]; !near(c.VsExt4, 1) || !near(c.VsPass, 4) {
		t.Errorf("ext4 %+v", c)
	}
	if c := r.Get(KeyTTFB).Cells[TargetCoopWB]; !near(c.VsExt4, 5) || !near(c.VsPass, 2.5) {
		t.Errorf("ttfb %+v", c)
	}
	if got := r.Missing(); len(got) != 1 || got[0] != KeySmallRead+"/"+TargetCoopWB {
		t.Errorf("missing %v", got)
	}
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := synthetic().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"coopfs-wt/ext4", "coopfs-wb/bindfs", "0.28", "1.10", "params: size=32MiB",
		"error: small-read on coopfs-wb: open f000000"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), KeySmallRead+" ") && !strings.Contains(line, " - ") {
			t.Errorf("a failed cell shows a figure: %q", line)
		}
	}
}

func TestJSON(t *testing.T) {
	var b bytes.Buffer
	if err := synthetic().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	c := back.Get("seq-write-1").Cells[TargetCoopWT]
	if !near(c.VsExt4, 0.275) || !near(c.VsPass, 1.1) || len(c.Samples) != 2 {
		t.Errorf("round trip %+v", c)
	}
	if back.Get(KeySmallRead).Cells[TargetCoopWB].Error == "" {
		t.Error("the error of a failed cell is lost")
	}
}

func TestPlot(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "fio")
	if err := synthetic().Plot(base, ".png", ".svg"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"mbps", "us", "files"} {
		for _, ext := range []string{".png", ".svg"} {
			if st, err := os.Stat(base + "-" + u + ext); err != nil || st.Size() == 0 {
				t.Errorf("%s%s: %v", u, ext, err)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	for name, c := range map[string]Config{
		"tiny size":  {Size: 1 << 20},
		"target":     {Targets: []string{"nfs"}},
		"small size": {SmallSize: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := Config{}
	c.Quick()
	if err := c.Validate(); err != nil || c.Size != QuickSize || c.Reps != QuickReps || c.SmallSize != DefaultSmallSize {
		t.Errorf("quick %+v: %v", c, err)
	}
}
