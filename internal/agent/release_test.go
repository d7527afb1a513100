package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/server/servertest"
	"github.com/coopfs/coopfs/internal/wire"
)

// Closed files are released in batches, one-way: many opens and closes
// cost Open messages and a few ReleaseBatch, no Release each; the
// server's cap on open handles is still honoured (an open refused with
// EMFILE sends the queued releases and succeeds), and a file that took a
// lock is released at once. A small file, whose open brings its data
// (openread.go), keeps no handle on the server and sends no release.
func TestReleasesAreBatched(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), make([]byte, 200<<10), 0o644) // its open brings no data: a handle
	os.WriteFile(filepath.Join(export, "small"), []byte("data"), 0o644)
	addr := servertest.Serve(t, server.Config{Export: export, Squash: server.SquashNone, Limits: server.Limits{MaxHandles: 8}})
	m := obs.NewMetrics()
	a, err := agent.New(context.Background(), agent.Config{Server: addr, Metrics: m, ReconnectTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sent := func(typ string) float64 {
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range fams {
			if mf.GetName() != obs.MetricMessages {
				continue
			}
			for _, mt := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range mt.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["type"] == typ && labels["dir"] == "out" {
					return mt.GetCounter().GetValue()
				}
			}
		}
		return 0
	}

	const n = 50
	for i := 0; i < n; i++ {
		f, _, err := a.Open(asRoot(), "f", syscall.O_RDONLY)
		if err != nil {
			t.Fatalf("open %d with at most 8 handles on the server: %v", i, err)
		}
		if err := f.Release(asRoot()); err != nil {
			t.Fatal(err)
		}
	}
	if r, b := sent("Release"), sent("ReleaseBatch"); r != 0 || b < 1 || b > n/4 {
		t.Errorf("%d opens and closes sent %v Release and %v ReleaseBatch: want none and a few", n, r, b)
	}

	time.Sleep(20 * time.Millisecond) // the last batch is out
	rel0, batch0, open0 := sent("Release"), sent("ReleaseBatch"), sent("OpenRead")
	for i := 0; i < n; i++ {
		f, _, err := a.Open(asRoot(), "small", syscall.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		if k, err := f.ReadAt(asRoot(), buf, 0); k != 4 || string(buf[:k]) != "data" {
			t.Fatalf("read of small: %q, %v", buf[:k], err)
		}
		if err := f.Release(asRoot()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // a batch would be out by now
	r, b, o, rb := sent("Release")-rel0, sent("ReleaseBatch")-batch0, sent("OpenRead")-open0, sent("ReadBlock")
	if r != 0 || b != 0 || o != n || rb > 0 {
		t.Errorf("%d opens and reads of a small file sent %v Release, %v ReleaseBatch, %v OpenRead, %v ReadBlock: want 0, 0, %d, 0", n, r, b, o, rb, n)
	}

	f, _, err := a.Open(asRoot(), "f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	lf := f.(interface {
		SetLock(ctx context.Context, owner uint64, flock bool, lk wire.Lock, wait bool) error
	})
	if err := lf.SetLock(asRoot(), 1, true, wire.Lock{Type: wire.LockWrite, End: wire.LockEOF}, false); err != nil {
		t.Fatal(err)
	}
	if err := f.Release(asRoot()); err != nil {
		t.Fatal(err)
	}
	if r := sent("Release"); r != 1 {
		t.Errorf("a locked file's close sent %v Release, want 1 (at once)", r)
	}
}
