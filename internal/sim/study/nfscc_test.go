package study

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestNFSCCSmall(t *testing.T) {
	res, err := NFSCC(context.Background(), NFSCCConfig{Blocks: 2560, QueueLen: 40, Sweep: []int{10, 40, 160}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 4*3*2 || len(res.Sweep) != 4 {
		t.Fatalf("%d runs, %d sweep points", len(res.Runs), len(res.Sweep))
	}
	for _, pat := range nfsccPatterns {
		n, d := res.find(pat, "none", 2), res.find(pat, "directory", 2)
		if d.Metrics.AvgAccessMs >= 0.6*n.Metrics.AvgAccessMs {
			t.Errorf("%s: directory %.3f ms, none %.3f ms: want at least 40 %% less", pat, d.Metrics.AvgAccessMs, n.Metrics.AvgAccessMs)
		}
		with, without := d.Metrics.ForwardMissRate, res.find(pat, "directory-nonotify", 2).Metrics.ForwardMissRate
		if without < 3*with || without < 0.05 {
			t.Errorf("%s: forward miss rate %.3f without notifications, %.3f with", pat, without, with)
		}
		var hits, misses uint64
		for _, c := range d.Clients {
			hits += c.Hits
			misses += c.Misses
		}
		if int64(hits+misses) != d.Metrics.Counts.ForwardedReqs || int64(misses) != d.Metrics.Counts.ForwardMisses {
			t.Errorf("%s: per-client hits %d misses %d do not add up to %d forwards, %d misses", pat, hits, misses,
				d.Metrics.Counts.ForwardedReqs, d.Metrics.Counts.ForwardMisses)
		}
	}
	if off := res.Sweep[len(res.Sweep)-1]; off.QueueLen != 0 || off.ForwardMissRate <= res.Sweep[0].ForwardMissRate {
		t.Errorf("sweep: off %+v vs queue 10 %+v", off, res.Sweep[0])
	}

	rep := res.Report()
	var txt bytes.Buffer
	dir := t.TempDir()
	files, err := WriteReport(&txt, rep, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Figure 6", "Table 4", "Table 5", "Table 3", "hotcold-global", "queue"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text output lacks %q", want)
		}
	}
	if len(rep.Rows) != 24 || len(files) != 2+len(rep.Tables)+2*len(rep.Plots) {
		t.Fatalf("%d rows, files %v", len(rep.Rows), files)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Fatalf("output %s: %v", f, err)
		}
	}
	if _, err := LookupStudy("nfscc"); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"directory", "directory-nonotify", "nfs"} {
		if _, _, err := Build(a, NFSCCParams(NFSCCConfig{})); err != nil {
			t.Fatalf("algorithm %s: %v", a, err)
		}
	}
}

// TestNFSCCFull runs the whole study at the seed's size and writes its
// outputs to $NFSCC_OUT (skipped unless set).
func TestNFSCCFull(t *testing.T) {
	dir := os.Getenv("NFSCC_OUT")
	if dir == "" {
		t.Skip("set NFSCC_OUT to a directory to run the full nfscc study")
	}
	res, err := NFSCC(context.Background(), NFSCCConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var txt bytes.Buffer
	if _, err := WriteReport(&txt, res.Report(), dir); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + txt.String())
}
