package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimRunJSON(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.lirs")
	// LRU with 2 blocks: 1 2 1 3 2 1 -> hits: 1 (third access). Belady: 1, 2 (keep 2 over 1? next uses: 2@4, 1@5 -> evict 1 at 3), so hits 1@2 and 2@4.
	os.WriteFile(trace, []byte("1\n2\n1\n*\n3\n2\n1\n"), 0o644)
	var out, errb bytes.Buffer
	err := runSim(context.Background(), []string{"run", "--trace", trace, "--format", "lirs", "--algo", "baseline,optimal",
		"--clients", "1", "--client-cache-blocks", "2", "--server-cache-blocks", "0", "--json"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"baseline": 1.0 / 6, "optimal": 2.0 / 6}
	for _, r := range rows {
		if got := r["local_hit_ratio"].(float64); got != want[r["algorithm"].(string)] {
			t.Errorf("%s: local_hit_ratio %v, want %v", r["algorithm"], got, want[r["algorithm"].(string)])
		}
	}
	if len(rows) != 2 {
		t.Errorf("%d rows", len(rows))
	}
}

func TestSimErrors(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--trace", "/nonexistent", "--format", "lirs"},
		{"run", "--gen", "office", "--algo", "nope"},
		{"run", "--gen", "nope"},
		{"run", "--trace", "x", "--format", "csv"},
		{"run", "--gen", "random", "--clients", "0"},
		{"study", "nope"},
		{"gen", "nope"},
		{"frobnicate"},
	} {
		var out, errb bytes.Buffer
		err := runSim(context.Background(), args, &out, &errb)
		if err == nil {
			t.Errorf("%v: no error", args)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error spans lines: %q", args, err)
		}
	}
}

func TestSimGenRoundTrip(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runSim(context.Background(), []string{"gen", "hotcold-local", "--clients", "3", "--accesses", "500", "--blocks", "50"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "g.trace")
	os.WriteFile(path, out.Bytes(), 0o644)
	var res bytes.Buffer
	err := runSim(context.Background(), []string{"run", "--trace", path, "--clients", "3", "--client-cache-blocks", "8",
		"--algo", "gms,nchance", "--csv", "--quiet"}, &res, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	if lines := strings.Count(res.String(), "\n"); lines != 3 {
		t.Errorf("csv: %q", res.String())
	}
}
