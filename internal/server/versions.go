package server

import (
	"encoding/binary"
	"hash/fnv"
	"sync"
	"syscall"
)

// versions assigns every file a version that changes whenever its content
// does, and that survives a server restart while the file does not change
// (clients' disk caches keep hitting after a restart).
//
// A file seen in a new state (size, mtime, ctime, as stat reports them)
// gets the version derived from that state and its inode number (derive):
// the same state gives the same version in every run of the server, and a
// change through the server or directly in the export changes ctime at
// least, hence the version. One case needs more: a write through the
// server within the file system's timestamp granularity, which may leave
// the stat as it was, or as it was a moment ago. Server.changed then moves
// the file's mtime on by a few nanoseconds (nudge), which gives it a state
// never seen; where it may not
// (the writer does not own the file), the file gets a version from a
// counter that starts at the server's boot time (below derived versions,
// whose top bit is set) — such a version does not survive a restart, and
// after one the file is known by its derived version again.
//
// Versions are compared for equality only (a client's block is of the
// version asked, or it is not).
type versions struct {
	mu       sync.Mutex
	next     uint64
	files    map[uint64]*fileState
	onChange func(ino uint64) // called, unlocked, when a known file gets a new version
	max      int              // files remembered at most; 0: no bound (limits.go MaxFiles)
}

// fileState is what the version of one file was derived from.
type fileState struct {
	version      uint64
	size         int64
	mtime, ctime int64
	// hiCtime is the latest ctime of every state seen, hiMtime the latest
	// mtime among the states seen with that ctime: a state past them was
	// never seen. A stat taken before a write through the server and
	// observed after it (getattr and the export's watcher stat outside
	// v.mu) is not past them, and must not get the derived version of that
	// older state back: clients may hold that version's blocks, of other
	// content than the file has now (the stale reads of write-back with
	// callbacks). Such a state gets a fresh counter version instead.
	hiCtime, hiMtime int64
}

// fresh reports whether st's state is past every state seen of f's file.
func (f *fileState) fresh(st *syscall.Stat_t) bool {
	ct, mt := st.Ctim.Nano(), st.Mtim.Nano()
	return ct > f.hiCtime || (ct == f.hiCtime && mt > f.hiMtime)
}

// record makes st's state, of version ver, f's last seen one.
func (f *fileState) record(st *syscall.Stat_t, ver uint64) {
	ct, mt := st.Ctim.Nano(), st.Mtim.Nano()
	switch {
	case ct > f.hiCtime:
		f.hiCtime, f.hiMtime = ct, mt
	case ct == f.hiCtime:
		f.hiMtime = max(f.hiMtime, mt)
	}
	f.version, f.size, f.mtime, f.ctime = ver, st.Size, mt, ct
}

// derivedBit marks derived versions; counter versions stay below it.
const derivedBit = 1 << 63

// derive is the version of a file in the state st describes: FNV-1a of
// the inode number, size, mtime and ctime, with the top bit set.
func derive(st *syscall.Stat_t) uint64 {
	h := fnv.New64a()
	var b [32]byte
	binary.LittleEndian.PutUint64(b[0:], st.Ino)
	binary.LittleEndian.PutUint64(b[8:], uint64(st.Size))
	binary.LittleEndian.PutUint64(b[16:], uint64(st.Mtim.Nano()))
	binary.LittleEndian.PutUint64(b[24:], uint64(st.Ctim.Nano()))
	h.Write(b[:])
	return h.Sum64() | derivedBit
}

func (f *fileState) same(st *syscall.Stat_t) bool {
	return f.size == st.Size && f.mtime == st.Mtim.Nano() && f.ctime == st.Ctim.Nano()
}

func newVersions(boot uint64, onChange func(ino uint64)) *versions {
	if onChange == nil {
		onChange = func(uint64) {}
	}
	return &versions{next: boot, files: make(map[uint64]*fileState), onChange: onChange}
}

// observe returns the version of the file st describes: the one last
// given out if its size, mtime and ctime are as last seen, else the
// version derived from its state.
func (v *versions) observe(st *syscall.Stat_t) uint64 {
	v.mu.Lock()
	f := v.files[st.Ino]
	known := f != nil
	ver := derive(st)
	if !known {
		f = &fileState{}
		v.files[st.Ino] = f
	} else if f.same(st) {
		ver = f.version // read under mu: another observe may rewrite *f
		v.mu.Unlock()
		return ver
	} else if !f.fresh(st) {
		v.next++
		ver = v.next
	}
	f.record(st, ver)
	dropped := v.bound(st.Ino)
	v.mu.Unlock()
	if known {
		v.onChange(st.Ino)
	}
	for _, ino := range dropped {
		v.onChange(ino)
	}
	return ver
}

// changed observes st and reports whether it describes another state
// than the one last seen (a file never seen counts as changed).
func (v *versions) changed(st *syscall.Stat_t) bool {
	v.mu.Lock()
	f := v.files[st.Ino]
	same := f != nil && f.same(st)
	v.mu.Unlock()
	if !same {
		v.observe(st)
	}
	return !same
}

// nudge reports whether a write through the server that left its file as
// st describes needs the file's mtime moved on, and to what: when ctime
// did not advance past the last state seen (a write within the timestamp
// granularity), st's state may be one this file had a moment ago, whose
// version clients may hold. The new mtime is past every mtime given out
// within that tick, so every state of the tick is new.
func (v *versions) nudge(st *syscall.Stat_t) (int64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.files[st.Ino]
	if f == nil || st.Ctim.Nano() > f.hiCtime {
		return 0, false
	}
	return max(st.Mtim.Nano(), f.hiMtime) + 1, true
}

// bump starts a new version of the file st describes after a write
// through the server: the derived version of its new state, or, when the
// write left the stat as it was, a counter version.
func (v *versions) bump(st *syscall.Stat_t) uint64 {
	v.mu.Lock()
	ver := derive(st)
	f := v.files[st.Ino]
	if f == nil {
		f = &fileState{}
		v.files[st.Ino] = f
	} else if !f.fresh(st) {
		v.next++
		ver = v.next
	}
	f.record(st, ver)
	dropped := v.bound(st.Ino)
	v.mu.Unlock()
	v.onChange(st.Ino)
	for _, ino := range dropped {
		v.onChange(ino)
	}
	return ver
}

// current is the version last given out for file ino (0: none known: the
// file left the table, or was never seen).
func (v *versions) current(ino uint64) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if f := v.files[ino]; f != nil {
		return f.version
	}
	return 0
}

// forget drops a file that no longer exists.
func (v *versions) forget(ino uint64) {
	v.mu.Lock()
	delete(v.files, ino)
	v.mu.Unlock()
}

// bound forgets files past max, at random (Go's map iteration order), never
// keep, and returns them (v.mu held). A forgotten file gets its derived
// version when it is seen again (a new one if it had a counter version).
func (v *versions) bound(keep uint64) []uint64 {
	if v.max <= 0 || len(v.files) <= v.max {
		return nil
	}
	var dropped []uint64
	for ino := range v.files {
		if len(v.files) <= v.max {
			break
		}
		if ino != keep {
			delete(v.files, ino)
			dropped = append(dropped, ino)
		}
	}
	return dropped
}
