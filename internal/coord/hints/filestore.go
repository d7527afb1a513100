package hints

import "github.com/coopfs/coopfs/internal/lru"

// FileStore holds the per-file records of the participants that use it,
// file-major: one bucket per file (and more, chained, while a file has
// more participants than a bucket holds), with each participant's record
// for the file — its block 0 slot and the numbers of its other slots'
// pages — side by side. A participant's fileIndex is its column of the
// store. A live client has a store of its own (one column); the simulator
// shares one among all its participants, so that the reader, the last
// opener, the holder and the forward target of an access find the file in
// one bucket instead of a record (and a map entry) each. The policy is the
// same code either way: it goes through its fileIndex.
//
// Not safe for concurrent use: its participants are driven one at a time.
type FileStore struct {
	s fileStore
}

// NewFileStore returns an empty store; dense says file ids are small dense
// numbers (ClientConfig.DenseFiles).
func NewFileStore(dense bool) *FileStore {
	st := &FileStore{}
	st.s.init(dense)
	return st
}

// maxColumns is how many participants a store takes (a column is a byte,
// 0 meaning none); NewClient gives a participant past them a store of its
// own.
const maxColumns = 255

// fileStore is FileStore's state.
type fileStore struct {
	fileSlab[fileBucket]                     // file → its first bucket; the buckets
	nears                [][]slot            // the records' near pages, by number (0: none)
	mores                []*lru.Sparse[slot] // the records' far slots, by the same number (nil: none)
	cols                 int                 // columns handed out
	wides                wideTables          // the wide files' tables, column → record
}

// bucketRecs is how many records a bucket holds: 128 bytes, two lines.
const bucketRecs = 3

// fileBucket holds records of one file: a file's first bucket those of
// its first bucketRecs participants, in any order (cols[i] names record
// i's column, 0: free); a file with more has a wide table (wideTables) of
// group buckets, group g holding the records of columns 3g+1..3g+3 in that
// order, so that a column's record is found in a fixed place: a popular
// file of a simulation has a record for each of 42 clients. A handle names
// a bucket's record as bucket<<2 | i, stable while the record is in use.
type fileBucket struct {
	id     uint64
	groups int32 // a first bucket's group buckets
	cols   [bucketRecs]uint8
	_      [1]byte
	recs   [bucketRecs]fileRec
	wide   int32 // a first bucket's wide table (0: none)
	_      [12]byte
}

// fileRec is one participant's record of one file: 32 bytes without
// pointers (its other slots are numbered pages of the store), so that the
// garbage collector does not scan the millions a simulation of an object
// trace holds.
type fileRec struct {
	s0    slot  // index 0
	pages int32 // indexes past 0: nears[pages] and mores[pages] (0 until one is used)
	used  int32
}

// group returns column col's group and its place in the group's bucket.
func group(col uint8) (g int, i int32) { return int(col-1) / bucketRecs, int32(col-1) % bucketRecs }

func (s *fileStore) init(dense bool) {
	s.nears = make([][]slot, 1)
	s.mores = make([]*lru.Sparse[slot], 1)
	s.ids.dense = dense
}

// join hands out a new column, 0 if the store is full: past maxColumns,
// or once a wide table sized for the columns so far exists.
func (s *fileStore) join() uint8 {
	if s.cols == maxColumns || s.wides.n > 0 {
		return 0
	}
	s.cols++
	return uint8(s.cols)
}

// bucket returns the bucket of handle r.
func (s *fileStore) bucket(r int32) *fileBucket { return s.rec(r >> 2) }

// record returns the record of handle r.
func (s *fileStore) record(r int32) *fileRec { return &s.rec(r >> 2).recs[r&3] }

// findCol returns the handle of file's record in column col, 0 if none.
func (s *fileStore) findCol(file uint64, col uint8) int32 {
	b := s.find(file)
	if b == 0 {
		return 0
	}
	k := s.rec(b)
	for i, c := range k.cols {
		if c == col {
			return b<<2 | int32(i)
		}
	}
	if k.wide == 0 {
		return 0
	}
	g, i := group(col)
	if gb := *s.wides.at(k.wide, g); gb != 0 && s.rec(gb).cols[i] == col {
		return gb<<2 | i
	}
	return 0
}

// addCol gives file, which has no record in column col, one there: in its
// first bucket if that has room, else in col's group bucket.
func (s *fileStore) addCol(file uint64, col uint8) int32 {
	home := s.find(file)
	if home == 0 {
		home = s.add(file)
		s.newBucket(home, file)
	}
	h := s.rec(home)
	for i, c := range h.cols {
		if c == 0 {
			h.cols[i] = col
			return home<<2 | int32(i)
		}
	}
	if h.wide == 0 {
		h.wide = s.wides.take((s.cols + bucketRecs - 1) / bucketRecs)
	}
	g, i := group(col)
	gp := s.wides.at(h.wide, g)
	if *gp == 0 {
		b := s.take()
		s.newBucket(b, file)
		*gp = b
		h.groups++
	}
	s.rec(*gp).cols[i] = col
	return *gp<<2 | i
}

// newBucket readies bucket b (new or recycled, its records free) for file.
func (s *fileStore) newBucket(b int32, file uint64) {
	k := s.rec(b)
	k.id, k.groups, k.wide = file, 0, 0
}

// pagesOf returns the number of record f's pages, made if need be.
func (s *fileStore) pagesOf(f *fileRec) int32 {
	if f.pages == 0 {
		f.pages = int32(len(s.nears))
		s.nears = append(s.nears, nil)
		s.mores = append(s.mores, nil)
	}
	return f.pages
}

// releaseCol frees record r (emptied), keeping its pages' memory for the
// record's next use, cleared; a group bucket left with no record is
// freed, and a first bucket left with none and no group bucket too.
func (s *fileStore) releaseCol(r int32) {
	k, f := s.bucket(r), s.record(r)
	col := k.cols[r&3]
	k.cols[r&3] = 0
	f.s0 = slot{}
	if f.pages != 0 {
		p := s.nears[f.pages]
		clear(p)
		s.nears[f.pages] = p[:0]
		if m := s.mores[f.pages]; m != nil {
			m.Reset()
		}
	}
	b, file := r>>2, k.id
	home := s.find(file)
	h := s.rec(home)
	if b != home && k.cols == ([bucketRecs]uint8{}) {
		g, _ := group(col)
		*s.wides.at(h.wide, g) = 0
		s.free = append(s.free, b)
		if h.groups--; h.groups == 0 {
			s.wides.give(h.wide)
			h.wide = 0
		}
	}
	if h.groups == 0 && h.cols == ([bucketRecs]uint8{}) {
		s.release(file, home)
	}
}

// wideTables holds, for each file with group buckets, their numbers by
// group (0: none): tables of stride places, in pages that never move.
type wideTables struct {
	stride int
	pages  [][]int32
	n      int32 // tables made, table 0 included
	free   []int32
}

// widePage is how many tables a page holds.
const widePage = 1024

// at returns table t's place for group g.
func (w *wideTables) at(t int32, g int) *int32 {
	return &w.pages[t/widePage][int(t%widePage)*w.stride+g]
}

// take returns a cleared table of at least groups places (the stride is
// set at the first: the store takes no column after it, join).
func (w *wideTables) take(groups int) int32 {
	if n := len(w.free); n > 0 {
		t := w.free[n-1]
		w.free = w.free[:n-1]
		return t
	}
	if w.n == 0 {
		w.stride, w.n = (groups+15)&^15, 1 // whole lines
	}
	t := w.n
	if int(t/widePage) == len(w.pages) {
		w.pages = append(w.pages, make([]int32, widePage*w.stride))
	}
	w.n++
	return t
}

// give frees table t, which is cleared (every place 0).
func (w *wideTables) give(t int32) { w.free = append(w.free, t) }

// check verifies each file's group buckets against its wide table
// (tests).
func (s *fileStore) check() error {
	var err error
	s.ids.each(func(file uint64, home int32) bool {
		h, groups := s.rec(home), int32(0)
		for g := 0; h.wide != 0 && g < s.wides.stride; g++ {
			b := *s.wides.at(h.wide, g)
			if b == 0 {
				continue
			}
			groups++
			k := s.rec(b)
			for i, c := range k.cols {
				if c != 0 && (k.id != file || c != uint8(g*bucketRecs+i+1)) {
					err = errorf("file store: file %d group %d: bucket of file %d has column %d at %d", file, g, k.id, c, i)
				}
			}
		}
		if groups != h.groups || (h.wide == 0) != (groups == 0) {
			err = errorf("file store: file %d: %d group buckets, counted %d, table %d", file, groups, h.groups, h.wide)
		}
		return err == nil
	})
	return err
}
