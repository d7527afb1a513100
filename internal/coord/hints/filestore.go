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
}

// bucketRecs is how many records a bucket holds: 128 bytes, two lines.
const bucketRecs = 3

// fileBucket is one file's records of up to bucketRecs participants,
// cols[i] naming record i's column (0: free). A file with more
// participants chains buckets by next; a handle names a bucket's record as
// bucket<<2 | i, stable while the record is in use.
type fileBucket struct {
	id   uint64
	next int32
	cols [bucketRecs]uint8
	_    [1]byte
	recs [bucketRecs]fileRec
	_    [16]byte
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

func (s *fileStore) init(dense bool) {
	s.nears = make([][]slot, 1)
	s.mores = make([]*lru.Sparse[slot], 1)
	s.ids.dense = dense
}

// join hands out a new column, 0 if the store is full.
func (s *fileStore) join() uint8 {
	if s.cols == maxColumns {
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
	for b := s.find(file); b != 0; {
		k := s.rec(b)
		for i, c := range k.cols {
			if c == col {
				return b<<2 | int32(i)
			}
		}
		b = k.next
	}
	return 0
}

// addCol gives file, which has no record in column col, one there.
func (s *fileStore) addCol(file uint64, col uint8) int32 {
	home := s.find(file)
	if home == 0 {
		home = s.add(file)
		s.newBucket(home, file)
	}
	for b := home; b != 0; b = s.rec(b).next {
		k := s.rec(b)
		for i, c := range k.cols {
			if c == 0 {
				k.cols[i] = col
				return b<<2 | int32(i)
			}
		}
	}
	b := s.take() // an overflow bucket, second in the chain
	s.newBucket(b, file)
	h := s.rec(home)
	s.rec(b).next, h.next = h.next, b
	s.rec(b).cols[0] = col
	return b << 2
}

// newBucket readies bucket b (new or recycled, its records free) for file.
func (s *fileStore) newBucket(b int32, file uint64) {
	k := s.rec(b)
	k.id, k.next = file, 0
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
// record's next use, cleared; a bucket left with no record leaves its
// chain (the first one only as the last).
func (s *fileStore) releaseCol(r int32) {
	k, f := s.bucket(r), s.record(r)
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
	if k.cols != ([bucketRecs]uint8{}) {
		return
	}
	b, file := r>>2, k.id
	home := s.find(file)
	if b == home {
		if k.next == 0 {
			s.release(file, home)
		}
		return
	}
	p := s.rec(home)
	for p.next != b {
		p = s.rec(p.next)
	}
	p.next = k.next
	s.free = append(s.free, b)
	if h := s.rec(home); h.next == 0 && h.cols == ([bucketRecs]uint8{}) {
		s.release(file, home)
	}
}
