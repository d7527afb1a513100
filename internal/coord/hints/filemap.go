package hints

import "github.com/coopfs/coopfs/internal/lru"

// fkey is a file id hashable by lru.Table.
type fkey uint64

func (k fkey) Hash() uint64 { return lru.Mix(uint64(k)) }

// fileMap maps file ids to nonzero int32 numbers (a record, a slab index;
// 0: absent): a slice indexed by id for small ids, an lru.Table for the
// others. The simulator numbers files densely (sim.IDs.NumberFiles) and a
// live server's inode numbers are mostly small, so a lookup is an index,
// not a hash; the slice grows (by doubling) to cover an id only while it
// stays below four times the most ids ever held at once (plus a few
// thousand), so sparse ids cost little more memory than the table —
// unless dense is set (the ids are known to be dense: the simulator's),
// then it covers every id.
type fileMap struct {
	direct []int32
	t      lru.Table[fkey, int32]
	n      int // ids held
	peak   int // the most ids held at once
	dense  bool
}

// directSlack is how far past four times the peak the slice may reach.
const directSlack = 4096

func (m *fileMap) get(f uint64) int32 {
	if f < uint64(len(m.direct)) { // small enough to inline
		return m.direct[f]
	}
	return m.getFar(f)
}

// getFar is get for an id past the slice.
func (m *fileMap) getFar(f uint64) int32 {
	if m.t.Len() == 0 {
		return 0
	}
	v, _ := m.t.Get(fkey(f))
	return v
}

// put maps f, which is absent, to v (not 0).
func (m *fileMap) put(f uint64, v int32) {
	m.n++
	m.peak = max(m.peak, m.n)
	if f >= uint64(len(m.direct)) {
		// Grow by doubling (or to f), as long as the slice stays within
		// its bound: a table's worth of moves per doubling.
		if n := max(f+1, uint64(2*len(m.direct)), directSlack); m.dense || n <= uint64(4*m.peak+directSlack) {
			m.grow(int(n))
		}
	}
	if f < uint64(len(m.direct)) {
		m.direct[f] = v
		return
	}
	m.t.Put(fkey(f), v)
}

// del removes f, which is present.
func (m *fileMap) del(f uint64) {
	m.n--
	if f < uint64(len(m.direct)) {
		m.direct[f] = 0
		return
	}
	m.t.Delete(fkey(f))
}

// grow extends the slice to n ids and moves the table's ids it now covers.
func (m *fileMap) grow(n int) {
	d := make([]int32, n)
	copy(d, m.direct)
	m.direct = d
	var moved []uint64
	m.t.Range(func(k fkey, v int32) bool {
		if uint64(k) < uint64(n) {
			d[k] = v
			moved = append(moved, uint64(k))
		}
		return true
	})
	for _, k := range moved {
		m.t.Delete(fkey(k))
	}
}

// each calls f for every id and number until f returns false.
func (m *fileMap) each(f func(id uint64, v int32) bool) {
	for id, v := range m.direct {
		if v != 0 && !f(uint64(id), v) {
			return
		}
	}
	m.t.Range(func(k fkey, v int32) bool { return f(uint64(k), v) })
}

// fileSlab keeps a record of type T per file in a slab (record 0 is none),
// found by file id through a fileMap, and remembers the last file looked
// up, found or not: the calls of one access, or of a client streaming
// through a file, name one file again and again (a read miss asks for a
// file without a record three or four times). Released records are reused as they are (the
// caller resets what it needs, keeping their memory). The records lie in
// pages of slabPage that never move: a new file costs no copy of the
// others (a slice grown by doubling moved every record, pointers and all,
// a few times over: a tenth of a single-client simulation of many files).
type fileSlab[T any] struct {
	ids     fileMap
	pages   [][]T
	n       int32 // records made, record 0 included (0: none yet)
	free    []int32
	last    uint64 // the file looked up last (if lastOK) and its record
	lastRec int32  // 0: last has none
	lastOK  bool
}

// slabPageBits sets the records per page of a fileSlab.
const (
	slabPageBits = 10
	slabPage     = 1 << slabPageBits
)

// rec returns record r, which has been made (r < s.n).
func (s *fileSlab[T]) rec(r int32) *T { return &s.pages[r>>slabPageBits][r&(slabPage-1)] }

// made reports whether record r has been made.
func (s *fileSlab[T]) made(r int32) bool { return r >= 0 && r < s.n }

// find returns file's record number, 0 if it has none.
func (s *fileSlab[T]) find(file uint64) int32 {
	if s.lastOK && s.last == file {
		return s.lastRec
	}
	r := s.ids.get(file)
	s.last, s.lastRec, s.lastOK = file, r, true
	return r
}

// add gives file, which has none, a record and returns its number.
func (s *fileSlab[T]) add(file uint64) int32 {
	var r int32
	if n := len(s.free); n > 0 {
		r, s.free = s.free[n-1], s.free[:n-1]
	} else {
		if s.n == 0 {
			s.n = 1
		}
		r = s.n
		if int(r>>slabPageBits) == len(s.pages) {
			s.pages = append(s.pages, make([]T, slabPage))
		}
		s.n++
	}
	s.ids.put(file, r)
	s.last, s.lastRec, s.lastOK = file, r, true
	return r
}

// release takes record r from file, which holds it.
func (s *fileSlab[T]) release(file uint64, r int32) {
	s.ids.del(file)
	if s.last == file {
		s.lastRec = 0 // file has none now
	}
	s.free = append(s.free, r)
}

// len returns the number of files with a record.
func (s *fileSlab[T]) len() int { return max(int(s.n)-1, 0) - len(s.free) }
