package agent_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/server/servertest"
)

// Eight clients read one file at once under balanced swarm forwarding:
// every reader gets the file's bytes, each confirms the blocks it received
// (Held), and the server sends each block about once, the peers the rest.
func TestDirectorySwarmSimultaneousReaders(t *testing.T) {
	const readers, bs, nblocks = 8, 64 << 10, 64
	export := t.TempDir()
	data := pattern(bs*nblocks, 7)
	if err := os.WriteFile(filepath.Join(export, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sm := obs.NewMetrics()
	addr := servertest.Serve(t, server.Config{Export: export, BlockSize: bs, Policy: "directory", Metrics: sm,
		Directory: directory.Config{Balanced: true, Swarm: true}, Squash: server.SquashNone})
	ctx := asRoot()
	var agents []*agent.Agent
	for range readers {
		a, err := agent.New(ctx, agent.Config{Server: addr, Policy: "directory", Metrics: obs.NewMetrics(),
			ReadAhead: 4, ForwardTimeout: 5 * time.Second, ReconnectTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		agents = append(agents, a)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if got, err := readAll(ctx, a, "f"); err != nil || !bytes.Equal(got, data) {
				t.Errorf("reader %d: %d bytes, err %v", i, len(got), err)
			}
		}()
	}
	close(start)
	wg.Wait()
	// The confirmations travel a moment after the blocks (one Held per
	// burst): wait for all of them, for as long as the test may run.
	want := float64(readers * nblocks)
	var held float64
	for deadline := time.Now().Add(30 * time.Second); held < want; time.Sleep(10 * time.Millisecond) {
		if held = scrape(t, sm).Sum("coopfs_directory_held_blocks_total", nil); time.Now().After(deadline) {
			t.Fatalf("the server heard of %v held blocks, want %v (every block every reader received)", held, want)
		}
	}
	ss := scrape(t, sm)
	served := ss.Sum("coopfs_directory_served_by_server_total", nil)
	if served > nblocks*11/10 {
		t.Errorf("the server served %v block reads for %d blocks, want about one each", served, nblocks)
	}
	if fwd := ss.Sum("coopfs_directory_forwards_total", nil); fwd < want-served {
		t.Errorf("%v forwards, want at least %v (every read the server did not serve)", fwd, want-served)
	}
}
