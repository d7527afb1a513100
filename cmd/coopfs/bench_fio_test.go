package main

import (
	"io"
	"testing"

	"github.com/coopfs/coopfs/internal/bench/fio"
)

func TestBenchFioFlags(t *testing.T) {
	cfg, _, err := fioFlags([]string{"--quick", "--small-files", "50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Size != fio.QuickSize || cfg.SmallFiles != 50 || cfg.Reps != fio.QuickReps || cfg.RandSeconds != fio.QuickRandSeconds {
		t.Errorf("--quick: %+v", cfg)
	}
	cfg, _, err = fioFlags([]string{"--size", "2GiB", "--rand-runtime", "7s", "--targets", "ext4,coopfs-wb"}, io.Discard)
	if err != nil || cfg.Size != 2<<30 || cfg.RandSeconds != 7 || len(cfg.Targets) != 2 || cfg.Reps != fio.DefaultReps {
		t.Errorf("%+v: %v", cfg, err)
	}
	for _, bad := range [][]string{{"--targets", "nfs"}, {"--rand-runtime", "1500ms"}, {"--size", "1MiB"}, {"extra"}, {"--reps", "0", "--small-files", "-1"}} {
		if _, _, err := fioFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
