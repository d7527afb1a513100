package sim

import (
	"sync"

	"github.com/coopfs/coopfs/internal/lru"
)

// IDs numbers blocks densely, 1, 2, 3, ... in order of first appearance
// (0 is no block), so that an algorithm keeps its per-block state in
// slices indexed by number instead of hash tables. Its memory grows with
// the unique blocks. It is safe for concurrent use: Run numbers the trace
// on the reading goroutine (Number, in chunks) while the algorithm looks
// blocks up (a delete names blocks by file and index).
//
// With NumberFiles it also numbers files 1, 2, 3, ... (Access.FileID) for
// every access that names one, for algorithms that index their per-file
// state by number.
type IDs struct {
	mu     sync.Mutex
	t      keyIndex
	keys   []Key // keys[id]; keys[0] is unused
	hashes [numberChunk]uint64
	sink   uint64
	files  bool                       // NumberFiles was called
	ft     lru.Table[fileKey, uint32] // file → its number
	bfile  []uint32                   // with files: block number → its file's number
	nfiles uint32
	last   uint64 // the file numbered last, and its number (0: none)
	lastNo uint32
}

// fileKey is a file id hashable by lru.Table.
type fileKey uint64

func (k fileKey) Hash() uint64 { return Mix(uint64(k)) }

// NumberFiles makes Number set Access.FileID too.
func (d *IDs) NumberFiles() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.files {
		return
	}
	d.files = true
	d.bfile = append(d.bfile[:0], 0)
	for _, k := range d.keys[min(1, len(d.keys)):] { // blocks numbered before
		d.bfile = append(d.bfile, d.fileID(k.File))
	}
}

// FileID returns file's number, numbering it if it has none (NumberFiles
// need not be set).
func (d *IDs) FileID(file uint64) uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fileID(file)
}

func (d *IDs) fileID(file uint64) uint32 {
	if d.lastNo != 0 && d.last == file {
		return d.lastNo
	}
	no, found := d.ft.Intern(fileKey(file), d.nfiles+1)
	if !found {
		d.nfiles++
	}
	d.last, d.lastNo = file, no
	return no
}

// ID returns k's number, numbering k if it has none.
func (d *IDs) ID(k Key) uint32 {
	d.mu.Lock()
	id := d.id(k)
	d.mu.Unlock()
	return id
}

func (d *IDs) id(k Key) uint32 { return d.idHashed(k, k.Hash()) }

func (d *IDs) idHashed(k Key, h uint64) uint32 {
	if len(d.keys) == 0 {
		d.keys = append(d.keys, Key{})
		if d.files {
			d.bfile = append(d.bfile[:0], 0)
		}
	}
	id, found := d.t.intern(k, h, uint32(len(d.keys)), d.keys)
	if !found {
		d.keys = append(d.keys, k)
		if d.files { // a block's file is numbered once, when the block is
			d.bfile = append(d.bfile, d.fileID(k.File))
		}
	}
	return id
}

// numberChunk is how many accesses Number numbers per lock.
const numberChunk = 512

// Number sets the ID of every read and write of batch (0 for the other
// operations).
func (d *IDs) Number(batch []Access) {
	for len(batch) > 0 {
		n := min(len(batch), numberChunk)
		d.mu.Lock()
		// Two passes: hash every key and touch its slot (independent loads
		// that the CPU overlaps), then number them from the cache.
		var sink uint64
		for i := range batch[:n] {
			h := Key{batch[i].File, batch[i].Block}.Hash()
			d.hashes[i] = h
			sink += uint64(d.t.touch(h))
		}
		d.sink += sink
		for i := range batch[:n] {
			a := &batch[i]
			if a.Op == OpRead || a.Op == OpWrite {
				k := Key{a.File, a.Block}
				if a.ID = d.t.first(k, d.hashes[i], d.keys); a.ID == 0 {
					a.ID = d.idHashed(k, d.hashes[i])
				}
				if d.files {
					a.FileID = d.bfile[a.ID]
				}
			} else {
				a.ID = 0
				if d.files {
					a.FileID = d.fileID(a.File)
				}
			}
		}
		d.mu.Unlock()
		batch = batch[n:]
	}
}

// Lookup returns k's number, 0 if k has none.
func (d *IDs) Lookup(k Key) uint32 {
	d.mu.Lock()
	id := d.t.get(k, k.Hash(), d.keys)
	d.mu.Unlock()
	return id
}

// Key returns the block numbered id.
func (d *IDs) Key(id uint32) Key {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.keys[id]
}

// Len returns the number of blocks numbered: numbers run from 1 to Len().
func (d *IDs) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(len(d.keys)-1, 0)
}
