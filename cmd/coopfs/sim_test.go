package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// TestSimConvert converts a generated trace to oracleGeneral and to a
// zstd-compressed csv and checks that one-client LRU sees the same hit
// ratio on all three.
func TestSimConvert(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if err := runSim(context.Background(), []string{"gen", "zipf", "--clients", "1", "--accesses", "20000", "--files", "300"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "z.trace")
	os.WriteFile(src, out.Bytes(), 0o644)
	og := filepath.Join(dir, "z.oracleGeneral")
	csv := filepath.Join(dir, "z.csv.zst")
	for _, args := range [][]string{
		{"convert", "--trace", src, "--format", "coopfs", "--to", "oracleGeneral", "--out", og},
		{"convert", "--trace", og, "--format", "oracle", "--to", "csv", "--out", csv},
	} {
		if err := runSim(context.Background(), args, &out, &errb); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	ratio := func(args ...string) float64 {
		t.Helper()
		var res bytes.Buffer
		args = append([]string{"run", "--algo", "baseline", "--clients", "1", "--client-cache-blocks", "500",
			"--server-cache-blocks", "0", "--warmup", "0", "--json", "--quiet"}, args...)
		if err := runSim(context.Background(), args, &res, &errb); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var rows []map[string]any
		if err := json.Unmarshal(res.Bytes(), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("%v: %v %s", args, err, res.String())
		}
		return rows[0]["local_hit_ratio"].(float64)
	}
	want := ratio("--trace", src, "--format", "coopfs")
	if got := ratio("--trace", og, "--format", "oracleGeneral", "--sizes", "ignore"); got != want {
		t.Errorf("oracleGeneral: hit ratio %v, coopfs %v", got, want)
	}
	if got := ratio("--trace", csv, "--format", "csv", "--sizes", "ignore"); got != want {
		t.Errorf("csv.zst: hit ratio %v, coopfs %v", got, want)
	}
	for _, bad := range [][]string{
		{"convert", "--trace", src, "--format", "coopfs", "--out", og},
		{"convert", "--trace", src, "--format", "coopfs", "--to", "nope", "--out", og},
		{"convert", "--trace", src, "--format", "coopfs", "--csv-spec", "obj-id-col=1", "--to", "csv", "--out", og},
		{"run", "--trace", og, "--format", "oracle", "--sizes", "bytes"},
		{"run", "--trace", src, "--format", "csv", "--csv-spec", "obj-id-col=0"},
	} {
		if err := runSim(context.Background(), bad, &out, &errb); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: err = %v, want one line", bad, err)
		}
	}
}

// TestSimBench runs the bench on a small trace with the built binary.
func TestSimBench(t *testing.T) {
	if e2e.bin == "" {
		t.Skip("needs the coopfs binary (not built with -short)")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if err := runSim(context.Background(), []string{"gen", "random", "--clients", "1", "--accesses", "5000", "--blocks", "800"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "r.trace")
	os.WriteFile(src, out.Bytes(), 0o644)
	out.Reset()
	err := runSim(context.Background(), []string{"bench", "--coopfs", e2e.bin, "--trace", src, "--algo", "baseline,optimal",
		"--cache-blocks", "100", "--json"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var rows []benchRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, r := range rows {
		if r.Accesses != 5000 || r.PeakRSSMB <= 0 || r.MissRatio <= 0 || r.MissRatio >= 1 {
			t.Errorf("row %+v", r)
		}
		if r.TargetMps != 7 || r.MetCPU != (r.PerCPUSec >= 7e6) {
			t.Errorf("row %+v: target 7 M/s expected, met per CPU-s %v", r, r.MetCPU)
		}
	}
	if rows[1].MissRatio > rows[0].MissRatio {
		t.Errorf("optimal misses more than LRU: %+v", rows)
	}

	// The suite makes its seven traces (one and 42 clients, every format
	// that holds them), times each reader, then runs every algorithm on
	// each; the formats of one workload give the same miss ratios.
	suite := filepath.Join(dir, "suite")
	out.Reset()
	err = runSim(context.Background(), []string{"bench", "--coopfs", e2e.bin, "--suite", suite, "--accesses", "4000", "--files", "300",
		"--algo", "baseline,optimal", "--json", "--out", filepath.Join(dir, "rows.json")}, &out, &errb)
	if err != nil {
		t.Fatalf("suite: %v: %s", err, errb.String())
	}
	rows = nil
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 7*3 {
		t.Fatalf("suite: %d rows, %v: %s", len(rows), err, out.String())
	}
	miss := map[string]float64{}
	for _, r := range rows {
		switch {
		case r.Tool == "reader":
			if r.Accesses == 0 || r.MBPerS <= 0 || (r.Format != "oracleGeneral" && r.Format != "oracleGeneralOpNS") != (r.TargetMps == 200) {
				t.Errorf("reader row %+v", r)
			}
		case r.Accesses == 0 || r.MissRatio <= 0:
			t.Errorf("row %+v", r)
		default:
			k := fmt.Sprint(r.Algorithm, r.Clients)
			if m, ok := miss[k]; ok && m != r.MissRatio {
				t.Errorf("%s on %s: miss ratio %v, other formats %v", r.Algorithm, r.Trace, r.MissRatio, m)
			}
			miss[k] = r.MissRatio
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "rows.json")); err != nil {
		t.Error(err)
	}
}

// TestLibCacheSimOutputNotInWorkingDir checks that the bench sends
// cachesim's result file (TRACE.cachesim, which cachesim writes where it
// runs unless given --output) to a temporary directory that it removes,
// not to the working directory. A script stands in for cachesim: it writes
// where cachesim would and prints cachesim's result line.
func TestLibCacheSimOutputNotInWorkingDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	argsFile := filepath.Join(dir, "args")
	script := filepath.Join(dir, "cachesim")
	body := `#!/bin/sh
printf '%s\n' "$@" > ` + argsFile + `
out="$(basename "$1").cachesim"
while [ $# -gt 0 ]; do [ "$1" = --output ] && out="$2"; shift; done
echo "t LRU cache size 100, 5000 req, miss ratio 0.2500, throughput 1.00 MQPS" | tee -a "$out"
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "t.oracleGeneral")
	if err := os.WriteFile(trace, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := benchLibCacheSim(context.Background(), script, trace, "oracleGeneral", "", "ignore", "lru", 100)
	if err != nil {
		t.Fatal(err)
	}
	if r.Accesses != 5000 || r.MissRatio != 0.25 {
		t.Errorf("row %+v: want 5000 accesses, miss ratio 0.25", r)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.cachesim")); len(m) > 0 {
		t.Errorf("cachesim wrote %v in the working directory", m)
	}
	data, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSpace(string(data)), "\n")
	out := ""
	for i, a := range args {
		if a == "--output" && i+1 < len(args) {
			out = args[i+1]
		}
	}
	if out == "" || strings.HasPrefix(out, dir) {
		t.Fatalf("cachesim's --output %q: want a path outside the working directory (args %q)", out, args)
	}
	if _, err := os.Stat(filepath.Dir(out)); !os.IsNotExist(err) {
		t.Errorf("cachesim's output directory %s is left behind (%v)", filepath.Dir(out), err)
	}
}

// TestSimBenchPairsLibCacheSim checks that the bench runs libCacheSim
// beside each run of each algorithm (its run before or after the
// algorithm's, alternating), gives libCacheSim one row per algorithm of its
// on the trace, and holds each coopfs row to its paired runs. Scripts stand
// in for coopfs and cachesim and log their calls.
func TestSimBenchPairsLibCacheSim(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	fakeCoopfs := filepath.Join(dir, "coopfs")
	fakeLCS := filepath.Join(dir, "cachesim")
	coopfsBody := `#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --algo ] && a="$2"; shift; done
echo "coopfs $a" >> ` + log + `
echo '[{"accesses": 5000, "local_hit_ratio": 0.75}]'
`
	lcsBody := `#!/bin/sh
echo "lcs $3" >> ` + log + `
echo "t LRU cache size 100, 5000 req, miss ratio 0.2500, throughput 1.00 MQPS"
`
	for f, body := range map[string]string{fakeCoopfs: coopfsBody, fakeLCS: lcsBody} {
		if err := os.WriteFile(f, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	trace := filepath.Join(dir, "t.oracleGeneral")
	if err := os.WriteFile(trace, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := runSim(context.Background(), []string{"bench", "--coopfs", fakeCoopfs, "--libcachesim", fakeLCS, "--trace", trace,
		"--format", "oracleGeneral", "--sizes", "ignore", "--algo", "baseline,nchance,optimal", "--reps", "3", "--json"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	want := "coopfs baseline,lcs lru,lcs lru,coopfs baseline,coopfs baseline,lcs lru," +
		"coopfs nchance,lcs lru,lcs lru,coopfs nchance,coopfs nchance,lcs lru," +
		"coopfs optimal,lcs belady,lcs belady,coopfs optimal,coopfs optimal,lcs belady"
	if got := strings.Join(strings.Split(strings.TrimSpace(string(data)), "\n"), ","); got != want {
		t.Errorf("calls:\n%s\nwant (in this order):\n%s", got, want)
	}
	var rows []benchRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Tool+" "+r.Algorithm)
		if r.Tool == "coopfs" && (r.VsLibCacheSim <= 0 || r.VsLibCacheSimCPU < 0) {
			t.Errorf("row %+v: no × libCacheSim", r)
		}
	}
	if s := strings.Join(got, ","); s != "coopfs baseline,coopfs nchance,coopfs optimal,libCacheSim lru,libCacheSim belady" {
		t.Errorf("rows %s", s)
	}
}

// TestPairedRatios checks that × libCacheSim is the median of the pairs'
// ratios, not a ratio of medians: a machine that slows down between
// pairs slows both runs of a pair alike.
func TestPairedRatios(t *testing.T) {
	row := func(perSec, perCPU float64) benchRow { return benchRow{PerSec: perSec, PerCPUSec: perCPU} }
	runs := []benchRow{row(4, 4), row(2, 2), row(1, 1)}
	lruns := []benchRow{row(8, 2), row(4, 1), row(2, 0)}
	wall, cpu := pairedRatios(runs, lruns)
	if wall != 0.5 || cpu != 2 { // cpu: the pair without a libCacheSim CPU rate is left out
		t.Errorf("pairedRatios = %v, %v; want 0.5, 2", wall, cpu)
	}
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("median = %v, want 2.5", m)
	}
	if m := median(nil); m != 0 {
		t.Errorf("median(nil) = %v, want 0", m)
	}
}
