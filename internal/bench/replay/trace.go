package replay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/coopfs/coopfs/internal/sim"
)

// trace is the replayed part of a workload, in memory, with what the live
// run needs to know about it.
type trace struct {
	name     string
	accesses []sim.Access
	clients  int
	reads    int
	// blocks is every file's size in blocks: the largest block accessed
	// plus one, or the size an open or delete names, whichever is larger.
	blocks map[uint64]uint64
}

// span is the trace's own time from the first counted access (after warm
// of them) to the last: 0 when the trace has no times.
func (t *trace) span(warm int) time.Duration {
	if warm < 0 || warm >= len(t.accesses) {
		warm = 0
	}
	if len(t.accesses) == 0 {
		return 0
	}
	return max(0, t.accesses[len(t.accesses)-1].Time-t.accesses[warm].Time)
}

// load reads up to max accesses (max < 0: all) of w.
func load(w sim.Workload, max int) (*trace, error) {
	src, err := w.Open()
	if err != nil {
		return nil, fmt.Errorf("replay: open %s: %w", w.Name(), err)
	}
	defer sim.CloseSource(src)
	t := &trace{name: w.Name(), blocks: map[uint64]uint64{}}
	for max < 0 || len(t.accesses) < max {
		a, err := src.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("replay: read %s: %w", w.Name(), err)
		}
		if a.Client < 0 || a.Client >= MaxClients {
			return nil, fmt.Errorf("replay: %s: access %d names client %d; the testbed runs at most %d client hosts",
				w.Name(), len(t.accesses)+1, a.Client, MaxClients)
		}
		t.add(a)
	}
	if t.reads == 0 {
		return nil, fmt.Errorf("replay: %s has no reads in its first %d accesses", w.Name(), len(t.accesses))
	}
	return t, nil
}

func (t *trace) add(a sim.Access) {
	t.accesses = append(t.accesses, a)
	t.clients = max(t.clients, a.Client+1)
	n := t.blocks[a.File]
	switch a.Op {
	case sim.OpRead, sim.OpWrite:
		n = max(n, a.Block+1)
		if a.Op == sim.OpRead {
			t.reads++
		}
	case sim.OpOpen, sim.OpDelete:
		n = max(n, a.Block)
	}
	t.blocks[a.File] = n
}

// bytes is the data set's size for block size bs.
func (t *trace) bytes(bs int64) int64 {
	var n int64
	for _, b := range t.blocks {
		n += int64(b) * bs
	}
	return n
}

// fileName is where file id lives in the export (and in every mount).
func fileName(id uint64) string {
	return filepath.Join("d"+strconv.FormatUint(id%64, 10), strconv.FormatUint(id, 10))
}

// fillBlock writes block b of file id into buf: a 16-byte header naming
// the block, then a pattern derived from it, so that every read can check
// it got the block it asked for.
func fillBlock(buf []byte, id, b uint64) {
	binary.LittleEndian.PutUint64(buf[0:], id)
	binary.LittleEndian.PutUint64(buf[8:], b)
	x := id*0x9e3779b97f4a7c15 ^ b
	for i := 16; i+8 <= len(buf); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(buf[i:], x)
	}
}

// checkBlock reports whether buf starts with block b of file id's header.
func checkBlock(buf []byte, id, b uint64) bool {
	return len(buf) >= 16 && binary.LittleEndian.Uint64(buf) == id && binary.LittleEndian.Uint64(buf[8:]) == b
}

// writeExport creates every file of the trace under dir at its size.
func (t *trace) writeExport(dir string, bs int64) error {
	ids := make([]uint64, 0, len(t.blocks))
	for id := range t.blocks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	buf := make([]byte, bs)
	for _, id := range ids {
		path := filepath.Join(dir, fileName(id))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("replay: export: %w", err)
		}
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("replay: export: %w", err)
		}
		for b := range t.blocks[id] {
			fillBlock(buf, id, b)
			if _, err := f.Write(buf); err != nil {
				f.Close()
				return fmt.Errorf("replay: export %s: %w", path, err)
			}
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("replay: export: %w", err)
		}
	}
	return nil
}
