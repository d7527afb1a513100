package agent_test

import (
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/vfs"
)

// fetched is how many block reads the client did not serve from its own
// memory: from a peer or the server.
func (h *hintsAgent) fetched(t *testing.T) float64 {
	t.Helper()
	return h.layer(t, obs.LayerPeer) + h.layer(t, obs.LayerServerMemory) + h.layer(t, obs.LayerServerDisk)
}

func openRW(t *testing.T, a *agent.Agent, path string) vfs.File {
	t.Helper()
	f, _, err := a.Open(asRoot(), path, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func writeAt(t *testing.T, f vfs.File, want []byte, p []byte, off int) []byte {
	t.Helper()
	if _, err := f.WriteAt(asRoot(), p, int64(off)); err != nil {
		t.Fatal(err)
	}
	if end := off + len(p); end > len(want) {
		want = append(want, make([]byte, end-len(want))...)
	}
	copy(want[off:], p)
	return want
}

// TestWriterKeepsItsBlocks: under every policy, a client that read a file
// and writes parts of it (a whole block, part of a block, past the end of
// the file) reads it all again from its own memory; the file's content is
// the one written. Another client's write in between makes it drop its
// blocks (the server's version moved twice), and its next open reads the
// other client's bytes: close-to-open holds.
func TestWriterKeepsItsBlocks(t *testing.T) {
	for _, policy := range agent.Policies {
		t.Run(policy, func(t *testing.T) {
			export := t.TempDir()
			v1 := pattern(8*hbs+1000, 31)
			writeExport(t, export, "f", v1)
			addr := startPolicyServer(t, export, policy, obs.NewMetrics(), 1<<20)
			w := newHintsAgent(t, addr, policy, 64, "")
			other := newHintsAgent(t, addr, policy, 64, "")
			w.mustRead(t, "f", v1)
			before := w.fetched(t)

			f := openRW(t, w.Agent, "f")
			want := append([]byte(nil), v1...)
			want = writeAt(t, f, want, pattern(hbs, 40), 2*hbs)          // a whole block
			want = writeAt(t, f, want, pattern(100, 41), 4*hbs+10)       // part of a block
			want = writeAt(t, f, want, pattern(500, 42), len(want)+2000) // past the end: the old last block grows
			f.Release(asRoot())
			w.mustRead(t, "f", want)
			if got := w.fetched(t) - before; got != 0 {
				t.Errorf("the writer fetched %v blocks after its own writes, want 0 (its copies are current)", got)
			}

			// Another client writes block 5 while the writer has the file
			// open; the writer's next write must not keep its old block 5.
			f = openRW(t, w.Agent, "f")
			g := openRW(t, other.Agent, "f")
			want = writeAt(t, g, want, pattern(hbs, 50), 5*hbs)
			g.Release(asRoot())
			want = writeAt(t, f, want, pattern(hbs, 51), 1*hbs)
			f.Release(asRoot())
			w.mustRead(t, "f", want)
			other.mustRead(t, "f", want)
		})
	}
}
