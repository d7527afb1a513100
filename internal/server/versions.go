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
}

func newVersions(boot uint64, onChange func(ino uint64)) *versions {
	if onChange == nil {
		onChange = func(uint64) {}
	}
	return &versions{next: boot, files: make(map[uint64]*fileState), onChange: onChange}
}

// observe returns the version of the file st describes, starting a new
// version if its size, mtime or ctime differ from what was last seen.
func (v *versions) observe(st *syscall.Stat_t) uint64 {
	v.mu.Lock()
	f := v.files[st.Ino]
	mt, ct := st.Mtim.Nano(), st.Ctim.Nano()
	known := f != nil
	if !known {
		f = &fileState{}
		v.files[st.Ino] = f
	} else if f.size == st.Size && f.mtime == mt && f.ctime == ct {
		ver := f.version // read under mu: another observe may rewrite *f
		v.mu.Unlock()
		return ver
	}
	v.next++
	*f = fileState{version: v.next, size: st.Size, mtime: mt, ctime: ct}
	ver := f.version
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

// bump starts a new version of the file st describes, whatever its stat
// says: a write through the server may leave mtime unchanged when it lands
// within the file system's timestamp granularity.
func (v *versions) bump(st *syscall.Stat_t) uint64 {
	v.mu.Lock()
	v.next++
	ver := v.next
	v.files[st.Ino] = &fileState{version: ver, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
	dropped := v.bound(st.Ino)
	v.mu.Unlock()
	v.onChange(st.Ino)
	for _, ino := range dropped {
		v.onChange(ino)
	}
	return ver
}

// forget drops a file that no longer exists.
func (v *versions) forget(ino uint64) {
	v.mu.Lock()
	delete(v.files, ino)
	v.mu.Unlock()
}

// bound forgets files past max, at random (Go's map iteration order), never
// keep, and returns them (v.mu held). A forgotten file gets a new version
// when it is seen again: its clients drop what they cached, which is safe.
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
