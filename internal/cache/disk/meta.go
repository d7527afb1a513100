package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// MetaStore is the persistent cache of attributes and lookups (seed 003:
// they are cached on disk too), so that a restarted client revalidates
// what it knew instead of walking the tree again. Attributes are opaque
// bytes keyed by file id; a lookup maps (directory id, name) to a file id.
// Safe for concurrent use.
//
// It is an append-only log replayed at open; a torn tail (a crash
// mid-append) is cut off. Appends are not synced: this is a cache whose
// entries the client revalidates, so losing the last few costs a refetch.
// When most of the log is superseded records it is rewritten (temporary
// file, fsync, rename).
type MetaStore struct {
	mu      sync.Mutex
	path    string
	f       *os.File
	attrs   map[uint64][]byte
	lookups map[lookupKey]uint64
	records int // records in the log
}

type lookupKey struct {
	dir  uint64
	name string
}

// Record kinds.
const (
	metaSetAttr   = 1 // file u64, attr
	metaDelAttr   = 2 // file u64
	metaSetLookup = 3 // dir u64, child u64, name
	metaDelLookup = 4 // dir u64, name
)

// Limits on what one record carries.
const (
	MaxAttrLen = 4 << 20 // a record may hold a directory's listing
	MaxNameLen = 4096
	metaHdr    = 9 // crc u32 | payload length u32 | kind u8
)

// ErrMetaTooBig is returned for an attribute or name over the limits.
var ErrMetaTooBig = errors.New("disk cache: metadata record too big")

// OpenMeta opens (or creates) the store in file path, replaying its log.
// The file is locked: one process at a time.
func OpenMeta(path string) (*MetaStore, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("disk cache: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("disk cache: open metadata store: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("disk cache: %s is in use by another process (%w)", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("disk cache: read metadata store: %w", err)
	}
	m := &MetaStore{path: path, f: f, attrs: map[uint64][]byte{}, lookups: map[lookupKey]uint64{}}
	valid := m.replay(b)
	if err := f.Truncate(int64(valid)); err != nil {
		f.Close()
		return nil, fmt.Errorf("disk cache: cut the metadata store's torn tail: %w", err)
	}
	if _, err := f.Seek(int64(valid), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("disk cache: %w", err)
	}
	return m, nil
}

// replay applies the log's records up to the first torn or corrupt one and
// returns the length of that valid prefix.
func (m *MetaStore) replay(b []byte) int {
	off := 0
	for off+metaHdr <= len(b) {
		n := int(binary.LittleEndian.Uint32(b[off+4:]))
		if n > len(b)-off-metaHdr || n > MaxAttrLen+MaxNameLen+16 {
			break
		}
		rec := b[off+4 : off+metaHdr+n]
		if binary.LittleEndian.Uint32(b[off:]) != checksum(rec) || !m.apply(rec[4], rec[5:]) {
			break
		}
		m.records++
		off += metaHdr + n
	}
	return off
}

// apply applies one record's payload; it reports whether it was well formed.
func (m *MetaStore) apply(kind byte, p []byte) bool {
	switch {
	case kind == metaSetAttr && len(p) >= 8 && len(p) <= 8+MaxAttrLen:
		m.attrs[binary.LittleEndian.Uint64(p)] = append([]byte(nil), p[8:]...)
	case kind == metaDelAttr && len(p) == 8:
		delete(m.attrs, binary.LittleEndian.Uint64(p))
	case kind == metaSetLookup && len(p) >= 16 && len(p) <= 16+MaxNameLen:
		m.lookups[lookupKey{binary.LittleEndian.Uint64(p), string(p[16:])}] = binary.LittleEndian.Uint64(p[8:])
	case kind == metaDelLookup && len(p) >= 8 && len(p) <= 8+MaxNameLen:
		delete(m.lookups, lookupKey{binary.LittleEndian.Uint64(p), string(p[8:])})
	default:
		return false
	}
	return true
}

func encodeMeta(kind byte, payload ...[]byte) []byte {
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	b := make([]byte, metaHdr, metaHdr+n)
	binary.LittleEndian.PutUint32(b[4:], uint32(n))
	b[8] = kind
	for _, p := range payload {
		b = append(b, p...)
	}
	binary.LittleEndian.PutUint32(b, checksum(b[4:]))
	return b
}

func u64(x uint64) []byte { return binary.LittleEndian.AppendUint64(nil, x) }

// log applies a record and appends it, compacting when most of the log is
// superseded. Called with mu held.
func (m *MetaStore) log(rec []byte) error {
	if m.f == nil {
		return os.ErrClosed
	}
	m.apply(rec[8], rec[metaHdr:])
	if _, err := m.f.Write(rec); err != nil {
		return fmt.Errorf("disk cache: append to metadata store: %w", err)
	}
	m.records++
	if live := len(m.attrs) + len(m.lookups); m.records > 1024 && m.records > 2*live {
		return m.compact()
	}
	return nil
}

// compact rewrites the log with one record per live entry.
func (m *MetaStore) compact() error {
	var buf []byte
	for f, a := range m.attrs {
		buf = append(buf, encodeMeta(metaSetAttr, u64(f), a)...)
	}
	for k, child := range m.lookups {
		buf = append(buf, encodeMeta(metaSetLookup, u64(k.dir), u64(child), []byte(k.name))...)
	}
	if err := writeFileSync(m.path, buf); err != nil {
		return fmt.Errorf("disk cache: compact metadata store: %w", err)
	}
	f, err := os.OpenFile(m.path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("disk cache: reopen metadata store: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("disk cache: lock metadata store: %w", err)
	}
	m.f.Close()
	m.f, m.records = f, len(m.attrs)+len(m.lookups)
	return nil
}

// SetAttr stores file's attributes (opaque bytes, at most MaxAttrLen).
func (m *MetaStore) SetAttr(file uint64, attr []byte) error {
	if len(attr) > MaxAttrLen {
		return fmt.Errorf("%w: %d bytes of attributes", ErrMetaTooBig, len(attr))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.log(encodeMeta(metaSetAttr, u64(file), attr))
}

// Attr returns a copy of file's stored attributes.
func (m *MetaStore) Attr(file uint64) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.attrs[file]
	return append([]byte(nil), a...), ok
}

// DeleteAttr forgets file's attributes.
func (m *MetaStore) DeleteAttr(file uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.attrs[file]; !ok {
		return nil
	}
	return m.log(encodeMeta(metaDelAttr, u64(file)))
}

// SetLookup records that name in directory dir is file child.
func (m *MetaStore) SetLookup(dir uint64, name string, child uint64) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: a %d-byte name", ErrMetaTooBig, len(name))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.lookups[lookupKey{dir, name}]; ok && c == child {
		return nil
	}
	return m.log(encodeMeta(metaSetLookup, u64(dir), u64(child), []byte(name)))
}

// Lookup returns the file id recorded for name in directory dir.
func (m *MetaStore) Lookup(dir uint64, name string) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.lookups[lookupKey{dir, name}]
	return c, ok
}

// DeleteLookup forgets name in directory dir.
func (m *MetaStore) DeleteLookup(dir uint64, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.lookups[lookupKey{dir, name}]; !ok {
		return nil
	}
	return m.log(encodeMeta(metaDelLookup, u64(dir), []byte(name)))
}

// Sync makes every record appended so far durable.
func (m *MetaStore) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f == nil {
		return os.ErrClosed
	}
	return m.f.Sync()
}

// Attrs returns a copy of every stored attribute, by file.
func (m *MetaStore) Attrs() map[uint64][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[uint64][]byte, len(m.attrs))
	for f, a := range m.attrs {
		out[f] = append([]byte(nil), a...)
	}
	return out
}

// Len returns how many attributes and lookups the store holds.
func (m *MetaStore) Len() (attrs, lookups int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.attrs), len(m.lookups)
}

// Close syncs and closes the store.
func (m *MetaStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f == nil {
		return nil
	}
	err := errors.Join(m.f.Sync(), m.f.Close())
	m.f = nil
	return err
}
