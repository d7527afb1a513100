package server

import (
	"sync"
	"syscall"
)

// versions assigns every file a version that changes whenever its content
// does. Versions come from one counter that starts at the server's boot
// time in nanoseconds, so they only grow — per file and across restarts —
// and a version handed out before a restart never matches one after it.
//
// INVARIANT: for every file, successive versions are strictly increasing.
type versions struct {
	mu    sync.Mutex
	next  uint64
	files map[uint64]*fileState
}

// fileState is what the version of one file was derived from.
type fileState struct {
	version      uint64
	size         int64
	mtime, ctime int64
}

func newVersions(boot uint64) *versions {
	return &versions{next: boot, files: make(map[uint64]*fileState)}
}

// observe returns the version of the file st describes, starting a new
// version if its size, mtime or ctime differ from what was last seen.
func (v *versions) observe(st *syscall.Stat_t) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.files[st.Ino]
	mt, ct := st.Mtim.Nano(), st.Ctim.Nano()
	if f == nil {
		f = &fileState{}
		v.files[st.Ino] = f
	} else if f.size == st.Size && f.mtime == mt && f.ctime == ct {
		return f.version
	}
	v.next++
	*f = fileState{version: v.next, size: st.Size, mtime: mt, ctime: ct}
	return f.version
}

// bump starts a new version of the file st describes, whatever its stat
// says: a write through the server may leave mtime unchanged when it lands
// within the file system's timestamp granularity.
func (v *versions) bump(st *syscall.Stat_t) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.next++
	v.files[st.Ino] = &fileState{version: v.next, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
	return v.next
}

// forget drops a file that no longer exists.
func (v *versions) forget(ino uint64) {
	v.mu.Lock()
	delete(v.files, ino)
	v.mu.Unlock()
}
