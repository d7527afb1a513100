package hints

import "github.com/coopfs/coopfs/internal/block"

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
// of one block); the others are kept in pages of pageSlots, the first of
// which grows with the highest index seen, so a file of a few blocks costs
// a few slots. Records are recycled with
// their memory: after warm-up nothing is allocated. Nothing holds a
// pointer but the page slices.
//
// INVARIANT: a record is indexed iff used > 0; used counts its slots that
// hold an entry or a hint.
type fileIndex struct {
	files   fileMap   // file id → record
	recs    []fileRec // recs[0] is unused: record 0 is none
	free    []int32
	last    uint64 // the file of lastRec
	lastRec int32  // the last record found, 0 if none
	hints   int    // slots holding a hint
}

// pageSlots is the number of slots in a page.
const pageSlots = 64

type fileRec struct {
	id   uint64
	s0   slot       // index 0
	more *filePages // the other indexes (nil until one is used)
	used int32
}

// filePages holds a file's slots past index 0.
type filePages struct {
	first []slot   // indexes 1..pageSlots (grown as needed)
	rest  [][]slot // page p holds indexes (p+1)*pageSlots+1...
}

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
	x := new(fileIndex)
	x.files.dense = dense
	return x
}

// find returns file's record, 0 if it has none.
func (x *fileIndex) find(file uint64) int32 {
	if x.lastRec != 0 && x.last == file {
		return x.lastRec
	}
	r := x.files.get(file)
	if r != 0 {
		x.last, x.lastRec = file, r
	}
	return r
}

// ensure returns file's record, made if need be.
func (x *fileIndex) ensure(file uint64) int32 {
	if r := x.find(file); r != 0 {
		return r
	}
	var r int32
	if n := len(x.free); n > 0 {
		r, x.free = x.free[n-1], x.free[:n-1]
	} else {
		if len(x.recs) == 0 {
			x.recs = append(x.recs, fileRec{})
		}
		r = int32(len(x.recs))
		x.recs = append(x.recs, fileRec{})
	}
	x.recs[r].id = file
	x.files.put(file, r)
	x.last, x.lastRec = file, r
	return r
}

// at returns the slot of index idx in record r, nil if it has none.
func (x *fileIndex) at(r int32, idx uint64) *slot {
	f := &x.recs[r]
	if idx == 0 {
		return &f.s0
	}
	if f.more == nil {
		return nil
	}
	return f.more.at(idx - 1)
}

// at returns the slot of index j+1, nil if none.
func (f *filePages) at(j uint64) *slot {
	if j < pageSlots {
		if j < uint64(len(f.first)) {
			return &f.first[j]
		}
		return nil
	}
	p := j/pageSlots - 1
	if p >= uint64(len(f.rest)) {
		return nil
	}
	if pg := f.rest[p]; j%pageSlots < uint64(len(pg)) {
		return &pg[j%pageSlots]
	}
	return nil
}

// make returns the slot of index idx in record r, made if need be (valid
// until the next make in r).
func (x *fileIndex) make(r int32, idx uint64) *slot {
	if s := x.at(r, idx); s != nil {
		return s
	}
	f := x.recs[r].more
	if f == nil {
		f = new(filePages)
		x.recs[r].more = f
	}
	j := idx - 1 // idx > 0: slot 0 is always there
	if j < pageSlots {
		f.first = growSlots(f.first, int(j)+1)
		return &f.first[j]
	}
	p := int(j/pageSlots) - 1
	for len(f.rest) <= p {
		if len(f.rest) < cap(f.rest) {
			f.rest = f.rest[:len(f.rest)+1] // a page kept from the record's last file
		} else {
			f.rest = append(f.rest, nil)
		}
	}
	f.rest[p] = growSlots(f.rest[p], int(j%pageSlots)+1)
	return &f.rest[p][j%pageSlots]
}

// growSlots returns s with at least n slots (at most pageSlots of capacity
// beyond what is needed: pages never grow past pageSlots).
func growSlots(s []slot, n int) []slot {
	if n <= len(s) {
		return s
	}
	if n <= cap(s) {
		old := len(s)
		s = s[:n]
		clear(s[old:])
		return s
	}
	c := min(max(2*cap(s), n), pageSlots)
	ns := make([]slot, n, c)
	copy(ns, s)
	return ns
}

// lookup returns the slot of block b, nil if none.
func (x *fileIndex) lookup(b block.ID) *slot {
	r := x.find(b.File)
	if r == 0 {
		return nil
	}
	return x.at(r, b.Index)
}

// filled records that a slot of r went from empty to used.
func (x *fileIndex) filled(r int32) { x.recs[r].used++ }

// emptied records that a slot of r went from used to empty, and drops the
// record when it was its last.
func (x *fileIndex) emptied(r int32) {
	f := &x.recs[r]
	if f.used--; f.used > 0 {
		return
	}
	x.files.del(f.id)
	if x.lastRec == r {
		x.lastRec = 0
	}
	// Keep the pages' memory for the record's next file, cleared.
	f.s0 = slot{}
	if p := f.more; p != nil {
		clear(p.first)
		p.first = p.first[:0]
		for i := range p.rest {
			clear(p.rest[i])
			p.rest[i] = p.rest[i][:0]
		}
		p.rest = p.rest[:0]
	}
	x.free = append(x.free, r)
}

// each calls f for every slot of record r that is in use, in index order,
// until f returns false. f may change the slot but not the index.
func (x *fileIndex) each(r int32, f func(idx uint64, s *slot) bool) {
	rec := &x.recs[r]
	if s := &rec.s0; !s.empty() && !f(0, s) {
		return
	}
	more := rec.more
	if more == nil {
		return
	}
	for i := range more.first {
		if s := &more.first[i]; !s.empty() && !f(uint64(i)+1, s) {
			return
		}
	}
	for p, pg := range more.rest {
		for i := range pg {
			if s := &pg[i]; !s.empty() && !f(uint64(p+1)*pageSlots+uint64(i)+1, s) {
				return
			}
		}
	}
}

// files calls f for every record in use until f returns false.
func (x *fileIndex) eachFile(f func(r int32) bool) {
	x.files.each(func(_ uint64, r int32) bool { return f(r) })
}
