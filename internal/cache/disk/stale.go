package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// staleList is the persistent set of stale files (removed or renamed over):
// an append-only journal of 16-byte records, each fsync'd before the call
// that made it returns.
//
//	0 op u8 (1 add, 2 drop) | 1 pad | 4 crc u32 of [8:16] and op | 8 file u64
type staleList struct {
	mu    sync.RWMutex
	f     *os.File
	files map[uint64]bool
}

const (
	staleRecSize = 16
	staleAdd     = 1
	staleDrop    = 2
)

func encodeStale(b []byte, op uint8, file uint64) {
	clear(b[:staleRecSize])
	b[0] = op
	binary.LittleEndian.PutUint64(b[8:], file)
	binary.LittleEndian.PutUint32(b[4:], staleCRC(b))
}

func staleCRC(b []byte) uint32 { return checksum(append([]byte{b[0]}, b[8:16]...)) }

// decodeStale replays a journal; it stops at the first torn or corrupt
// record (a crash mid-append) and returns the valid prefix's length.
func decodeStale(b []byte) (files map[uint64]bool, valid int) {
	files = map[uint64]bool{}
	for valid+staleRecSize <= len(b) {
		r := b[valid : valid+staleRecSize]
		if binary.LittleEndian.Uint32(r[4:]) != staleCRC(r) || (r[0] != staleAdd && r[0] != staleDrop) {
			break
		}
		file := binary.LittleEndian.Uint64(r[8:])
		if r[0] == staleAdd {
			files[file] = true
		} else {
			delete(files, file)
		}
		valid += staleRecSize
	}
	return files, valid
}

// openStale replays dir/stale; compact must be called before set.
func openStale(dir string) (*staleList, error) {
	b, err := os.ReadFile(filepath.Join(dir, "stale"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("disk cache: read stale list: %w", err)
	}
	files, _ := decodeStale(b)
	return &staleList{files: files}, nil
}

// compact drops the files keep rejects and rewrites the journal.
func (s *staleList) compact(dir string, keep func(file uint64) bool) error {
	s.mu.Lock()
	for f := range s.files {
		if !keep(f) {
			delete(s.files, f)
		}
	}
	s.mu.Unlock()
	return s.rewrite(dir)
}

// rewrite writes the journal afresh (temp file, fsync, rename, fsync dir).
func (s *staleList) rewrite(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := make([]byte, 0, len(s.files)*staleRecSize)
	var rec [staleRecSize]byte
	for f := range s.files {
		encodeStale(rec[:], staleAdd, f)
		buf = append(buf, rec[:]...)
	}
	path := filepath.Join(dir, "stale")
	if err := writeFileSync(path, buf); err != nil {
		return fmt.Errorf("disk cache: write stale list: %w", err)
	}
	if s.f != nil {
		s.f.Close()
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("disk cache: open stale list: %w", err)
	}
	s.f = f
	return nil
}

func (s *staleList) has(file uint64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.files[file]
}

func (s *staleList) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.files)
}

// set records file as stale (add) or not (drop), durably.
func (s *staleList) set(file uint64, stale bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files[file] == stale {
		return nil
	}
	op := uint8(staleDrop)
	if stale {
		op = staleAdd
	}
	var rec [staleRecSize]byte
	encodeStale(rec[:], op, file)
	if _, err := s.f.Write(rec[:]); err != nil {
		return fmt.Errorf("disk cache: append to stale list: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("disk cache: sync stale list: %w", err)
	}
	if stale {
		s.files[file] = true
	} else {
		delete(s.files, file)
	}
	return nil
}

func (s *staleList) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// writeFileSync replaces path by data crash-safely: a temporary file is
// written and synced, renamed over path, and the directory is synced.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
