package hints

import "github.com/coopfs/coopfs/internal/block"

// A client's hints live in its fileIndex, beside its cache entries: block
// → Hint in the block's slot. Nothing is allocated per hint once the
// file's pages have grown.

// hint returns b's hint.
func (x *fileIndex) hint(b block.ID) (Hint, bool) {
	if s := x.lookup(b); s != nil {
		return s.hint()
	}
	return Hint{}, false
}

// setHintIn gives index idx of record r (which must be indexed) the hint
// h and returns the one it replaces, if any.
func (x *fileIndex) setHintIn(r int32, idx uint64, h Hint) (old Hint, had bool) {
	s := x.make(r, idx)
	if s.empty() {
		x.filled(r)
	}
	if old, had = s.hint(); !had {
		x.hints++
	}
	s.hp1, s.boot, s.since = uint32(h.Holder)+1, h.Boot, h.Since
	return old, had
}

// delHint removes b's hint and returns it, if there was one.
func (x *fileIndex) delHint(b block.ID) (Hint, bool) {
	r := x.find(b.File)
	if r == 0 {
		return Hint{}, false
	}
	return x.delHintIn(r, b.Index)
}

// delHintIn is delHint for index idx of record r (which must be indexed).
func (x *fileIndex) delHintIn(r int32, idx uint64) (Hint, bool) {
	s := x.at(r, idx)
	if s == nil || s.hp1 == 0 {
		return Hint{}, false
	}
	old, _ := s.hint()
	s.hp1 = 0
	x.hints--
	if s.empty() {
		x.emptied(r)
	}
	return old, true
}

// fileHints calls f for each hint of file, in block order, until f returns
// false. f must not change the index.
func (x *fileIndex) fileHints(file uint64, f func(index uint64, h Hint) bool) {
	r := x.find(file)
	if r == 0 {
		return
	}
	x.each(r, func(idx uint64, s *slot) bool {
		if h, ok := s.hint(); ok {
			return f(idx, h)
		}
		return true
	})
}

// dropFileHints removes every hint of file, calling f with each first.
func (x *fileIndex) dropFileHints(file uint64, f func(h Hint)) {
	r := x.find(file)
	if r == 0 {
		return
	}
	emptied := 0
	x.each(r, func(_ uint64, s *slot) bool {
		if h, ok := s.hint(); ok {
			f(h)
			s.hp1 = 0
			x.hints--
			if s.empty() {
				emptied++
			}
		}
		return true
	})
	for range emptied { // the record goes with its last slot
		x.emptied(r)
	}
}

// hintFiles returns the files that have hints (in no particular order).
func (x *fileIndex) hintFiles() []uint64 {
	var out []uint64
	x.eachFile(func(r int32) bool {
		has := false
		x.each(r, func(_ uint64, s *slot) bool { has = s.hp1 != 0; return !has })
		if has {
			out = append(out, x.rec(r).id)
		}
		return true
	})
	return out
}

// eachHint calls f for every hint until f returns false. f must not change
// the index.
func (x *fileIndex) eachHint(f func(b block.ID, h Hint) bool) {
	x.eachFile(func(r int32) bool {
		file, more := x.rec(r).id, true
		x.each(r, func(idx uint64, s *slot) bool {
			if h, ok := s.hint(); ok {
				more = f(block.ID{File: file, Index: idx}, h)
			}
			return more
		})
		return more
	})
}

// check verifies the index's counts (tests).
func (x *fileIndex) check() error {
	hints, files := 0, 0
	var err error
	x.eachFile(func(r int32) bool {
		files++
		used := int32(0)
		x.each(r, func(_ uint64, s *slot) bool {
			used++
			if s.hp1 != 0 {
				hints++
			}
			return true
		})
		if rec := x.rec(r); used != rec.used || used == 0 {
			err = errorf("file index: file %d has %d slots in use, counted %d", rec.id, used, rec.used)
		}
		return err == nil
	})
	if err == nil && hints != x.hints {
		err = errorf("file index: %d hints, counted %d", hints, x.hints)
	}
	if err == nil && files+len(x.free) != max(int(x.n)-1, 0) {
		err = errorf("file index: %d files + %d free records, %d records", files, len(x.free), max(int(x.n)-1, 0))
	}
	return err
}
