package hints

import (
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// fileIndex is a participant's index of the blocks it knows, file by file:
// each file it caches blocks of or holds hints for has a record with one
// slot per block index, holding the block's cache entry and its hint
// (either may be absent). A client's age cache and its hints share one.
//
// Everything the policy does per file — hand out its hints on open, drop
// them and its blocks on a revocation, revalidate a writer's copies — walks
// one record's slots, with no per-block list to keep up; a block is found
// through its file's record (the last record used is remembered, so a
// client streaming through a file finds it at once) and then its index,
// and a file's blocks sit side by side in memory. Block 0's slot is in the
// record itself (the object traces of the field make every object a file
// of one block); the next nearSlots in a page of the index's (numbered in
// the record) that grows with the highest index used, so a file of a few
// blocks costs a few slots; the others in an lru.Sparse (numbered too).
// Records are recycled with their pages: after warm-up nothing is
// allocated. Nothing holds a pointer but the index's page tables.
//
// INVARIANT: a record is indexed iff used > 0; used counts its slots that
// hold an entry or a hint.
type fileIndex struct {
	fileSlab[fileRec]
	nears [][]slot            // the records' near pages, by number (0: none)
	mores []*lru.Sparse[slot] // the records' far slots, by number (0: none)
	hints int                 // slots holding a hint
}

// fileRec is one file's record: 48 bytes without pointers (its other
// slots are numbered pages of the index), so that a record is seldom
// split across two cache lines and the garbage collector does not scan
// the millions a simulated client of an object trace holds.
type fileRec struct {
	id   uint64
	s0   slot  // index 0
	near int32 // indexes 1..nearSlots: nears[near] (0 until one is used)
	more int32 // the others: mores[more] (0 until one is used)
	used int32
}

// nearSlots is how many slots past index 0 a record keeps in its own
// slice (one hop from the record); slots beyond are in an lru.Sparse,
// whose pages exist only where slots are used: a file's block indexes may
// be object ids in the billions (a txt or LIRS trace is one file).
const nearSlots = 64

// slot is what a participant knows of one block: its cache entry (0 if not
// cached) and its hint (holder+1 in hp1, 0 if none).
type slot struct {
	ent   int32
	hp1   uint32
	boot  BootID
	since Time
}

func (s *slot) empty() bool { return s.ent == 0 && s.hp1 == 0 }

func (s *slot) hint() (Hint, bool) {
	if s.hp1 == 0 {
		return Hint{}, false
	}
	return Hint{Holder: ClientID(s.hp1 - 1), Boot: s.boot, Since: s.since}, true
}

// newFileIndex returns an empty index; dense says file ids are small dense
// numbers (fileMap).
func newFileIndex(dense bool) *fileIndex {
	x := &fileIndex{nears: make([][]slot, 1), mores: make([]*lru.Sparse[slot], 1)}
	x.ids.dense = dense
	return x
}

// ensure returns file's record, made if need be.
func (x *fileIndex) ensure(file uint64) int32 {
	if r := x.find(file); r != 0 {
		return r
	}
	r := x.add(file)
	x.rec(r).id = file
	return r
}

// at returns the slot of index idx in record r, nil if it has none.
func (x *fileIndex) at(r int32, idx uint64) *slot {
	if idx == 0 { // small enough to inline
		return &x.rec(r).s0
	}
	return x.atFar(r, idx)
}

// atFar is at for an index past 0.
func (x *fileIndex) atFar(r int32, idx uint64) *slot {
	f := x.rec(r)
	if idx <= nearSlots {
		if p := x.nears[f.near]; idx <= uint64(len(p)) { // nears[0] is empty
			return &p[idx-1]
		}
		return nil
	}
	if f.more == 0 {
		return nil
	}
	return x.mores[f.more].At(idx - nearSlots - 1)
}

// make returns the slot of index idx in record r, made if need be (valid
// until the next make in r).
func (x *fileIndex) make(r int32, idx uint64) *slot {
	f := x.rec(r)
	if idx == 0 {
		return &f.s0
	}
	if idx <= nearSlots {
		if f.near == 0 {
			f.near = int32(len(x.nears))
			x.nears = append(x.nears, nil)
		}
		p := lru.Extend(x.nears[f.near], int(idx), nearSlots)
		x.nears[f.near] = p
		return &p[idx-1]
	}
	if f.more == 0 {
		f.more = int32(len(x.mores))
		x.mores = append(x.mores, new(lru.Sparse[slot]))
	}
	return x.mores[f.more].Make(idx - nearSlots - 1)
}

// lookup returns the slot of block b, nil if none.
func (x *fileIndex) lookup(b block.ID) *slot {
	r := x.find(b.File)
	if r == 0 {
		return nil
	}
	if b.Index == 0 { // at, without the call
		return &x.rec(r).s0
	}
	return x.atFar(r, b.Index)
}

// filled records that a slot of r went from empty to used.
func (x *fileIndex) filled(r int32) { x.rec(r).used++ }

// emptied records that a slot of r went from used to empty, and drops the
// record when it was its last.
func (x *fileIndex) emptied(r int32) {
	f := x.rec(r)
	if f.used--; f.used > 0 {
		return
	}
	x.release(f.id, r)
	// Keep the pages' memory for the record's next file, cleared.
	f.s0 = slot{}
	p := x.nears[f.near]
	clear(p)
	x.nears[f.near] = p[:0]
	if f.more != 0 {
		x.mores[f.more].Reset()
	}
}

// each calls f for every slot of record r that is in use (in index order
// below lru.SparseNear pages), until f returns false. f may change the
// slot but not the index.
func (x *fileIndex) each(r int32, f func(idx uint64, s *slot) bool) {
	rec := x.rec(r)
	if s := &rec.s0; !s.empty() && !f(0, s) {
		return
	}
	near := x.nears[rec.near]
	for i := range near {
		if s := &near[i]; !s.empty() && !f(uint64(i)+1, s) {
			return
		}
	}
	if rec.more == 0 {
		return
	}
	x.mores[rec.more].Each(func(i uint64, s *slot) bool { return s.empty() || f(i+nearSlots+1, s) })
}

// files calls f for every record in use until f returns false.
func (x *fileIndex) eachFile(f func(r int32) bool) {
	x.ids.each(func(_ uint64, r int32) bool { return f(r) })
}
