package meta

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// C2OResult is the cross-client close-to-open phase: a tree written
// through one coopfs mount and read through another, every byte checked,
// then every file rewritten (same sizes, new bytes) and checked again.
type C2OResult struct {
	Files  int     `json:"files"`
	Bytes  int64   `json:"bytes"`
	Rounds []Round `json:"rounds"`
}

// Round is one write-then-read round.
type Round struct {
	Name       string  `json:"name"`
	WriteSecs  float64 `json:"write_seconds"`
	ReadSecs   float64 `json:"read_seconds"`
	Stale      int     `json:"stale_files"` // files whose bytes differed from what was written
	FirstStale string  `json:"first_stale,omitempty"`
	// Messages the reading client sent during the read, by type.
	ReadMessages map[string]float64 `json:"read_messages"`
}

// c2oContent is the content of file i in round r: 1 to 8 KiB, the same
// size in every round, different bytes.
func c2oContent(round, i int) []byte {
	size := 1024 + rand.New(rand.NewPCG(uint64(i), 77)).IntN(7*1024)
	b := make([]byte, size)
	_, _ = rand.NewChaCha8(c2oSeed(round, i)).Read(b)
	return b
}

func c2oSeed(round, i int) [32]byte {
	var s [32]byte
	s[0], s[1], s[2], s[3] = byte(round), byte(i), byte(i>>8), byte(i>>16)
	return s
}

func c2oPath(root string, i int) string {
	return filepath.Join(root, fmt.Sprintf("d%03d", i/50), fmt.Sprintf("f%05d", i))
}

// runC2O starts a coopfs server and two mounts of export and runs two
// rounds.
func runC2O(ctx context.Context, cfg *Config, export, dir string, d *dropper) (*C2OResult, error) {
	ct, err := newCoopfsTarget(ctx, cfg, export, dir, 2, d)
	if err != nil {
		return nil, err
	}
	defer ct.close()
	mnts := ct.cl.Mountpoints()
	a, b := filepath.Join(mnts[0], "c2o"), filepath.Join(mnts[1], "c2o")
	res := &C2OResult{Files: cfg.C2OFiles}
	for i := range cfg.C2OFiles {
		res.Bytes += int64(len(c2oContent(0, i)))
	}
	for round, name := range []string{"create through mount 1, read through mount 2", "rewrite every file through mount 1 (same sizes), read through mount 2"} {
		rd := Round{Name: name}
		start := time.Now()
		for i := range cfg.C2OFiles {
			p := c2oPath(a, i)
			if i%50 == 0 && round == 0 {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return nil, fmt.Errorf("close-to-open: %w", err)
				}
			}
			if err := os.WriteFile(p, c2oContent(round, i), 0o644); err != nil {
				return nil, fmt.Errorf("close-to-open: write through mount 1: %w", err)
			}
		}
		rd.WriteSecs = time.Since(start).Seconds()
		before, err := clientMessages(ctx, ct.cl.Clients[1].MetricsAddr)
		if err != nil {
			return nil, err
		}
		start = time.Now()
		for i := range cfg.C2OFiles {
			got, err := os.ReadFile(c2oPath(b, i))
			if err != nil {
				return nil, fmt.Errorf("close-to-open: read through mount 2: %w", err)
			}
			if !bytes.Equal(got, c2oContent(round, i)) {
				if rd.Stale == 0 {
					rd.FirstStale = c2oPath(b, i)
				}
				rd.Stale++
			}
		}
		rd.ReadSecs = time.Since(start).Seconds()
		after, err := clientMessages(ctx, ct.cl.Clients[1].MetricsAddr)
		if err != nil {
			return nil, err
		}
		rd.ReadMessages = subMessages(after, before)
		res.Rounds = append(res.Rounds, rd)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if err := os.RemoveAll(a); err != nil {
		return nil, fmt.Errorf("close-to-open: remove the tree: %w", err)
	}
	return res, ct.close()
}
