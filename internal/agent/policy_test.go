package agent_test

import (
	"bytes"
	"sync"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/obs"
)

// TestPolicySeam runs the same scenario under every policy the seam
// carries: one client reads a file, two more read it at once through
// caches smaller than the file (evictions: discard notifications under
// directory, forwards of master copies under hints), a client writes it,
// and everyone reads the new content (close-to-open: no peer serves the
// old version). Cooperative policies serve some later reads from peers;
// `none` never does.
func TestPolicySeam(t *testing.T) {
	for _, policy := range agent.Policies {
		t.Run(policy, func(t *testing.T) {
			export := t.TempDir()
			const blocks = 24
			v1, v2 := pattern(blocks*hbs, 21), pattern(blocks*hbs, 22)
			writeExport(t, export, "f", v1)
			addr := startPolicyServer(t, export, policy, obs.NewMetrics(), 1<<20)
			var cs []*hintsAgent
			for i := 0; i < 3; i++ {
				cs = append(cs, newHintsAgent(t, addr, policy, 16, ""))
			}
			cs[0].mustRead(t, "f", v1)
			var wg sync.WaitGroup
			for _, c := range cs[1:] {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if got, err := readAll(asRoot(), c.Agent, "f"); err != nil || !bytes.Equal(got, v1) {
						t.Errorf("concurrent reader: %d bytes, %v", len(got), err)
					}
				}()
			}
			wg.Wait()
			peer := 0.0
			for _, c := range cs[1:] {
				peer += c.layer(t, obs.LayerPeer)
			}
			switch {
			case policy == "none" && peer != 0:
				t.Errorf("none: %v reads from peers", peer)
			case policy != "none" && peer == 0:
				t.Errorf("%s: no later read came from a peer", policy)
			}
			// A write through client 1, then everyone reads the new version.
			w, _, err := cs[1].Open(asRoot(), "f", syscall.O_RDWR)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.WriteAt(asRoot(), v2, 0); err != nil {
				t.Fatal(err)
			}
			w.Release(asRoot())
			for _, c := range cs {
				c.mustRead(t, "f", v2)
			}
			bad := 0.0
			for _, c := range cs {
				bad += c.count(t, "coopfs_hints_bad_blocks_total") + c.count(t, "coopfs_forwarded_bad_blocks_total") +
					c.count(t, "coopfs_wholefile_bad_blocks_total")
			}
			if bad != 0 {
				t.Errorf("%v peer blocks failed their check", bad)
			}
		})
	}
}
