package wbjournal

import (
	"encoding/binary"
	"fmt"
	"path/filepath"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/vfs"
)

// Name is the journal's file in the disk cache directory.
const Name = "writeback"

// maxGroups bounds the supplementary groups a record keeps.
const maxGroups = 1000

// Record says where and as whom a dirty file is written back.
type Record struct {
	Version uint64 // the version the file's dirty frames are tagged with
	Caller  vfs.Caller
	Path    string
}

// Encode is version u64 | uid u32 | gid u32 | groups u16 + u32 each | path.
func (r Record) Encode() []byte {
	groups := r.Caller.Groups
	if len(groups) > maxGroups {
		groups = groups[:maxGroups]
	}
	b := binary.LittleEndian.AppendUint64(nil, r.Version)
	b = binary.LittleEndian.AppendUint32(b, r.Caller.UID)
	b = binary.LittleEndian.AppendUint32(b, r.Caller.GID)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(groups)))
	for _, g := range groups {
		b = binary.LittleEndian.AppendUint32(b, g)
	}
	return append(b, r.Path...)
}

// Decode parses an encoded record; false for a malformed one.
func Decode(b []byte) (Record, bool) {
	var r Record
	if len(b) < 18 {
		return r, false
	}
	r.Version = binary.LittleEndian.Uint64(b)
	r.Caller.UID = binary.LittleEndian.Uint32(b[8:])
	r.Caller.GID = binary.LittleEndian.Uint32(b[12:])
	n := int(binary.LittleEndian.Uint16(b[16:]))
	b = b[18:]
	if len(b) < 4*n {
		return r, false
	}
	for i := 0; i < n; i++ {
		r.Caller.Groups = append(r.Caller.Groups, binary.LittleEndian.Uint32(b[4*i:]))
	}
	r.Path = string(b[4*n:])
	return r, true
}

// Journal is the record of every dirty file, by file id. Safe for
// concurrent use.
type Journal struct {
	m *disk.MetaStore
}

// Open opens (or creates) the journal in the cache directory dir.
func Open(dir string) (*Journal, error) {
	m, err := disk.OpenMeta(filepath.Join(dir, Name))
	if err != nil {
		return nil, fmt.Errorf("open the write-back journal: %w", err)
	}
	return &Journal{m: m}, nil
}

// Put records file ino's destination and syncs the journal: once it
// returns, the file's dirty frames can be written.
func (j *Journal) Put(ino uint64, r Record) error {
	if err := j.m.SetAttr(ino, r.Encode()); err != nil {
		return fmt.Errorf("write-back journal: record %s: %w", r.Path, err)
	}
	if err := j.m.Sync(); err != nil {
		return fmt.Errorf("write-back journal: sync: %w", err)
	}
	return nil
}

// Delete drops file ino's record (written back or dropped). Not synced: a
// record left by a crash names a file without dirty frames, which Recover
// drops.
func (j *Journal) Delete(ino uint64) error {
	if err := j.m.DeleteAttr(ino); err != nil {
		return fmt.Errorf("write-back journal: %w", err)
	}
	return nil
}

// Close closes the journal.
func (j *Journal) Close() error { return j.m.Close() }

// File is a dirty file found again after a restart: its record and its
// dirty blocks (index → data length).
type File struct {
	Ino    uint64
	Record Record
	Blocks map[uint64]int
	Bytes  int64 // the dirty blocks' data
	Size   int64 // the end of the last dirty block: at least the file's size then
}

// Recover pairs the dirty frames of c with the journal's records. It
// returns the files that can be written back, and the dirty blocks that
// cannot (no record of their version); records without dirty frames are
// dropped from the journal. A record without a path is an orphan (a file
// removed while still open: never written back): its file goes on the
// stale list and its record is dropped.
func (j *Journal) Recover(c *disk.Cache) (map[uint64]*File, []block.ID, error) {
	recs := j.m.Attrs()
	for ino, b := range recs {
		if r, ok := Decode(b); ok && r.Path == "" {
			if err := c.MarkStale(ino); err != nil {
				return nil, nil, fmt.Errorf("write-back journal: an orphan's stale mark: %w", err)
			}
			if err := j.Delete(ino); err != nil {
				return nil, nil, err
			}
			delete(recs, ino)
		}
	}
	bs := int64(c.BlockSize())
	files := map[uint64]*File{}
	var lost []block.ID
	for _, d := range c.Dirty() {
		r, ok := Decode(recs[d.ID.File])
		if !ok || r.Version != uint64(d.Version) {
			lost = append(lost, d.ID)
			continue
		}
		data, ok := c.Get(d.ID, d.Version)
		if !ok {
			continue // unreadable (a torn frame): the disk tier dropped it
		}
		f := files[d.ID.File]
		if f == nil {
			f = &File{Ino: d.ID.File, Record: r, Blocks: map[uint64]int{}}
			files[d.ID.File] = f
		}
		f.Blocks[d.ID.Index] = len(data)
		f.Bytes += int64(len(data))
		f.Size = max(f.Size, int64(d.ID.Index)*bs+int64(len(data)))
	}
	for ino := range recs {
		if _, ok := files[ino]; !ok {
			if err := j.Delete(ino); err != nil {
				return files, lost, err
			}
		}
	}
	return files, lost, nil
}
