package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coopfs/coopfs/internal/bench/fio"
)

// TestE2EBenchFioQuick runs `coopfs bench fio --quick`, smaller still, on
// every target (real fio, bindfs, coopfs serve and mount) and checks that
// every job has a figure on every target and that the ratios to ext4 and
// to bindfs are computed. It runs where fio is installed (make deps
// installs it) and asserts nothing about speed.
func TestE2EBenchFioQuick(t *testing.T) {
	needFUSE(t)
	for _, tool := range []string{"fio", "bindfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("bench fio needs %s (make deps installs it)", tool)
		}
	}
	out := t.TempDir()
	jsonPath := filepath.Join(out, "fio.json")
	cmd := exec.Command(e2e.bin, "bench", "fio", "--quick", "--size", "16MiB", "--small-files", "50",
		"--json", jsonPath, "--out", out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench fio: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "coopfs-wt/bindfs") {
		t.Errorf("the table lacks the ratio columns:\n%s", b)
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var r fio.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 12 || len(r.Targets) != 4 {
		t.Fatalf("%d rows over %v", len(r.Rows), r.Targets)
	}
	if m := r.Missing(); len(m) > 0 {
		t.Errorf("no figure for %v:\n%s", m, b)
	}
	for _, row := range r.Rows {
		for _, tg := range r.Targets {
			if c := row.Cells[tg]; c == nil || c.VsExt4 <= 0 || c.VsPass <= 0 {
				t.Errorf("%s on %s: ratios not computed: %+v", row.Key, tg, c)
			}
		}
	}
	for _, u := range []string{"mbps", "iops", "files", "us"} {
		if st, err := os.Stat(filepath.Join(out, "fio-"+u+".png")); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", u, err)
		}
	}
}
