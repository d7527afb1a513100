package coop

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// synthetic workers: client i starts i×100 ms after the first, gets its
// first byte 10 ms later and reads 10 MB in (i+1) s, in ten even steps;
// client 2 failed.
func syntheticResults() []*Result {
	base := time.Unix(1000, 0).UnixNano()
	var res []*Result
	for i := range 4 {
		if i == 2 {
			res = append(res, nil)
			continue
		}
		start := base + int64(i)*100e6
		dur := int64(i+1) * 1e9
		r := &Result{Bytes: 10e6, StartNS: start, EndNS: start + dur, FirstByteNS: start + 10e6}
		for k := int64(1); k <= 10; k++ {
			r.Progress = append(r.Progress, BytesAt{AtNS: dur * k / 10, Bytes: 1e6 * k})
		}
		res = append(res, r)
	}
	return res
}

func TestClientTimesAndCurves(t *testing.T) {
	row := CopyRow{Policy: "directory", Clients: 4, PerClient: clientTimes(syntheticResults())}
	c := row.PerClient
	if len(c) != 4 || !c[2].Failed || c[3].StartS != 0.3 || c[1].FirstByteS != 0.01 || c[3].LastByteS != 4 {
		t.Fatalf("client times %+v", c)
	}
	ttfb, ttlb := row.firstLast()
	if len(ttfb) != 3 || len(ttlb) != 3 {
		t.Fatalf("first/last of the 3 that finished: %v %v", ttfb, ttlb)
	}
	if m, x := medianMax(ttlb); m != 2 || x != 4 {
		t.Fatalf("last byte median %v max %v", m, x)
	}
	if m, _ := medianMax([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("even median %v", m)
	}
	xs, ys := row.clientsDone()
	// ends at 1, 2.1 and 4.3 s; the failed client never finishes: 3/4 at most
	if last := ys[len(ys)-1]; last != 0.75 || xs[len(xs)-1] != 4.3 || xs[0] != 0 || ys[0] != 0 {
		t.Fatalf("clients done: %v %v", xs, ys)
	}
	for i := 1; i < len(xs); i++ {
		if xs[i] < xs[i-1] || ys[i] < ys[i-1] {
			t.Fatalf("clients done not monotonic at %d: %v %v", i, xs, ys)
		}
	}
	bx, by := row.bytesDone(10e6)
	if last := by[len(by)-1]; last != 0.75 || bx[len(bx)-1] != 4.3 {
		t.Fatalf("bytes done ends at (%v, %v), want (4.3, 0.75)", bx[len(bx)-1], last)
	}
	for i := 1; i < len(bx); i++ {
		if bx[i] < bx[i-1] || by[i] < by[i-1] {
			t.Fatalf("bytes done not monotonic at %d", i)
		}
	}
}

func TestFanoutReport(t *testing.T) {
	res := syntheticResults()
	rep := &CopyReport{ServerLink: "20mbit", ClientLink: "20mbit", ServerMBps: 2.4, ClientMBps: 2.4, Size: 10e6,
		Rows: []CopyRow{
			{Policy: "none", Clients: 4, PerClient: clientTimes(res)},
			{Policy: "wholefile", Clients: 4, PerClient: clientTimes(res)},
			{Policy: "none", Clients: 1, PerClient: clientTimes(res[:1])},
		}}
	var out bytes.Buffer
	rep.Table(&out)
	for _, want := range []string{"time to first / last byte", "0.01/1.0", "0.01/4.0", " - ", "wholefile"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	plots := rep.Plots()
	names := map[string]int{}
	for _, p := range plots {
		names[p.Name] = len(p.Series)
	}
	// per N, the clients and bytes curves: one per policy and the ideal
	if names["coop-fanout-clients-4"] != 3 || names["coop-fanout-bytes-4"] != 3 || names["coop-fanout-clients-1"] != 2 {
		t.Fatalf("plots %v", names)
	}
	dir := t.TempDir()
	if err := writeReport(dir, "copy", rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"coop-fanout-clients-4.png", "coop-fanout-bytes-4.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestProgressRecorder(t *testing.T) {
	p := newProgress(time.Now(), 1000)
	p.read(0)
	if !p.first.IsZero() {
		t.Fatal("first byte before any")
	}
	for done := int64(3); done <= 1000; done += 3 {
		p.read(done)
	}
	if p.first.IsZero() || len(p.points) < progressPoints-1 || len(p.points) > progressPoints {
		t.Fatalf("%d points", len(p.points))
	}
	for i := 1; i < len(p.points); i++ {
		if p.points[i].Bytes <= p.points[i-1].Bytes || p.points[i].AtNS < p.points[i-1].AtNS {
			t.Fatalf("points not increasing at %d: %v", i, p.points[i-1:i+1])
		}
	}
}

func TestCheckPolicy(t *testing.T) {
	for _, p := range []string{"none", "directory", "hints", "wholefile", "wholefile-insecure", "directory-balanced", "directory-serverlast-insecure", "directory-balanced-serverlast"} {
		if err := checkPolicy(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"", "whole", "hints-balanced", "wholefile-serverlast"} {
		if checkPolicy(p) == nil {
			t.Errorf("%q accepted", p)
		}
	}
}
