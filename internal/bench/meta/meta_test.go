package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/cluster/clustertest"
)

func TestMain(m *testing.M) {
	if kind := os.Getenv(echoEnv); kind != "" {
		runEcho(kind) // the helper process of BenchmarkRoundTrip
	}
	code := m.Run()
	clustertest.Cleanup()
	os.Exit(code)
}

func TestParseFlags(t *testing.T) {
	var stderr bytes.Buffer
	cfg, out, err := ParseFlags([]string{"--repeat", "5", "--gen-files", "100", "--py-modules", "-1", "--passthrough", "loopback",
		"--mount-arg=--attr-timeout=10s", "--mount-arg", "--read-ahead=2", "--json", "r.json", "--out", "d"}, &stderr)
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	if cfg.Repeat != 5 || cfg.GenFiles != 100 || cfg.PyModules != -1 || cfg.Passthrough != PassLoopback ||
		cfg.C2OFiles != DefaultC2OFiles || strings.Join(cfg.MountArgs, " ") != "--attr-timeout=10s --read-ahead=2" {
		t.Errorf("config %+v", cfg)
	}
	if out.JSON != "r.json" || out.Out != "d" || !strings.HasPrefix(cfg.Command, "coopfs bench meta --repeat 5") {
		t.Errorf("output %+v, command %q", out, cfg.Command)
	}
	cfg, _, err = ParseFlags([]string{"--steps", "grep-warm,stat-rtt"}, &stderr)
	if err != nil || !cfg.selected(StepGrepWarm) || !cfg.selected(StepRTT) || !cfg.selected(StepTar) || !cfg.selected(StepRm) ||
		!cfg.selected(StepGrepCold) || cfg.selected(StepFindCold) || cfg.selected(StepPyWarm) {
		t.Errorf("--steps: %v %v", cfg.Steps, err)
	}
	for _, bad := range [][]string{
		{"--steps", "grep-warm,nope"},
		{"--repeat", "0"}, {"--gen-files", "-2"}, {"--tree", "/x", "--gen-files", "5"}, {"--passthrough", "nfs"}, {"extra"}, {"--nope"},
	} {
		stderr.Reset()
		if _, _, err := ParseFlags(bad, &stderr); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if _, _, err := ParseFlags([]string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

func TestPyPackage(t *testing.T) {
	for _, n := range []int{1, 10, 300, 301} {
		p := newPyPackage(n)
		if p.modules() < n || p.modules() > n+p.a*p.b {
			t.Errorf("%d modules asked, layout %+v gives %d", n, p, p.modules())
		}
	}
	python, err := findPython(context.Background())
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	p := newPyPackage(12)
	if err := p.write(dir); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(python, "-c", "import pkg.all, sys; print(sum(1 for m in sys.modules if m.startswith('pkg.') and '.m' in m))")
	c.Dir, c.Env = dir, append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := c.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "12" {
		t.Errorf("import: %v: %s", err, out)
	}
}

// TestRun runs every workload on all three targets on a tiny tree and
// checks the shape of the result (no timings are asserted).
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts FUSE file systems and runs the workloads")
	}
	clustertest.RequireFUSE(t)
	bin := clustertest.Binary(t)
	for _, pass := range []string{PassAuto, PassLoopback} {
		t.Run(pass, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Binary: bin, Repeat: 1, GenFiles: 50, PyModules: 10, C2OFiles: 20, Passthrough: pass, Dir: dir}
			if pass == PassLoopback {
				cfg.C2OFiles = -1
			}
			res, err := Run(context.Background(), cfg)
			if live, _ := cluster.MountsUnder(dir); len(live) > 0 {
				t.Errorf("mounts left behind: %v", live)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkShape(t, res, cfg)
			out := filepath.Join(dir, "out")
			var stdout bytes.Buffer
			if err := res.Write(Output{Out: out}, &stdout); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"meta.json", "meta.txt", "meta.png", "meta.svg"} {
				if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
					t.Errorf("%s: %v", f, err)
				}
			}
			again, err := ReadResult(filepath.Join(out, "meta.json"))
			if err != nil || again.Get(RowKey(StepTar, TargetCoopfs)) == nil {
				t.Errorf("ReadResult: %v", err)
			}
			var back map[string]any
			b, _ := os.ReadFile(filepath.Join(out, "meta.json"))
			if err := json.Unmarshal(b, &back); err != nil || back["rows"] == nil || back["messages"] == nil || back["tree"] == nil {
				t.Errorf("JSON: %v, keys %v", err, len(back))
			}
			if !strings.Contains(stdout.String(), StepGrepWarm) || !strings.Contains(stdout.String(), "messages per directory") ||
				!strings.Contains(stdout.String(), "metadata round trip") {
				t.Errorf("table:\n%s", stdout.String())
			}
		})
	}
}

func checkShape(t *testing.T, res *Result, cfg Config) {
	t.Helper()
	if res.Tree.Files != 50 || res.Tree.Dirs < 2 {
		t.Errorf("tree %+v", res.Tree)
	}
	wantSteps := len(steps())
	if res.Params["python"] == "" {
		wantSteps -= 2
	}
	if len(res.Steps) != wantSteps {
		t.Errorf("%d steps, want %d", len(res.Steps), wantSteps)
	}
	for _, st := range res.Steps {
		for _, tg := range []string{TargetExt4, TargetPass, TargetCoopfs} {
			row := res.Get(RowKey(st.Key, tg))
			if row == nil || len(row.Samples) != cfg.Repeat || row.Median <= 0 {
				t.Errorf("%s: row %+v", RowKey(st.Key, tg), row)
			}
		}
		c := res.Get(RowKey(st.Key, TargetCoopfs))
		if c.Ceiling != RowKey(st.Key, TargetPass) || c.Ratio <= 0 || c.Met == nil || c.Target != st.Target {
			t.Errorf("%s: coopfs row %+v", st.Key, c)
		}
		// A warm step may send no message at all (the server's callbacks).
		if m := res.Get("msgs/" + st.Key); m == nil || len(m.Samples) != cfg.Repeat || m.Median < 0 {
			t.Errorf("%s: messages row %+v", st.Key, m)
		}
	}
	for _, key := range []string{StepRTT, StepRTT + "-p90"} {
		for _, tg := range []string{TargetExt4, TargetPass, TargetCoopfs} {
			if row := res.Get(RowKey(key, tg)); row == nil || len(row.Samples) != cfg.Repeat || row.Median <= 0 {
				t.Errorf("%s: row %+v", RowKey(key, tg), row)
			}
		}
	}
	if m := res.Messages[StepRTT]; len(m["Lookup"]) != cfg.Repeat || m["Lookup"][0] < RTTFiles/2 {
		t.Errorf("round-trip probe: the coopfs client sent %v", m)
	}
	if r := res.Get("msgs-per-dir/" + StepGrepWarm); r == nil || r.Median <= 0 {
		t.Errorf("per-directory messages %+v", r)
	}
	if cfg.C2OFiles > 0 {
		if res.C2O == nil || len(res.C2O.Rounds) != 2 {
			t.Fatalf("close-to-open %+v", res.C2O)
		}
		for _, rd := range res.C2O.Rounds {
			if rd.Stale != 0 {
				t.Errorf("close-to-open across mounts: %s: %d stale files (first %s)", rd.Name, rd.Stale, rd.FirstStale)
			}
			if rd.ReadMessages["ReadBlock"]+rd.ReadMessages["OpenRead"] == 0 { // the data comes with an OpenRead (agent/openread.go)
				t.Errorf("%s: the reader sent %v", rd.Name, rd.ReadMessages)
			}
		}
	} else if res.C2O != nil {
		t.Errorf("close-to-open ran with %d files", cfg.C2OFiles)
	}
}
