package disk

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
)

// FullError is returned by PutDirty when every frame of the block's set is
// dirty and none could be written back (no WriteBack configured, or it
// failed): the ENOSPC of a write-back cache. errors.Is(err, syscall.ENOSPC)
// holds.
type FullError struct {
	ID  block.ID
	Err error // the last write-back error, if any
}

func (e *FullError) Error() string {
	msg := fmt.Sprintf("disk cache full: every frame of block %v's set is dirty", e.ID)
	if e.Err != nil {
		return fmt.Sprintf("%s and writing one back failed: %v; flush the cache or give a larger --disk-cache-size", msg, e.Err)
	}
	return msg + "; flush the cache or give a larger --disk-cache-size"
}

// Unwrap lets errors.Is match syscall.ENOSPC and the write-back error.
func (e *FullError) Unwrap() []error { return []error{syscall.ENOSPC, e.Err} }

// ErrTooBig is returned by PutDirty for data longer than a block.
var ErrTooBig = errors.New("disk cache: data longer than a block")

// accounting is the cache-wide count of valid frames and their bytes.
type accounting struct{ entries, bytes atomic.Int64 }

func (a *accounting) add(n, bytes int64) { a.entries.Add(n); a.bytes.Add(bytes) }

// Cache is a persistent set-associative block cache on disk, safe for
// concurrent use. It implements cache.Tier (clean blocks) and adds dirty
// blocks, truncation, the stale list and write-back.
type Cache struct {
	cfg   Config
	g     geometry
	log   *slog.Logger
	dir   *dirLock
	banks []lockedBank
	stale *staleList
	seq   atomic.Uint64
	acct  accounting

	hits, misses, evictions atomic.Uint64

	// warnings are rate-limited: a failing disk must not flood the log.
	lastWarn   atomic.Int64 // unix nanoseconds of the last warning logged
	suppressed atomic.Uint64
}

// warn logs a warning, at most one a second; the next one logged says how
// many were left out.
func (c *Cache) warn(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := c.lastWarn.Load()
	if now-last < int64(time.Second) || !c.lastWarn.CompareAndSwap(last, now) {
		c.suppressed.Add(1)
		return
	}
	if n := c.suppressed.Swap(0); n > 0 {
		args = append(args, "warnings_suppressed", n)
	}
	c.log.Warn(msg, args...)
}

type lockedBank struct {
	mu sync.Mutex
	b  *bank
}

var _ cache.Tier = (*Cache)(nil)

// DirtyBlock names a dirty frame.
type DirtyBlock struct {
	ID      block.ID
	Version block.Version
}

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// place returns the bank and set of block id: runs of Sets consecutive
// blocks share a bank and fill consecutive sets.
func (c *Cache) place(id block.ID) (bank, set int) {
	s := uint64(c.g.Sets)
	h := mix(id.File*0x9E3779B97F4A7C15 ^ mix(id.Index/s+1))
	return int(h % uint64(c.g.Banks)), int((id.Index%s + (h>>32)%s) % s)
}

func (c *Cache) lock(id block.ID) (*lockedBank, int) {
	bn, set := c.place(id)
	lb := &c.banks[bn]
	lb.mu.Lock()
	return lb, set
}

func (c *Cache) isStale(file uint64) bool { return c.stale.has(file) }

// Capacity returns the bytes the frames hold at most.
func (c *Cache) Capacity() int64 { return c.g.capacity() }

// BlockSize returns the frame data length.
func (c *Cache) BlockSize() int { return c.g.BlockSize }

// Get returns block id if it is held, clean or dirty, at exactly version v
// and its data matches its checksum. A corrupt frame is invalidated.
func (c *Cache) Get(id block.ID, v block.Version) ([]byte, bool) {
	return c.GetInto(id, v, nil)
}

// GetInto is Get reading into buf when it is large enough (a pooled reply
// buffer), sparing an allocation per block.
//
// The frame is read and checksummed outside the bank's lock, so readers of
// one bank (a file's consecutive blocks) run in parallel; the frame's tag
// is checked again afterwards, under the lock: if any write touched the
// frame meanwhile (every write changes the tag), the read is a miss. A
// checksum mismatch with the tag unchanged invalidates the frame.
func (c *Cache) GetInto(id block.ID, v block.Version, buf []byte) ([]byte, bool) {
	lb, _ := c.lock(id)
	b := lb.b
	fr, ok := b.lookup(id)
	if !ok || b.tags[fr].v != v || c.isStale(id.File) {
		lb.mu.Unlock()
		c.misses.Add(1)
		return nil, false
	}
	t, f, off := b.tags[fr], b.f, b.g.frameOff(fr)
	lb.mu.Unlock()
	data, err := readFrame(f, off, t.n, buf)
	if err == nil {
		err = b.verify(fr, t, data)
	}
	lb.mu.Lock()
	same := b.tags[fr] == t
	if err != nil && same {
		c.warn("disk cache: dropping unreadable frame", "block", id, "err", err)
		c.invalidate(b, fr)
	}
	lb.mu.Unlock()
	if err != nil || !same {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return data, true
}

// invalidate drops frame fr, syncing if it was dirty; errors are logged.
func (c *Cache) invalidate(b *bank, fr int) {
	dirty := b.tags[fr].state == stateDirty
	err := b.setTag(fr, tag{})
	if err == nil && dirty {
		err = b.sync()
	}
	if err != nil {
		b.setMem(fr, tag{}) // never serve it again, even if the tag write failed
		c.warn("disk cache: invalidating a frame", "bank", b.num, "frame", fr, "err", err)
	}
}

// Peek returns the version held for id (clean or dirty) without reading
// the data or touching the counters; a stale file's blocks are not held.
func (c *Cache) Peek(id block.ID) (block.Version, bool) {
	lb, _ := c.lock(id)
	defer lb.mu.Unlock()
	fr, ok := lb.b.lookup(id)
	if !ok || c.isStale(id.File) {
		return 0, false
	}
	return lb.b.tags[fr].v, true
}

// Put stores data as a clean copy of block id at version v, replacing any
// copy held. Data longer than a block is not stored (and any older copy is
// dropped). Errors are logged; the block is then simply not cached.
func (c *Cache) Put(id block.ID, v block.Version, data []byte) {
	if err := c.put(id, v, data, stateClean); err != nil && !errors.Is(err, ErrTooBig) {
		c.warn("disk cache: storing a block failed", "block", id, "err", err)
	}
}

// Fill is Put for a block fetched from the origin: it never replaces a
// dirty copy of the block (a fetch that raced a write-back write), which
// leaves only by write-back, Remove, RemoveFile, Truncate or the stale list.
func (c *Cache) Fill(id block.ID, v block.Version, data []byte) {
	if err := c.put(id, v, data, stateFill); err != nil && !errors.Is(err, ErrTooBig) {
		c.warn("disk cache: storing a block failed", "block", id, "err", err)
	}
}

// PutDirtyLazy is PutDirty without the sync: the block is durable after the
// next Sync. Until then a lazy write of the same block overwrites it in
// place; a dirty copy that is already durable is never overwritten before
// its successor is (PutDirtyLazy then syncs like PutDirty).
func (c *Cache) PutDirtyLazy(id block.ID, v block.Version, data []byte) error {
	return c.put(id, v, data, stateDirtyLazy)
}

// Sync makes every dirty block stored so far durable (fdatasync of the
// banks that PutDirtyLazy wrote to since their last sync), and writes the
// tags Relabel changed.
func (c *Cache) Sync() error {
	var errs []error
	for i := range c.banks {
		lb := &c.banks[i]
		lb.mu.Lock()
		if len(lb.b.untagged) > 0 {
			errs = append(errs, lb.b.saveTags())
		}
		if len(lb.b.unsynced) > 0 {
			errs = append(errs, lb.b.sync())
		}
		lb.mu.Unlock()
	}
	return errors.Join(errs...)
}

// PutDirty stores data as a dirty copy of block id at version v: a block
// that must be written back. It is durable when PutDirty returns nil.
// A set full of dirty frames that cannot be written back gives *FullError.
func (c *Cache) PutDirty(id block.ID, v block.Version, data []byte) error {
	return c.put(id, v, data, stateDirty)
}

func (c *Cache) put(id block.ID, v block.Version, data []byte, state uint8) error {
	if c.isStale(id.File) {
		// The file id is back (reused): its old frames must not resurface.
		if err := c.purgeFile(id.File); err != nil {
			return err
		}
	}
	var crc uint32
	if len(data) <= c.g.BlockSize {
		crc = checksum(data) // before locking: readers of the bank need not wait for it
	}
	lb, set := c.lock(id)
	ev, err := c.putLocked(lb.b, set, id, v, data, crc, state)
	lb.mu.Unlock()
	if ev != nil && c.cfg.OnEvict != nil {
		c.cfg.OnEvict(ev.ID, ev.Version)
	}
	return err
}

// putLocked is put with the block's bank locked; it returns the block it
// evicted, if any.
func (c *Cache) putLocked(b *bank, set int, id block.ID, v block.Version, data []byte, crc uint32, state uint8) (*DirtyBlock, error) {
	var ev *DirtyBlock
	old, hasOld := b.lookup(id)
	if len(data) > c.g.BlockSize {
		if hasOld {
			ev = &DirtyBlock{id, b.tags[old].v}
			c.invalidate(b, old)
			c.evictions.Add(1)
		}
		return ev, fmt.Errorf("%w: %d bytes, block size %d", ErrTooBig, len(data), c.g.BlockSize)
	}
	oldDirty := hasOld && b.tags[old].state == stateDirty
	if oldDirty && state == stateFill {
		return nil, nil
	}
	lazy := state == stateDirtyLazy
	if lazy {
		state = stateDirty
	}
	_, oldUnsynced := b.unsynced[old]
	inPlace := lazy && oldDirty && oldUnsynced
	if oldDirty && !inPlace {
		lazy = false // the old copy is durable: the new one must be before it goes
	}
	fr, skip := old, -1
	if hasOld {
		skip = old
	}
	if !inPlace && (!hasOld || oldDirty) {
		var err error
		if fr, err = c.makeRoom(b, id, set, skip); err != nil {
			if state == stateDirty || !hasOld {
				return nil, err
			}
			fr = old // a clean copy over a dirty one: in place, synced below
		}
	}
	if t := b.tags[fr]; t.state != stateInvalid && t.id != id {
		c.evictions.Add(1)
		if !c.isStale(t.id.File) {
			ev = &DirtyBlock{t.id, t.v}
		}
	}
	t := tag{state: state, id: id, v: v, seq: c.seq.Add(1), n: uint32(len(data)), dataCRC: crc}
	if t.state == stateFill {
		t.state = stateClean
	}
	if err := c.writeFrame(b, fr, t, data, !lazy && (state == stateDirty || oldDirty)); err != nil {
		return ev, err
	}
	if lazy {
		b.unsynced[fr] = struct{}{}
	}
	if hasOld && old != fr {
		// The new copy is durable if the old one was dirty: dropping the old
		// one needs no sync (if both survive a crash, the higher seq wins).
		if err := b.setTag(old, tag{}); err != nil {
			b.setMem(old, tag{})
			c.warn("disk cache: invalidating a superseded frame", "block", id, "err", err)
		}
	}
	return ev, nil
}

// writeFrame writes data and then tag t into frame fr, syncing if asked.
// On failure the frame is left invalid.
func (c *Cache) writeFrame(b *bank, fr int, t tag, data []byte, sync bool) error {
	err := b.writeData(fr, data)
	if err == nil {
		err = b.setTag(fr, t)
	}
	if err == nil && sync {
		err = b.sync()
	}
	if err != nil {
		b.setMem(fr, tag{})
		_ = b.setTag(fr, tag{}) // best effort: the data checksum guards the rest
	}
	return err
}

// makeRoom picks the frame of set s (other than skip) that a new block
// takes: an invalid or stale one, else a random clean one, else a random
// dirty one once it has been written back.
func (c *Cache) makeRoom(b *bank, id block.ID, s, skip int) (int, error) {
	free, clean, dirty := b.candidates(s, skip, c.isStale)
	if free >= 0 {
		return free, nil
	}
	if len(clean) > 0 {
		return clean[b.rng.IntN(len(clean))], nil
	}
	if c.cfg.WriteBack == nil {
		return -1, &FullError{ID: id}
	}
	var last error
	b.rng.Shuffle(len(dirty), func(i, j int) { dirty[i], dirty[j] = dirty[j], dirty[i] })
	for _, fr := range dirty {
		t := b.tags[fr]
		data, err := b.readData(fr, nil)
		if errors.Is(err, errCorrupt) {
			c.warn("disk cache: a dirty frame is corrupt; its data is lost", "block", t.id, "err", err)
			return fr, nil
		}
		if err == nil {
			err = c.cfg.WriteBack(t.id, t.v, data)
		}
		if err == nil {
			return fr, nil
		}
		last = err
	}
	return -1, &FullError{ID: id, Err: last}
}

// Remove drops block id (any version), durably if it was dirty.
func (c *Cache) Remove(id block.ID) {
	lb, _ := c.lock(id)
	defer lb.mu.Unlock()
	if fr, ok := lb.b.lookup(id); ok {
		c.invalidate(lb.b, fr)
	}
}

// RemoveFile drops every block of file, durably, and takes file off the
// stale list. It costs O(banks + blocks of the file).
func (c *Cache) RemoveFile(file uint64) {
	if err := c.purgeFile(file); err != nil {
		c.warn("disk cache: removing a file's blocks", "file", file, "err", err)
	}
}

func (c *Cache) purgeFile(file uint64) error {
	var errs []error
	for i := range c.banks {
		errs = append(errs, c.trimBank(&c.banks[i], file, 0))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.stale.set(file, false)
}

// Truncate drops the blocks of file that lie wholly at or past size and
// shortens the one that straddles it; durable for dirty frames.
func (c *Cache) Truncate(file uint64, size int64) error {
	var errs []error
	for i := range c.banks {
		errs = append(errs, c.trimBank(&c.banks[i], file, size))
	}
	return errors.Join(errs...)
}

func (c *Cache) trimBank(lb *lockedBank, file uint64, size int64) error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	b := lb.b
	bs := int64(c.g.BlockSize)
	var dirty bool
	var errs []error
	for idx, fr := range b.files[file] {
		t := b.tags[fr]
		start := int64(idx) * bs
		if start+int64(t.n) <= size {
			continue
		}
		dirty = dirty || t.state == stateDirty
		if start >= size {
			if err := b.setTag(int(fr), tag{}); err != nil {
				b.setMem(int(fr), tag{})
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, c.shorten(b, int(fr), int(size-start)))
	}
	if dirty {
		errs = append(errs, b.sync())
	}
	return errors.Join(errs...)
}

// shorten cuts frame fr's data to n bytes by rewriting its tag.
func (c *Cache) shorten(b *bank, fr, n int) error {
	data, err := b.readData(fr, nil)
	if err != nil {
		b.setMem(fr, tag{})
		return errors.Join(err, b.setTag(fr, tag{}))
	}
	t := b.tags[fr]
	t.n, t.dataCRC, t.seq = uint32(n), checksum(data[:n]), c.seq.Add(1)
	return b.setTag(fr, t)
}

// MarkStale puts file on the stale list (it was removed or renamed over):
// its blocks miss, its dirty frames are never written back, and its frames
// are the first reused. Durable when it returns nil.
func (c *Cache) MarkStale(file uint64) error { return c.stale.set(file, true) }

// Dirty lists the dirty frames of files not on the stale list.
func (c *Cache) Dirty() []DirtyBlock {
	var out []DirtyBlock
	for i := range c.banks {
		lb := &c.banks[i]
		lb.mu.Lock()
		for _, t := range lb.b.tags {
			if t.state == stateDirty && !c.isStale(t.id.File) {
				out = append(out, DirtyBlock{t.id, t.v})
			}
		}
		lb.mu.Unlock()
	}
	return out
}

// MarkClean turns the dirty copy of id at version v clean (after the caller
// wrote it back); it reports whether there was such a copy. The change need
// not be synced: a crash before it lands writes the block back again.
func (c *Cache) MarkClean(id block.ID, v block.Version) (bool, error) {
	lb, _ := c.lock(id)
	defer lb.mu.Unlock()
	fr, ok := lb.b.lookup(id)
	if !ok || lb.b.tags[fr].v != v || lb.b.tags[fr].state != stateDirty {
		return false, nil
	}
	t := lb.b.tags[fr]
	t.state = stateClean
	return true, lb.b.setTag(fr, t)
}

// WriteBackAll writes every dirty frame of a non-stale file back through
// Config.WriteBack and marks it clean; it returns how many it wrote. A
// corrupt dirty frame is dropped with a warning.
func (c *Cache) WriteBackAll() (int, error) {
	if c.cfg.WriteBack == nil {
		return 0, errors.New("disk cache: no write-back function configured")
	}
	n := 0
	for _, d := range c.Dirty() {
		ok, err := c.writeBackOne(d)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

func (c *Cache) writeBackOne(d DirtyBlock) (bool, error) {
	lb, _ := c.lock(d.ID)
	defer lb.mu.Unlock()
	b := lb.b
	fr, ok := b.lookup(d.ID)
	if !ok || b.tags[fr].state != stateDirty || b.tags[fr].v != d.Version || c.isStale(d.ID.File) {
		return false, nil
	}
	data, err := b.readData(fr, nil)
	if err != nil {
		c.warn("disk cache: dropping an unreadable dirty frame", "block", d.ID, "err", err)
		c.invalidate(b, fr)
		return false, nil
	}
	if err := c.cfg.WriteBack(d.ID, d.Version, data); err != nil {
		return false, fmt.Errorf("disk cache: write back block %v: %w", d.ID, err)
	}
	t := b.tags[fr]
	t.state = stateClean
	return true, b.setTag(fr, t)
}

// Retag moves the clean frames of file at version from to version to: the
// file's blocks written back are the server's new version, which need not
// be fetched again. Dirty frames are left alone. It returns how many frames
// it moved; the change is not synced (a crash leaves frames of the old
// version, which simply miss).
func (c *Cache) Retag(file uint64, from, to block.Version) (int, error) {
	n := 0
	var errs []error
	for i := range c.banks {
		lb := &c.banks[i]
		lb.mu.Lock()
		b := lb.b
		for _, fr := range b.files[file] {
			t := b.tags[fr]
			if t.state != stateClean || t.v != from {
				continue
			}
			t.v, t.seq = to, c.seq.Add(1)
			if err := b.setTag(int(fr), t); err != nil {
				b.setMem(int(fr), tag{})
				errs = append(errs, err)
				continue
			}
			n++
		}
		lb.mu.Unlock()
	}
	return n, errors.Join(errs...)
}

// Stats returns a snapshot of the cache's size and counters. Entries and
// Bytes count every valid frame, stale ones included.
func (c *Cache) Stats() cache.Stats {
	return cache.Stats{
		Entries:   int(c.acct.entries.Load()),
		Bytes:     c.acct.bytes.Load(),
		Capacity:  c.g.capacity(),
		Hits:      c.hits.Load(),
		Misses:    c.misses.Load(),
		Evictions: c.evictions.Load(),
	}
}

func newRand(seed uint64, bank int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(bank)))
}
