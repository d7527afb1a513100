package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// treeRun is what one `find -exec stat` + read of a tree cost a mount:
// the messages it sent and the bytes of all its messages, by its /metrics.
type treeRun struct {
	msgs, bytes float64
	byType      map[string]float64
}

// walkTree runs `find DIR -exec stat` and reads every file of the tree
// through the mount, then scrapes the mount's counters.
func walkTree(t *testing.T, m *e2eMount, metrics string) treeRun {
	t.Helper()
	dir := m.path("tree")
	for _, args := range [][]string{
		{"find", dir, "-exec", "stat", "--format=%n %s %Y", "{}", "+"},
		{"find", dir, "-type", "f", "-exec", "cat", "{}", "+"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout = nil
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	ss := scrape(t, metrics)
	return treeRun{
		msgs:   ss.Sum("coopfs_messages_total", map[string]string{"dir": "out"}),
		bytes:  ss.Sum("coopfs_message_bytes_total", nil),
		byType: ss.SumBy("coopfs_messages_total", "type", map[string]string{"dir": "out"}),
	}
}

// TestE2EMetaDiskRestart: a mount with a disk cache walks and reads a tree
// (cold: lookups, listings, opens and blocks from the server); a new mount
// process on the same cache directory does it again (warm: the attributes
// and listings it kept are revalidated in bulk, the data comes from its
// disk tier) and costs a fraction of the messages and bytes; a file
// changed meanwhile is read anew.
func TestE2EMetaDiskRestart(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--block-size", "64KiB")
	root := filepath.Join(srv.export, "tree")
	const dirs, files = 8, 25
	for d := 0; d < dirs; d++ {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("d%d", d)), 0o755); err != nil {
			t.Fatal(err)
		}
		for f := 0; f < files; f++ {
			data := patterned(1000+f*300, uint64(d*100+f))
			if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("d%d/f%02d", d, f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cacheDir := filepath.Join(t.TempDir(), "cache")
	mount := func() (*e2eMount, string) {
		metrics := e2eFreeAddr(t)
		return startMount(t, srv.addr, "--disk-cache", cacheDir, "--disk-cache-size", "256MiB", "--metrics", metrics), metrics
	}
	m, metrics := mount()
	cold := walkTree(t, m, metrics)
	m.cleanup(t)

	changed := patterned(5000, 999)
	if err := os.WriteFile(filepath.Join(root, "d3/f07"), changed, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	m, metrics = mount()
	warm := walkTree(t, m, metrics)
	wantFile(t, "a file changed while the mount was down", m.path("tree/d3/f07"), changed)
	t.Logf("find -exec stat + read of %d files in %d directories: cold %.0f messages, %.0f bytes; warm restart %.0f messages (%.2f of cold), %.0f bytes (%.2f of cold)",
		dirs*files, dirs, cold.msgs, cold.bytes, warm.msgs, warm.msgs/cold.msgs, warm.bytes, warm.bytes/cold.bytes)
	t.Logf("cold by type: %v", cold.byType)
	t.Logf("warm by type: %v", warm.byType)
	if warm.byType["Revalidate"] == 0 {
		t.Errorf("the warm restart sent no Revalidate: the metadata cache on disk was not used")
	}
	if warm.msgs >= cold.msgs/2 {
		t.Errorf("the warm restart sent %.0f messages, the cold run %.0f: want less than half", warm.msgs, cold.msgs)
	}
}
