package hints

import (
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/lru"
)

// fileIndex is a participant's index of the blocks it knows, file by file:
// each file it caches blocks of or holds hints for has a record with one
// slot per block index, holding the block's cache entry and its hint
// (either may be absent). A client's age cache and its hints share one.
// The records are the participant's column of a FileStore (shared with
// the other participants of a simulation, a live client's own).
//
// Everything the policy does per file — hand out its hints on open, drop
// them and its blocks on a revocation, revalidate a writer's copies — walks
// one record's slots, with no per-block list to keep up; a block is found
// through its file's record (the last record used is remembered, so a
// client streaming through a file finds it at once) and then its index,
// and a file's blocks sit side by side in memory. Block 0's slot is in the
// record itself (the object traces of the field make every object a file
// of one block); the next nearSlots in a page of the store's (numbered in
// the record) that grows with the highest index used, so a file of a few
// blocks costs a few slots; the others in an lru.Sparse (numbered too).
// Records are recycled with their pages: after warm-up nothing is
// allocated. Nothing holds a pointer but the store's page tables.
//
// INVARIANT: a record is in the column iff used > 0; used counts its slots
// that hold an entry or a hint.
type fileIndex struct {
	st      *fileStore
	col     uint8 // the participant's column
	hints   int   // slots holding a hint
	files   int   // records in the column
	last    uint64
	lastRec int32 // the record of last (if lastOK; 0: none)
	lastOK  bool
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

// newFileIndex returns an empty index, a column of st (a store of its own
// if st is nil or full; dense says file ids are small dense numbers).
func newFileIndex(st *FileStore, dense bool) *fileIndex {
	if st != nil {
		if col := st.s.join(); col != 0 {
			return &fileIndex{st: &st.s, col: col}
		}
	}
	own := NewFileStore(dense)
	return &fileIndex{st: &own.s, col: own.s.join()}
}

// find returns file's record, 0 if it has none.
func (x *fileIndex) find(file uint64) int32 {
	if x.lastOK && x.last == file {
		return x.lastRec
	}
	r := x.st.findCol(file, x.col)
	x.last, x.lastRec, x.lastOK = file, r, true
	return r
}

// rec returns record r, which is in use.
func (x *fileIndex) rec(r int32) *fileRec { return x.st.record(r) }

// fileOf returns the file of record r, which is in use.
func (x *fileIndex) fileOf(r int32) uint64 { return x.st.bucket(r).id }

// holds reports whether r is file's record in this column (a handle kept
// since may have been released, and taken by another file or column).
func (x *fileIndex) holds(r int32, file uint64) bool {
	b := r >> 2
	if !x.st.made(b) {
		return false
	}
	k := x.st.rec(b)
	return k.cols[r&3] == x.col && k.id == file && k.recs[r&3].used > 0
}

// ensure returns file's record, made if need be.
func (x *fileIndex) ensure(file uint64) int32 {
	if r := x.find(file); r != 0 {
		return r
	}
	r := x.st.addCol(file, x.col)
	x.files++
	x.last, x.lastRec, x.lastOK = file, r, true
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
	if f.pages == 0 {
		return nil
	}
	if idx <= nearSlots {
		if p := x.st.nears[f.pages]; idx <= uint64(len(p)) {
			return &p[idx-1]
		}
		return nil
	}
	if m := x.st.mores[f.pages]; m != nil {
		return m.At(idx - nearSlots - 1)
	}
	return nil
}

// make returns the slot of index idx in record r, made if need be (valid
// until the next make in r).
func (x *fileIndex) make(r int32, idx uint64) *slot {
	f := x.rec(r)
	if idx == 0 {
		return &f.s0
	}
	n := x.st.pagesOf(f)
	if idx <= nearSlots {
		p := lru.Extend(x.st.nears[n], int(idx), nearSlots)
		x.st.nears[n] = p
		return &p[idx-1]
	}
	if x.st.mores[n] == nil {
		x.st.mores[n] = new(lru.Sparse[slot])
	}
	return x.st.mores[n].Make(idx - nearSlots - 1)
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
	if x.last == x.fileOf(r) {
		x.lastRec = 0 // the file has none now
	}
	x.files--
	x.st.releaseCol(r)
}

// each calls f for every slot of record r that is in use (in index order
// below lru.SparseNear pages), until f returns false. f may change the
// slot but not the index.
func (x *fileIndex) each(r int32, f func(idx uint64, s *slot) bool) {
	rec := x.rec(r)
	if s := &rec.s0; !s.empty() && !f(0, s) {
		return
	}
	if rec.pages == 0 {
		return
	}
	near := x.st.nears[rec.pages]
	for i := range near {
		if s := &near[i]; !s.empty() && !f(uint64(i)+1, s) {
			return
		}
	}
	if m := x.st.mores[rec.pages]; m != nil {
		m.Each(func(i uint64, s *slot) bool { return s.empty() || f(i+nearSlots+1, s) })
	}
}

// eachFile calls f for every record in the column until f returns false.
func (x *fileIndex) eachFile(f func(r int32) bool) {
	x.st.ids.each(func(file uint64, _ int32) bool {
		if r := x.st.findCol(file, x.col); r != 0 {
			return f(r)
		}
		return true
	})
}
