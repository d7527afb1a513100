package disk

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/cache/cachetest"
)

const testBS = 4096

// suiteTier makes a tier of exactly capacity bytes: one bank of 2-way sets,
// or two banks when the frames divide evenly.
func suiteTier(t testing.TB) func(int64) cache.Tier {
	return func(capacity int64) cache.Tier {
		frames := int(capacity / testBS)
		banks := 1
		if frames%4 == 0 {
			banks = 2
		}
		c, err := Open(Config{Dir: t.TempDir(), Size: capacity, BlockSize: testBS, Banks: banks, Assoc: 2, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

func TestSuite(t *testing.T) {
	reopen := func(ct cache.Tier) cache.Tier {
		c := ct.(*Cache)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c, err := Open(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	cachetest.Run(t, suiteTier(t), cachetest.WithBlockSize(testBS), cachetest.WithReopen(reopen))
}

func open(t testing.TB, dir string, mod ...func(*Config)) *Cache {
	t.Helper()
	cfg := Config{Dir: dir, Size: 64 * testBS, BlockSize: testBS, Banks: 4, Assoc: 4, Seed: 7}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func data(id block.ID, v block.Version) []byte { return cachetest.Data(id, v, testBS) }

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, cfg := range []Config{
		{BlockSize: testBS},
		{Dir: dir},
		{Dir: dir, BlockSize: testBS, Size: -1},
		{Dir: dir, BlockSize: testBS, Assoc: 1},
		{Dir: dir, BlockSize: testBS, Banks: -2},
		{Dir: dir, BlockSize: testBS, Size: 8 * testBS, Banks: 4, Assoc: 4},
	} {
		if _, err := Open(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Open(%+v) = %v; want ErrConfig", cfg, err)
		}
	}
	// Defaults shrink to fit a small cache; the size rounds down.
	c, err := Open(Config{Dir: dir, BlockSize: testBS, Size: 10*testBS + 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Capacity; got != 8*testBS {
		t.Fatalf("capacity %d; want %d", got, 8*testBS)
	}
	c.Close()
}

func TestReopenGeometryAndLock(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir)
	if _, err := Open(Config{Dir: dir, Size: 64 * testBS, BlockSize: testBS, Banks: 4, Assoc: 4}); err == nil {
		t.Fatal("a second Open of a cache in use succeeded")
	}
	id := block.ID{File: 1, Index: 2}
	if err := c.PutDirty(id, 1, data(id, 1)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	other := Config{Dir: dir, Size: 64 * testBS, BlockSize: testBS, Banks: 2, Assoc: 4}
	if _, err := Open(other); err == nil || !strings.Contains(err.Error(), "1 dirty blocks") {
		t.Fatalf("Open with another geometry over a dirty block = %v; want a refusal", err)
	}
	// Once nothing is dirty, other sizes start the directory afresh.
	c = open(t, dir)
	if ok, err := c.MarkClean(id, 1); !ok || err != nil {
		t.Fatal("MarkClean found no dirty block")
	}
	c.Close()
	c, err := Open(other)
	if err != nil {
		t.Fatalf("Open with other sizes over a clean cache: %v", err)
	}
	if s := c.Stats(); s.Entries != 0 || s.Capacity != 64*testBS {
		t.Fatalf("after starting afresh: %+v", s)
	}
	c.Close()
	if banks, _ := filepath.Glob(filepath.Join(dir, "bank-*")); len(banks) != 2 {
		t.Fatalf("bank files after starting afresh with 2 banks: %v", banks)
	}
}

func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir)
	clean, dirty, gone := block.ID{File: 1, Index: 0}, block.ID{File: 1, Index: 1}, block.ID{File: 2, Index: 0}
	c.Put(clean, 3, data(clean, 3))
	if err := c.PutDirty(dirty, 3, data(dirty, 3)); err != nil {
		t.Fatal(err)
	}
	c.Put(gone, 1, data(gone, 1))
	c.Remove(gone)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir)
	defer c.Close()
	for _, id := range []block.ID{clean, dirty} {
		if got, ok := c.Get(id, 3); !ok || !bytes.Equal(got, data(id, 3)) {
			t.Fatalf("after reopen, Get(%v) = %v", id, ok)
		}
	}
	if _, ok := c.Get(gone, 1); ok {
		t.Fatal("a removed block came back after reopen")
	}
	if d := c.Dirty(); len(d) != 1 || d[0].ID != dirty || d[0].Version != 3 {
		t.Fatalf("Dirty() = %v", d)
	}
}

func TestCorruptFrameIsMiss(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir)
	id := block.ID{File: 5, Index: 9}
	c.Put(id, 1, data(id, 1))
	bn, _ := c.place(id)
	fr, _ := c.banks[bn].b.lookup(id)
	off := c.g.frameOff(fr)
	c.Close()
	path := filepath.Join(dir, "bank-000"+string(rune('0'+bn)))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xFF, 0x00, 0xFF}, off+100)
	f.Close()
	c = open(t, dir)
	defer c.Close()
	if _, ok := c.Get(id, 1); ok {
		t.Fatal("a corrupt frame was served")
	}
	if s := c.Stats(); s.Entries != 0 {
		t.Fatalf("the corrupt frame was not invalidated: %+v", s)
	}
}

func TestDirtyEvictionAndFull(t *testing.T) {
	var wrote []block.ID
	fail := false
	wb := func(id block.ID, v block.Version, d []byte) error {
		if fail {
			return errors.New("server down")
		}
		if !bytes.Equal(d, data(id, v)) {
			t.Errorf("write-back of %v with wrong data", id)
		}
		wrote = append(wrote, id)
		return nil
	}
	dir := t.TempDir()
	// One bank, one set of 4 ways: every block competes for the same frames.
	c := open(t, dir, func(c *Config) { c.Size, c.Banks, c.Assoc, c.WriteBack = 4*testBS, 1, 4, wb })
	defer c.Close()
	ids := make([]block.ID, 6)
	for i := range ids {
		ids[i] = block.ID{File: 1, Index: uint64(i)}
	}
	c.Put(ids[0], 1, data(ids[0], 1)) // clean: reused before any dirty frame
	for _, id := range ids[1:4] {
		if err := c.PutDirty(id, 1, data(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PutDirty(ids[4], 1, data(ids[4], 1)); err != nil || len(wrote) != 0 {
		t.Fatalf("PutDirty over a clean frame: err %v, wrote back %v", err, wrote)
	}
	if _, ok := c.Get(ids[0], 1); ok {
		t.Fatal("the clean block was not the one evicted")
	}
	if err := c.PutDirty(ids[5], 1, data(ids[5], 1)); err != nil || len(wrote) != 1 {
		t.Fatalf("PutDirty into a dirty set: err %v, wrote back %v", err, wrote)
	}
	fail = true
	err := c.PutDirty(block.ID{File: 9}, 1, data(block.ID{File: 9}, 1))
	var full *FullError
	if !errors.As(err, &full) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("PutDirty into a full dirty set = %v; want *FullError wrapping ENOSPC", err)
	}
	fail = false
	n, err := c.WriteBackAll()
	if err != nil || n != 4 || len(c.Dirty()) != 0 {
		t.Fatalf("WriteBackAll = %d, %v; dirty left %v", n, err, c.Dirty())
	}
}

func TestTruncate(t *testing.T) {
	c := open(t, t.TempDir())
	defer c.Close()
	for i := range uint64(4) {
		id := block.ID{File: 3, Index: i}
		if err := c.PutDirty(id, 1, data(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Truncate(3, testBS+100); err != nil {
		t.Fatal(err)
	}
	b0, b1 := block.ID{File: 3, Index: 0}, block.ID{File: 3, Index: 1}
	if got, ok := c.Get(b0, 1); !ok || !bytes.Equal(got, data(b0, 1)) {
		t.Fatal("block 0 lost by a truncation past it")
	}
	if got, ok := c.Get(b1, 1); !ok || !bytes.Equal(got, data(b1, 1)[:100]) {
		t.Fatalf("block 1 not cut to 100 bytes: ok %v len %d", ok, len(got))
	}
	for i := uint64(2); i < 4; i++ {
		if _, ok := c.Get(block.ID{File: 3, Index: i}, 1); ok {
			t.Fatalf("block %d survived truncation", i)
		}
	}
	if d := c.Dirty(); len(d) != 2 {
		t.Fatalf("dirty after truncation: %v", d)
	}
}

func TestStale(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, func(c *Config) { c.Size, c.Banks, c.Assoc = 4*testBS, 1, 4 })
	a := block.ID{File: 1, Index: 0}
	if err := c.PutDirty(a, 1, data(a, 1)); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i < 4; i++ {
		id := block.ID{File: 2, Index: i}
		if err := c.PutDirty(id, 1, data(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MarkStale(1); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(a, 1); ok {
		t.Fatal("a stale file's block was served")
	}
	c.Close()
	c = open(t, dir, func(c *Config) { c.Size, c.Banks, c.Assoc = 4*testBS, 1, 4 })
	defer c.Close()
	if d := c.Dirty(); len(d) != 3 {
		t.Fatalf("a stale file's dirty block is listed for write-back after reopen: %v", d)
	}
	// The set is all dirty, but the stale frame is reused first: no
	// write-back function is needed.
	n := block.ID{File: 3, Index: 0}
	if err := c.PutDirty(n, 1, data(n, 1)); err != nil {
		t.Fatalf("PutDirty did not reuse the stale frame: %v", err)
	}
	if c.stale.len() != 1 {
		t.Fatalf("stale list %d entries", c.stale.len())
	}
	// A file id that comes back is fresh: its old frames are purged.
	c.Remove(block.ID{File: 2, Index: 1}) // room for a clean block
	c.Put(a, 2, data(a, 2))
	if _, ok := c.Get(a, 2); !ok || c.stale.has(1) {
		t.Fatal("a reused file id is still stale")
	}
}

// TestDuplicateTagsResolveBySeq: a crash between writing a block's new copy
// and invalidating its old one leaves two valid tags; reopening keeps the
// copy with the higher sequence number and invalidates the other.
func TestDuplicateTagsResolveBySeq(t *testing.T) {
	for _, newerFirst := range []bool{false, true} {
		dir := t.TempDir()
		c := open(t, dir)
		id := block.ID{File: 4, Index: 2}
		if err := c.PutDirty(id, 1, data(id, 1)); err != nil {
			t.Fatal(err)
		}
		if err := c.PutDirty(id, 2, data(id, 2)); err != nil {
			t.Fatal(err)
		}
		bn, set := c.place(id)
		b := c.banks[bn].b
		cur, _ := b.lookup(id)
		// Resurrect the old copy in another way of the set, with a lower
		// (or, swapped, higher) sequence number.
		other := b.frame(set, 0)
		if other == cur {
			other = b.frame(set, 1)
		}
		old := b.tags[cur]
		old.v, old.seq = 1, old.seq-1
		if newerFirst {
			old.seq += 2
		}
		d1 := data(id, 1)
		old.n, old.dataCRC = uint32(len(d1)), checksum(d1)
		if err := b.writeData(other, d1); err != nil {
			t.Fatal(err)
		}
		var raw [tagSize]byte
		old.encode(raw[:])
		b.f.WriteAt(raw[:], int64(other)*tagSize)
		c.Close()
		c = open(t, dir)
		want := block.Version(2)
		if newerFirst {
			want = 1
		}
		if d := c.Dirty(); len(d) != 1 || d[0].Version != want {
			t.Fatalf("newerFirst=%v: Dirty() = %v; want only v%d", newerFirst, d, want)
		}
		if s := c.Stats(); s.Entries != 1 {
			t.Fatalf("duplicate not invalidated: %+v", s)
		}
		c.Close()
	}
}

// TestNoRoomAtOpen: a cache larger than the free space of its file system
// fails at open with a message, instead of failing block by block later.
func TestNoRoomAtOpen(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	_, err := Open(Config{Dir: filepath.Join(dir, "c"), Size: 4 << 20, BlockSize: testBS, Banks: 2, Assoc: 2})
	if err == nil || !strings.Contains(err.Error(), "not enough free space") {
		t.Fatalf("Open of a 4 MiB cache on a 1 MiB file system = %v; want a no-space error", err)
	}
	t.Log(err)
}

// TestWarningsRateLimited: a disk that fails every write logs one warning
// a second, not one per block.
func TestWarningsRateLimited(t *testing.T) {
	var logged bytes.Buffer
	c := open(t, t.TempDir(), func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logged, nil)) })
	lb := &c.banks[0]
	lb.mu.Lock()
	lb.b.f.Close() // every I/O on this bank now fails
	lb.mu.Unlock()
	n := 0
	for i := uint64(0); n < 50; i++ {
		id := block.ID{File: 1, Index: i}
		if bn, _ := c.place(id); bn == 0 {
			c.Put(id, 1, data(id, 1))
			n++
		}
	}
	if lines := strings.Count(logged.String(), "\n"); lines != 1 {
		t.Fatalf("%d failed Puts logged %d lines; want 1:\n%s", n, lines, logged.String())
	}
	c.Close()
}

// TestOnEvict: the victim of a Put is reported after the bank's lock is
// released (the callback may call the cache); removals are not reported.
func TestOnEvict(t *testing.T) {
	var got []block.ID
	var c *Cache
	c = open(t, t.TempDir(), func(cfg *Config) {
		cfg.Size, cfg.Banks, cfg.Assoc = 2*testBS, 1, 2
		cfg.OnEvict = func(id block.ID, v block.Version) {
			if _, held := c.Peek(id); held {
				t.Errorf("evicted %v still held", id)
			}
			got = append(got, id)
		}
	})
	defer c.Close()
	ids := []block.ID{{File: 1}, {File: 2}, {File: 3}}
	for _, id := range ids {
		c.Put(id, 1, data(id, 1))
	}
	if len(got) != 1 || (got[0] != ids[0] && got[0] != ids[1]) {
		t.Fatalf("OnEvict saw %v; want one of the first two blocks", got)
	}
	c.Remove(ids[2])
	c.RemoveFile(1)
	c.RemoveFile(2)
	if len(got) != 1 {
		t.Fatalf("removals reported as evictions: %v", got)
	}
}

func TestFillKeepsDirtyAndRetag(t *testing.T) {
	c, err := Open(Config{Dir: t.TempDir(), Size: 64 << 10, BlockSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := block.ID{File: 7, Index: 1}
	if err := c.PutDirty(id, 3, []byte("dirty")); err != nil {
		t.Fatal(err)
	}
	c.Fill(id, 3, []byte("fetched"))
	if got, ok := c.Get(id, 3); !ok || string(got) != "dirty" {
		t.Fatalf("after Fill over a dirty copy: %q, %v; want the dirty data", got, ok)
	}
	if n, err := c.Retag(7, 3, 9); err != nil || n != 0 {
		t.Fatalf("Retag moved %d dirty frames (%v); want none", n, err)
	}
	if _, err := c.MarkClean(id, 3); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Retag(7, 3, 9); err != nil || n != 1 {
		t.Fatalf("Retag = %d, %v; want 1", n, err)
	}
	if got, ok := c.Get(id, 9); !ok || string(got) != "dirty" {
		t.Fatalf("after Retag: %q, %v", got, ok)
	}
	c.Fill(id, 10, []byte("new"))
	if got, ok := c.Get(id, 10); !ok || string(got) != "new" {
		t.Fatalf("Fill over a clean copy: %q, %v", got, ok)
	}
}

func TestPutDirtyLazy(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(Config{Dir: dir, Size: 64 << 10, BlockSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	id := block.ID{File: 3, Index: 0}
	for _, s := range []string{"a", "ab", "abc"} {
		if err := c.PutDirtyLazy(id, 1, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	// Over a durable dirty copy: written elsewhere and synced first.
	if err := c.PutDirtyLazy(id, 1, []byte("abcd")); err != nil {
		t.Fatal(err)
	}
	if d := c.Dirty(); len(d) != 1 {
		t.Fatalf("Dirty() = %v; want one block", d)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err = Open(Config{Dir: dir, Size: 64 << 10, BlockSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, ok := c.Get(id, 1); !ok || string(got) != "abcd" {
		t.Fatalf("after reopening: %q, %v; want the last lazy write", got, ok)
	}
	if d := c.Dirty(); len(d) != 1 {
		t.Fatalf("Dirty() after reopening = %v; want one block", d)
	}
}

// TestRelabel: a writer's own write moves the file's clean frames to the
// new version, taking out the ones it changed; the new tags persist over a
// Close, and a crash before (no Close, no Sync) leaves the old version,
// which misses.
func TestRelabel(t *testing.T) {
	for _, crash := range []bool{false, true} {
		dir := t.TempDir()
		c := open(t, dir)
		id := func(i uint64) block.ID { return block.ID{File: 5, Index: i} }
		for i := uint64(0); i < 6; i++ {
			c.Put(id(i), 3, data(id(i), 3))
		}
		c.Put(id(6), 2, data(id(6), 2)) // another version: left alone
		if err := c.PutDirty(block.ID{File: 5, Index: 7}, 3, data(id(7), 3)); err != nil {
			t.Fatal(err)
		}
		taken := c.Relabel(5, 3, 4, func(idx uint64, n int) bool { return idx == 2 || idx == 4 })
		if len(taken) != 2 || taken[0].Index != 2 || taken[1].Index != 4 || !bytes.Equal(taken[1].Data, data(id(4), 3)) {
			t.Fatalf("taken %v", taken)
		}
		for i, want := range map[uint64]bool{0: true, 1: true, 2: false, 3: true, 4: false, 5: true} {
			if _, ok := c.Get(id(i), 4); ok != want {
				t.Fatalf("block %d at the new version: %v, want %v", i, ok, want)
			}
		}
		if v, _ := c.Peek(id(6)); v != 2 {
			t.Fatalf("another version moved: %d", v)
		}
		if v, _ := c.Peek(id(7)); v != 3 {
			t.Fatalf("a dirty frame moved: %d", v)
		}
		if crash {
			if err := c.closeFiles(); err != nil {
				t.Fatal(err)
			}
		} else if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c = open(t, dir)
		got, ok := c.Get(id(0), 4)
		old, okOld := c.Get(id(0), 3)
		if crash && (ok || !okOld || !bytes.Equal(old, data(id(0), 3))) || !crash && (!ok || !bytes.Equal(got, data(id(0), 3))) {
			t.Fatalf("crash %v: new version %v, old version %v", crash, ok, okOld)
		}
		c.Close()
	}
}
