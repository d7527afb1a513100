package study

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNASDStudyQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick study")
	}
	r, err := NASD(context.Background(), NASDConfig{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(r.Points), 8*3+8*5+8*9+10+12; got != want {
		t.Fatalf("%d points, want %d", got, want)
	}
	var text, csvb, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"figure 3", "figure 7", "1-N", "1chance-return"} {
		if !strings.Contains(text.String(), s) {
			t.Fatalf("text lacks %q", s)
		}
	}
	if err := r.WriteCSV(&csvb); err != nil || strings.Count(csvb.String(), "\n") != len(r.Points)+1 {
		t.Fatalf("csv: %v, %d lines", err, strings.Count(csvb.String(), "\n"))
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back NASDResult
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Points) != len(r.Points) || back.Points[0].Config == "" {
		t.Fatalf("json round trip: %v", err)
	}
	dir := t.TempDir()
	files, err := r.Plot(dir, "svg")
	if err != nil || len(files) != 5 {
		t.Fatalf("plot: %v %v", files, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "nasd-fig5.svg")); err != nil || fi.Size() < 1000 {
		t.Fatalf("fig5: %v", err)
	}
	// Seed 004's headline orderings hold in the table too.
	if r.at("fig5", "1-N", 8).AvgMs >= r.at("fig5", "N-N", 8).AvgMs {
		t.Fatal("1-N does not beat N-N on configuration 8")
	}
}
