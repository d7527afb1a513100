package fusefs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The umask of a create. The mount asks the kernel not to apply the
// caller's umask (DONT_MASK: the server applies it, or a parent's default
// ACL replaces it), so a create must carry it. The kernel sends it in
// every CREATE, MKDIR and MKNOD request, but go-fuse's node API passes on
// only the mode; reading it from /proc/<pid>/status instead cost three
// system calls and a parse per create, the largest part of the mount's
// own work in `tar x`. umaskRaw notes the request's umask under the
// calling thread's id before go-fuse calls the node, which finds it there
// (a thread has one system call in flight at a time, so the id is
// unambiguous for the call's duration).

// umasks is the umask of each create in flight, by calling thread.
type umasks struct {
	mu sync.Mutex
	m  map[uint32]uint32
}

func (u *umasks) set(tid, umask uint32) {
	u.mu.Lock()
	if u.m == nil {
		u.m = make(map[uint32]uint32)
	}
	u.m[tid] = umask
	u.mu.Unlock()
}

func (u *umasks) clear(tid uint32) {
	u.mu.Lock()
	delete(u.m, tid)
	u.mu.Unlock()
}

// get returns the umask of the create thread tid is making, if known.
func (u *umasks) get(tid uint32) (uint32, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.m[tid]
	return v, ok
}

// umaskRaw passes the umask of creates to the nodes (see above).
type umaskRaw struct {
	fuse.RawFileSystem
	u *umasks
}

func (r *umaskRaw) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	r.u.set(in.Caller.Pid, in.Umask)
	defer r.u.clear(in.Caller.Pid)
	return r.RawFileSystem.Create(cancel, in, name, out)
}

func (r *umaskRaw) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	r.u.set(in.Caller.Pid, in.Umask)
	defer r.u.clear(in.Caller.Pid)
	return r.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (r *umaskRaw) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	r.u.set(in.Caller.Pid, in.Umask)
	defer r.u.clear(in.Caller.Pid)
	return r.RawFileSystem.Mknod(cancel, in, name, out)
}
