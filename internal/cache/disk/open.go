package disk

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/block"
)

// dirLock is an exclusive flock on the cache directory's lock file: two
// processes never share one cache.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("disk cache: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("disk cache: %s is in use by another process (%w); give each mount its own --disk-cache directory", dir, err)
	}
	return &dirLock{f}, nil
}

func (l *dirLock) unlock() error { return l.f.Close() }

const superMagic = "coopfs-disk-cache 1"

func (g geometry) superblock() string {
	return fmt.Sprintf("%s\nblock_size %d\nbanks %d\nassoc %d\nsets %d\n", superMagic, g.BlockSize, g.Banks, g.Assoc, g.Sets)
}

// parseSuperblock reads what superblock wrote.
func parseSuperblock(s string) (geometry, error) {
	var g geometry
	rest, ok := strings.CutPrefix(s, superMagic+"\n")
	if !ok {
		return g, errors.New("not a coopfs disk cache superblock")
	}
	if _, err := fmt.Sscanf(rest, "block_size %d\nbanks %d\nassoc %d\nsets %d\n", &g.BlockSize, &g.Banks, &g.Assoc, &g.Sets); err != nil {
		return g, fmt.Errorf("corrupt superblock: %w", err)
	}
	if g.BlockSize <= 0 || g.Banks <= 0 || g.Assoc < 2 || g.Sets <= 0 || g.Sets > 1<<30 || g.Banks > 1<<20 {
		return g, errors.New("corrupt superblock: geometry out of range")
	}
	return g, nil
}

// Open opens the cache in cfg.Dir, creating it if needed, and rebuilds its
// index from the bank files' tags. A directory made with another geometry
// starts afresh when it holds no dirty block, and is an error otherwise.
func Open(cfg Config) (*Cache, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	g, err := cfg.geometry()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("disk cache: %w", err)
	}
	lk, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cache{cfg: cfg, g: g, log: cfg.Logger, dir: lk, banks: make([]lockedBank, g.Banks)}
	if err := c.open(); err != nil {
		c.closeFiles()
		return nil, err
	}
	return c, nil
}

func (c *Cache) open() error {
	if err := c.checkSuperblock(); err != nil {
		return err
	}
	seed := c.cfg.Seed
	if seed == 0 {
		seed = uint64(os.Getpid())<<32 ^ uint64(len(c.cfg.Dir))
	}
	var maxSeq uint64
	for i := range c.banks {
		b, err := c.openBank(i, newRand(seed, i))
		if err != nil {
			return err
		}
		c.banks[i].b = b
		for _, t := range b.tags {
			maxSeq = max(maxSeq, t.seq)
		}
	}
	c.seq.Store(maxSeq)
	st, err := openStale(c.cfg.Dir)
	if err != nil {
		return err
	}
	c.stale = st
	return st.compact(c.cfg.Dir, c.holdsFile)
}

func (c *Cache) holdsFile(file uint64) bool {
	for i := range c.banks {
		if len(c.banks[i].b.files[file]) > 0 {
			return true
		}
	}
	return false
}

func (c *Cache) checkSuperblock() error {
	path := filepath.Join(c.cfg.Dir, "superblock")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := writeFileSync(path, []byte(c.g.superblock())); err != nil {
			return fmt.Errorf("disk cache: write superblock: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("disk cache: read superblock: %w", err)
	}
	old, err := parseSuperblock(string(b))
	if err != nil {
		return fmt.Errorf("disk cache: %s: %w; remove the directory to start afresh", path, err)
	}
	if old == c.g {
		return nil
	}
	return c.reformat(old)
}

// reformat starts the directory afresh with the new geometry when the old
// cache holds no dirty block (nothing is lost but clean copies); a cache
// with dirty blocks is refused, since they must be written back first.
func (c *Cache) reformat(old geometry) error {
	dirty, err := countDirty(c.cfg.Dir, old)
	if err != nil {
		return err
	}
	if dirty > 0 {
		return fmt.Errorf("disk cache: %s holds a cache of %d banks × %d sets × %d ways of %v blocks with %d dirty blocks, not the %d × %d × %d of %v asked for; use the same sizes until it is flushed",
			c.cfg.Dir, old.Banks, old.Sets, old.Assoc, block.Size(old.BlockSize), dirty, c.g.Banks, c.g.Sets, c.g.Assoc, block.Size(c.g.BlockSize))
	}
	c.log.Info("disk cache: the sizes changed and no block is dirty: starting afresh", "dir", c.cfg.Dir,
		"old_banks", old.Banks, "old_sets", old.Sets, "old_assoc", old.Assoc, "old_block_size", old.BlockSize)
	banks, _ := filepath.Glob(filepath.Join(c.cfg.Dir, "bank-*"))
	for _, p := range append(banks, filepath.Join(c.cfg.Dir, "stale")) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disk cache: start afresh: %w", err)
		}
	}
	if err := writeFileSync(filepath.Join(c.cfg.Dir, "superblock"), []byte(c.g.superblock())); err != nil {
		return fmt.Errorf("disk cache: write superblock: %w", err)
	}
	return nil
}

// countDirty counts the dirty frames of files not on the stale list in a
// cache directory of geometry g.
func countDirty(dir string, g geometry) (int, error) {
	st, err := openStale(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	area := make([]byte, g.framesPerBank()*tagSize)
	for i := range g.Banks {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("bank-%04d", i)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("disk cache: %w", err)
		}
		clear(area)
		_, err = f.ReadAt(area, 0)
		f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("disk cache: read tags: %w", err)
		}
		for fr := range g.framesPerBank() {
			if t, ok := decodeTag(area[fr*tagSize:], g.BlockSize); ok && t.state == stateDirty && !st.files[t.id.File] {
				n++
			}
		}
	}
	return n, nil
}

// openBank opens (or creates) bank file i and rebuilds its index. Two valid
// tags of one block (a crash between writing a new copy and dropping the
// old) resolve to the higher sequence number.
func (c *Cache) openBank(i int, rng *rand.Rand) (*bank, error) {
	path := filepath.Join(c.cfg.Dir, fmt.Sprintf("bank-%04d", i))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("disk cache: %w", err)
	}
	b := &bank{num: i, f: f, g: c.g, tags: make([]tag, c.g.framesPerBank()), files: map[uint64]map[uint64]int32{}, acct: &c.acct, rng: rng, unsynced: map[int]struct{}{}, untagged: map[int]struct{}{}}
	if fi, err := f.Stat(); err != nil {
		return b, fmt.Errorf("disk cache: %w", err)
	} else if fi.Size() < c.g.bankSize() {
		if err := allocate(f, c.g.bankSize()); err != nil {
			return b, fmt.Errorf("disk cache: size bank file %s: %w", path, err)
		}
	}
	area := make([]byte, c.g.framesPerBank()*tagSize)
	if _, err := f.ReadAt(area, 0); err != nil && !errors.Is(err, io.EOF) {
		return b, fmt.Errorf("disk cache: read tags of %s: %w", path, err)
	}
	for fr := range b.tags {
		t, ok := decodeTag(area[fr*tagSize:], c.g.BlockSize)
		if !ok {
			continue
		}
		if prev, dup := b.lookup(t.id); dup {
			loser := fr
			if t.seq > b.tags[prev].seq {
				loser = prev
				b.setMem(prev, tag{})
				b.setMem(fr, t)
			}
			if err := b.setTag(loser, tag{}); err != nil {
				return b, err
			}
			continue
		}
		b.setMem(fr, t)
	}
	return b, nil
}

// allocate reserves a bank file's blocks up front (fallocate), so a cache
// that does not fit its disk fails at open rather than block by block
// later; where fallocate is not supported the file is sized sparsely.
func allocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOSPC):
		return fmt.Errorf("not enough free space for the cache (%w); give a smaller --disk-cache-size or free some space", err)
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		return f.Truncate(size)
	}
	return err
}

// Close syncs the bank files and releases the directory. The Cache must
// not be used afterwards.
func (c *Cache) Close() error {
	var errs []error
	for i := range c.banks {
		lb := &c.banks[i]
		lb.mu.Lock()
		if lb.b != nil && lb.b.f != nil {
			errs = append(errs, lb.b.saveTags(), lb.b.sync())
		}
		lb.mu.Unlock()
	}
	errs = append(errs, c.closeFiles())
	return errors.Join(errs...)
}

func (c *Cache) closeFiles() error {
	var errs []error
	for i := range c.banks {
		lb := &c.banks[i]
		lb.mu.Lock()
		if lb.b != nil && lb.b.f != nil {
			errs = append(errs, lb.b.f.Close())
			lb.b.f = nil
		}
		lb.mu.Unlock()
	}
	if c.stale != nil {
		errs = append(errs, c.stale.close())
	}
	if c.dir != nil {
		errs = append(errs, c.dir.unlock())
		c.dir = nil
	}
	return errors.Join(errs...)
}
