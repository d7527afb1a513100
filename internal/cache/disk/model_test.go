package disk

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/cachetest"
)

// fastDir is a temporary directory on tmpfs when there is one: the model
// test checks the cache's logic, and 100k operations with an fsync each
// would take minutes on a real disk. The crash tests use a real disk.
func fastDir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "coopfs-disk-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// refBlock is what the reference model knows of a block: the data of its
// latest Put, and whether that data still has to reach the server.
type refBlock struct {
	v     block.Version
	data  []byte
	dirty bool
}

type refModel struct {
	t      *testing.T
	blocks map[block.ID]*refBlock
	stale  map[uint64]bool
	fail   bool // the write-back function fails
	wrote  int
}

// writeBack checks that only the latest dirty data of a live file is ever
// written back, and records that the server now has it.
func (m *refModel) writeBack(id block.ID, v block.Version, d []byte) error {
	if m.fail {
		return errors.New("server unreachable")
	}
	b := m.blocks[id]
	switch {
	case m.stale[id.File]:
		m.t.Errorf("write-back of %v, a block of stale file %d", id, id.File)
	case b == nil || !b.dirty || b.v != v || !bytes.Equal(b.data, d):
		m.t.Errorf("write-back of %v v%d (%d bytes) that the model does not hold dirty", id, v, len(d))
	default:
		b.dirty = false
	}
	m.wrote++
	return nil
}

func (m *refModel) dirtySet() map[DirtyBlock]bool {
	out := map[DirtyBlock]bool{}
	for id, b := range m.blocks {
		if b.dirty {
			out[DirtyBlock{id, b.v}] = true
		}
	}
	return out
}

// TestReferenceModel runs random operations, restarts included, against a
// map of what every block must hold: a hit returns the latest data put, a
// dirty block is never lost (it hits, or the server got it), a stale file's
// blocks are never written back, and after every reopen Dirty() is exactly
// the model's dirty set.
func TestReferenceModel(t *testing.T) {
	ops := 100_000
	if testing.Short() {
		ops = 10_000
	}
	const bs = 512
	dir := fastDir(t)
	m := &refModel{t: t, blocks: map[block.ID]*refBlock{}, stale: map[uint64]bool{}}
	cfg := Config{Dir: dir, Size: 48 * bs, BlockSize: bs, Banks: 3, Assoc: 4, Seed: 3, WriteBack: m.writeBack}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	rng := rand.New(rand.NewPCG(5, 6))
	var hits, reopens int
	for op := range ops {
		id := block.ID{File: uint64(rng.IntN(6)), Index: uint64(rng.IntN(12))}
		v := block.Version(1 + rng.IntN(3))
		m.fail = rng.IntN(10) == 0
		what := m.step(c, rng, id, v, &hits)
		if what == "reopen" {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if c, err = Open(cfg); err != nil {
				t.Fatal(err)
			}
			reopens++
			m.checkDirty(c, op)
		}
		if t.Failed() {
			t.Fatalf("op %d (%s on %v v%d) broke the model", op, what, id, v)
		}
		if s := c.Stats(); s.Bytes < 0 || s.Bytes > s.Capacity || s.Entries > len(m.blocks)+m.staleBlocks(c) {
			t.Fatalf("op %d (%s): stats %+v with %d blocks in the model", op, what, s, len(m.blocks))
		}
	}
	m.checkDirty(c, ops)
	t.Logf("%d ops: %d hits, %d reopens, %d write-backs, stats %+v", ops, hits, reopens, m.wrote, c.Stats())
	if hits < ops/20 || reopens < 10 || m.wrote == 0 {
		t.Fatalf("the test exercised too little: %d hits, %d reopens, %d write-backs", hits, reopens, m.wrote)
	}
}

// staleBlocks counts the frames of stale files the cache still holds (they
// are not in the model but occupy frames until reused).
func (m *refModel) staleBlocks(c *Cache) int {
	n := 0
	for f := range m.stale {
		for i := range c.banks {
			n += len(c.banks[i].b.files[f])
		}
	}
	return n
}

func (m *refModel) checkDirty(c *Cache, op int) {
	want := m.dirtySet()
	got := map[DirtyBlock]bool{}
	for _, d := range c.Dirty() {
		got[d] = true
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		m.t.Fatalf("op %d: Dirty() = %v; the model has %v", op, got, want)
	}
	for d := range want {
		if b, ok := c.Get(d.ID, d.Version); !ok || !bytes.Equal(b, m.blocks[d.ID].data) {
			m.t.Fatalf("op %d: dirty block %v does not read back", op, d.ID)
		}
	}
}

func (m *refModel) step(c *Cache, rng *rand.Rand, id block.ID, v block.Version, hits *int) string {
	const bs = 512
	switch r := rng.IntN(1000); {
	case r < 400:
		got, ok := c.Get(id, v)
		b := m.blocks[id]
		if ok {
			*hits++
			if b == nil || b.v != v || !bytes.Equal(got, b.data) {
				m.t.Errorf("Get hit with data the model does not hold")
			}
		} else if b != nil && b.dirty && b.v == v {
			m.t.Errorf("a dirty block missed")
		}
		return "Get"
	case r < 650:
		d := cachetest.Data(id, v, rng.IntN(bs+1))
		c.Put(id, v, d)
		m.unstale(id.File)
		m.blocks[id] = &refBlock{v: v, data: d}
		return "Put"
	case r < 880:
		d := cachetest.Data(id, v+7, rng.IntN(bs+1))
		err := c.PutDirty(id, v, d)
		m.unstale(id.File)
		var full *FullError
		switch {
		case err == nil:
			m.blocks[id] = &refBlock{v: v, data: d, dirty: true}
		case !errors.As(err, &full):
			m.t.Errorf("PutDirty: %v", err)
		}
		return "PutDirty"
	case r < 930:
		c.Remove(id)
		delete(m.blocks, id)
		return "Remove"
	case r < 945:
		c.RemoveFile(id.File)
		m.dropFile(id.File, 0)
		delete(m.stale, id.File)
		return "RemoveFile"
	case r < 965:
		size := int64(rng.IntN(14 * bs))
		if err := c.Truncate(id.File, size); err != nil {
			m.t.Errorf("Truncate: %v", err)
		}
		m.dropFile(id.File, size)
		return "Truncate"
	case r < 975:
		if err := c.MarkStale(id.File); err != nil {
			m.t.Errorf("MarkStale: %v", err)
		}
		m.dropFile(id.File, 0)
		m.stale[id.File] = true
		return "MarkStale"
	case r < 985:
		m.fail = false
		if _, err := c.WriteBackAll(); err != nil {
			m.t.Errorf("WriteBackAll: %v", err)
		}
		if len(c.Dirty()) != 0 {
			m.t.Errorf("dirty blocks left after WriteBackAll")
		}
		return "WriteBackAll"
	case r < 997:
		return "reopen"
	default:
		m.fail = false
		return "nothing"
	}
}

func (m *refModel) unstale(file uint64) {
	if m.stale[file] {
		delete(m.stale, file)
	}
}

// dropFile removes the model's blocks of file past size and cuts the one
// that straddles it.
func (m *refModel) dropFile(file uint64, size int64) {
	const bs = 512
	for id, b := range m.blocks {
		if id.File != file {
			continue
		}
		start := int64(id.Index) * bs
		switch {
		case start >= size:
			delete(m.blocks, id)
		case start+int64(len(b.data)) > size:
			b.data = b.data[:size-start]
		}
	}
}
