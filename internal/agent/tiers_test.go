package agent_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/obs"
)

// waitDiskEntries waits until an agent's disk tier holds n blocks (the
// disk tier is filled in the background, behind the fetches).
func waitDiskEntries(t *testing.T, m *obs.Metrics, n float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := scrape(t, m).Sum("coopfs_cache_entries", map[string]string{"tier": obs.LayerLocalDisk})
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("disk tier holds %v blocks after 10s; want %v", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDiskTierRestartAndPeers: an agent with a disk tier and a tiny memory
// tier reads a file; a second client's misses are forwarded to it, and it
// serves them from its disk (its memory tier holds 4 of the 64 blocks);
// restarted on the same cache directory, it reads the file from disk only.
func TestDiskTierRestartAndPeers(t *testing.T) {
	export := t.TempDir()
	data := pattern(256<<10, 9)
	if err := os.WriteFile(filepath.Join(export, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sm := obs.NewMetrics()
	// The server last in the rotation: with one reader, every miss goes to
	// the holder (by default the server takes the first turn).
	addr := startDirServerWith(t, export, sm, directory.Config{ServerLast: true})
	ctx := context.Background()
	cacheDir := filepath.Join(t.TempDir(), "disk")
	holder := func(m *obs.Metrics) *agent.Agent {
		a, err := agent.New(ctx, agent.Config{Server: addr, Policy: "directory", Metrics: m, CacheSize: 16 << 10,
			ReadAhead: 2, ForwardTimeout: 2 * time.Second, ReconnectTimeout: time.Second,
			Disk: agent.DiskConfig{Dir: cacheDir, Size: 1 << 20, Banks: 2, Assoc: 4}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	m1 := obs.NewMetrics()
	a := holder(m1)
	if got, err := readAll(ctx, a, "f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("first read: %d bytes, %v", len(got), err)
	}
	waitDiskEntries(t, m1, 64)
	mr := obs.NewMetrics()
	reader, err := agent.New(ctx, agent.Config{Server: addr, Policy: "directory", Metrics: mr,
		ForwardTimeout: 2 * time.Second, ReconnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	if got, err := readAll(ctx, reader, "f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("second client: %d bytes, %v", len(got), err)
	}
	peer := scrape(t, mr).Sum(obs.MetricReads, map[string]string{"layer": obs.LayerPeer})
	if peer < 32 {
		t.Fatalf("the holder's disk served %v of 64 blocks to the second client; want most", peer)
	}
	t.Logf("peer served %v of 64 blocks", peer)
	a.Close()

	m2 := obs.NewMetrics()
	a = holder(m2)
	t.Cleanup(func() { a.Close() })
	if got, err := readAll(ctx, a, "f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after restart: %d bytes, %v", len(got), err)
	}
	s := scrape(t, m2)
	server := s.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerMemory}) +
		s.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerDisk})
	if disk := s.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerLocalDisk}); disk != float64(len(data)) || server != 0 {
		t.Fatalf("after restart: %v bytes from local_disk, %v from the server; want all from disk", disk, server)
	}

}

// TestDiskTierEvictionsDiscard: under the directory policy, a block that
// leaves the memory tier but stays on disk is not discarded, and one the
// disk tier then drops is: the server's directory follows what the client
// can still serve.
func TestDiskTierEvictionsDiscard(t *testing.T) {
	export := t.TempDir()
	data := pattern(256<<10, 5)
	if err := os.WriteFile(filepath.Join(export, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := startDirServer(t, export, obs.NewMetrics())
	ctx := context.Background()
	m := obs.NewMetrics()
	a, err := agent.New(ctx, agent.Config{Server: addr, Policy: "directory", Metrics: m, CacheSize: 16 << 10,
		DiscardQueue: 1000, ReconnectTimeout: time.Second,
		Disk: agent.DiskConfig{Dir: t.TempDir(), Size: 128 << 10, Banks: 2, Assoc: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got, err := readAll(ctx, a, "f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %d bytes, %v", len(got), err)
	}
	// 64 blocks went through a memory tier of 4 and a disk tier of 32: the
	// 28 or so the disk tier dropped are queued for discard, the ones it
	// holds are not.
	deadline := time.Now().Add(10 * time.Second)
	for {
		q := scrape(t, m).Sum("coopfs_discard_queue", nil)
		if q >= 28 && q <= 60 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("discard queue holds %v blocks; want those the disk tier dropped (about 28 of 64)", q)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
