package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coopfs/coopfs/internal/bench/local"
	"github.com/coopfs/coopfs/internal/bench/report"
)

func TestBenchLocalFlags(t *testing.T) {
	var stderr bytes.Buffer
	cfg, out, prof, err := localFlags([]string{"--size", "256MiB", "--reps", "5", "--threads", "2", "--rand-ops", "100",
		"--skip-cold", "--json", "r.json", "--out", "dir", "--cpuprofile", "cpu.out"}, &stderr)
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	if cfg.Size != 256<<20 || cfg.Reps != 5 || cfg.Threads != 2 || cfg.RandOps != 100 || !cfg.SkipCold {
		t.Errorf("config %+v", cfg)
	}
	if out.jsonPath != "r.json" || out.outDir != "dir" || prof != "cpu.out" {
		t.Errorf("output %+v, profile %q", out, prof)
	}
	if !strings.HasPrefix(cfg.Command, "coopfs bench local --size 256MiB") {
		t.Errorf("command %q", cfg.Command)
	}

	cfg, _, _, err = localFlags(nil, &stderr)
	if err != nil || cfg.Size != local.DefaultSize || cfg.Reps != local.DefaultReps {
		t.Errorf("defaults: %+v %v", cfg, err)
	}

	for _, bad := range [][]string{
		{"--reps", "0"}, {"--size", "12"}, {"--size", "lots"}, {"--threads", "0"}, {"extra"}, {"--nope"},
	} {
		stderr.Reset()
		if _, _, _, err := localFlags(bad, &stderr); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	stderr.Reset()
	if _, _, _, err := localFlags([]string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "-reps") {
		t.Errorf("-h: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "cpuprofile") {
		t.Errorf("hidden flag listed:\n%s", stderr.String())
	}
}

func TestBenchDispatch(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := runBench(context.Background(), nil, &stdout, &stderr); !errors.Is(err, errUsage) {
		t.Errorf("no workload: %v", err)
	}
	if !strings.Contains(stderr.String(), "local") || strings.Contains(stderr.String(), local.NullfsCommand) {
		t.Errorf("usage lists:\n%s", stderr.String())
	}
	stderr.Reset()
	if err := runBench(context.Background(), []string{"warp-speed"}, &stdout, &stderr); !errors.Is(err, errUsage) ||
		!strings.Contains(stderr.String(), `unknown workload "warp-speed"`) {
		t.Errorf("unknown workload: %v\n%s", err, stderr.String())
	}
	if err := runBench(context.Background(), []string{"help"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("help: %v", err)
	}
}

func TestBenchOutput(t *testing.T) {
	r := report.New("local", "coopfs bench local")
	r.Row("nullfs-seq", "ceiling", report.UnitMBps).Add(2000)
	r.Row("mem-seq", "measured", report.UnitMBps).Compare("nullfs-seq", 0.8).Add(1800)
	r.Finish()
	dir := t.TempDir()
	o := benchOutput{jsonPath: filepath.Join(dir, "r.json"), outDir: filepath.Join(dir, "out")}
	var stdout bytes.Buffer
	if err := o.write(r, &stdout); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "0.90") || !strings.Contains(stdout.String(), ">= 0.80 met") {
		t.Errorf("table:\n%s", stdout.String())
	}
	for _, f := range []string{"r.json", "out/local.json", "out/local.txt", "out/local.png", "out/local.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "r.json"))
	var back report.Report
	if err := json.Unmarshal(b, &back); err != nil || back.Get("mem-seq") == nil || back.Get("mem-seq").Ratio != 0.9 {
		t.Errorf("json: %v %+v", err, back)
	}
}
