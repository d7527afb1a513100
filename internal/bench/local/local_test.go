package local

import (
	"os"
	"testing"

	"github.com/coopfs/coopfs/internal/bench/report"
)

func TestValidate(t *testing.T) {
	c := Config{}
	if err := c.Validate(); err != nil || c.Size != DefaultSize || c.Reps != DefaultReps || c.Threads != DefaultThreads {
		t.Fatalf("defaults %+v: %v", c, err)
	}
	for _, bad := range []Config{{Size: 1000}, {Reps: 101}, {Threads: 1000}, {RandOps: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestRows: every coopfs row is compared with a ceiling row that exists,
// and the two targets of issue 2 are set.
func TestRows(t *testing.T) {
	for _, skip := range []bool{false, true} {
		b := &bench{cfg: Config{SkipCold: skip}, r: report.New("local", "")}
		b.cfg.setDefaults()
		b.declareRows()
		for _, row := range b.r.Rows {
			if row.Ceiling != "" && b.r.Get(row.Ceiling) == nil {
				t.Errorf("%s compared with missing %s", row.Key, row.Ceiling)
			}
		}
		if r := b.r.Get(KeyMemSeq); r.Target != TargetMemCache || r.Ceiling != KeyNullfsSeq {
			t.Errorf("mem-seq row %+v", r)
		}
		if r := b.r.Get(KeyPageCache); r.Target != TargetPageCache || r.Ceiling != KeyExportWarm {
			t.Errorf("pagecache row %+v", r)
		}
		if (b.r.Get(KeyColdSeq) == nil) != skip {
			t.Errorf("skip cold %v: cold row %v", skip, b.r.Get(KeyColdSeq))
		}
	}
}

func TestCheckPaths(t *testing.T) {
	b := &bench{r: report.New("local", "")}
	before := layerReads{"local_memory": 10, "server_disk": 5}
	mid := layerReads{"local_memory": 1034, "server_disk": 5}
	b.checkPaths(0, before, mid, mid)
	if len(b.r.Notes) != 1 || b.r.Notes[0][:len("counters confirm")] != "counters confirm" {
		t.Errorf("notes %q", b.r.Notes)
	}
	b.r.Notes = nil
	after := layerReads{"local_memory": 2000, "server_disk": 5}
	b.checkPaths(1, before, before, after) // nothing reached the agent, then the page cache was not kept
	if len(b.r.Notes) != 2 {
		t.Errorf("notes %q", b.r.Notes)
	}
}

// TestEveryCeilingBounds: every compared row is checked against its
// ceiling (a ceiling below it is reported as broken), and the write rows
// carry the targets of the single-client work.
func TestEveryCeilingBounds(t *testing.T) {
	for _, skip := range []bool{false, true} {
		b := &bench{cfg: Config{SkipWrites: skip}, r: report.New("local", "")}
		b.cfg.setDefaults()
		b.declareRows()
		for _, row := range b.r.Rows {
			if row.Ceiling != "" && !row.Bound {
				t.Errorf("%s: its ceiling %s is not checked to bound it", row.Key, row.Ceiling)
			}
		}
		wt, wb := b.r.Get(KeyWTWrite), b.r.Get(KeyWBWrite)
		if skip {
			if wt != nil || wb != nil {
				t.Error("write rows declared with SkipWrites")
			}
			continue
		}
		if wt == nil || wt.Ceiling != KeyExportWrite || wt.Target != TargetWriteThrough {
			t.Errorf("write-through row %+v", wt)
		}
		if wb == nil || wb.Ceiling != KeyDiskWrite || wb.Target != TargetWriteBack {
			t.Errorf("write-back row %+v", wb)
		}
	}
}

func TestMountOption(t *testing.T) {
	// / is always a mount point; its options name no max_read.
	if v, err := mountOption("/", "max_read"); err != nil || v != "" {
		t.Errorf("/: %q, %v", v, err)
	}
	if _, err := mountOption("/no/such/mount", "max_read"); err == nil {
		t.Error("no error for a directory that is not a mount point")
	}
}

func TestWriteSeq(t *testing.T) {
	p := t.TempDir() + "/f"
	mbps, err := writeSeq(t.Context(), p, 3<<20+5)
	if err != nil || mbps <= 0 {
		t.Fatalf("%v MB/s: %v", mbps, err)
	}
	if st, err := os.Stat(p); err != nil || st.Size() != 3<<20+5 {
		t.Errorf("%v %v", st, err)
	}
}
