package server

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/coopfs/coopfs/internal/wire"
)

// openFile is one client's open file.
type openFile struct {
	f         *os.File
	ino       uint64
	owner     *wire.Conn
	appending bool // opened O_APPEND (exactly-once appends: drc.go)
	writable  bool // opened for writing (write delegations: recall.go)
	// writeOnly: opened O_WRONLY. Its blocks are never served, from the
	// export (the kernel refuses the pread) or from the server's memory
	// and the policies' caches, which hold what readers brought in.
	writeOnly bool
	// opener is who opened it, when writes through it must clear set-id
	// bits as the kernel would for that caller (killPrivOnWrite); nil
	// when the opener holds CAP_FSETID or the server is not root.
	opener *identity
	// lastRead is the index after the block last read through the
	// handle (0: none), for the server's read-ahead (readahead.go).
	lastRead atomic.Uint64
	advised  atomic.Int64 // the end of the range last advised for a sequential reader
}

// handles maps handle numbers to open files. Handles belong to the
// connection that opened them and are closed when it goes away.
//
// INVARIANT: count[c] is the number of handles in m owned by c;
// byAddr[a] the number owned by connections from address a; len(m) is at
// most maxTotal.
// INVARIANT: nwrote[c] is the number of keys of wrote with connection c.
type handles struct {
	maxPerAddr, maxTotal int // caps across connections (Limits); 0: none

	mu     sync.Mutex
	next   uint64
	m      map[uint64]*openFile
	count  map[*wire.Conn]int
	byAddr map[string]int
	// wrote: the files each connection opened for writing, while it lasts
	// (at most maxWroteFiles each): write delegations are granted on them.
	wrote  map[connFile]struct{}
	nwrote map[*wire.Conn]int
}

// connFile is a file opened by a connection.
type connFile struct {
	c   *wire.Conn
	ino uint64
}

// maxWroteFiles bounds the files a connection is remembered to have
// opened for writing (16 bytes each); past it a delegation of a file it
// no longer holds open needs the file's path (recall.go).
const maxWroteFiles = 1 << 16

func newHandles() *handles {
	return &handles{m: make(map[uint64]*openFile), count: make(map[*wire.Conn]int), byAddr: make(map[string]int),
		wrote: make(map[connFile]struct{}), nwrote: make(map[*wire.Conn]int)}
}

// add registers an open file, unless its connection already holds max
// handles, or its address or the server its caps: then it returns 0 and
// the caller closes the file.
func (h *handles) add(of *openFile, max int) uint64 {
	ip := ownerIP(of.owner)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count[of.owner] >= max || (h.maxPerAddr > 0 && h.byAddr[ip] >= h.maxPerAddr) ||
		(h.maxTotal > 0 && len(h.m) >= h.maxTotal) {
		return 0
	}
	h.count[of.owner]++
	if k := (connFile{of.owner, of.ino}); of.writable && h.nwrote[of.owner] < maxWroteFiles {
		if _, ok := h.wrote[k]; !ok {
			h.wrote[k] = struct{}{}
			h.nwrote[of.owner]++
		}
	}
	h.byAddr[ip]++
	h.next++
	h.m[h.next] = of
	return h.next
}

func ownerIP(c *wire.Conn) string {
	if c == nil {
		return ""
	}
	return c.RemoteIP()
}

// drop forgets handle n (h.mu held).
func (h *handles) drop(n uint64, of *openFile) {
	delete(h.m, n)
	if h.count[of.owner]--; h.count[of.owner] <= 0 {
		delete(h.count, of.owner)
	}
	ip := ownerIP(of.owner)
	if h.byAddr[ip]--; h.byAddr[ip] <= 0 {
		delete(h.byAddr, ip)
	}
}

// get returns the open file of handle n if owner opened it.
func (h *handles) get(n uint64, owner *wire.Conn) *openFile {
	h.mu.Lock()
	defer h.mu.Unlock()
	of := h.m[n]
	if of == nil || of.owner != owner {
		return nil
	}
	return of
}

func (h *handles) release(n uint64, owner *wire.Conn) bool {
	h.mu.Lock()
	of := h.m[n]
	if of == nil || of.owner != owner {
		h.mu.Unlock()
		return false
	}
	h.drop(n, of)
	h.mu.Unlock()
	of.f.Close()
	return true
}

// openedForWriting reports whether c opened file ino for writing on this
// connection (one of the first maxWroteFiles files it did).
func (h *handles) openedForWriting(c *wire.Conn, ino uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.wrote[connFile{c, ino}]
	return ok
}

// releaseOwner closes every handle of a connection and returns how many.
func (h *handles) releaseOwner(owner *wire.Conn) int {
	h.mu.Lock()
	if h.nwrote[owner] > 0 {
		for k := range h.wrote {
			if k.c == owner {
				delete(h.wrote, k)
			}
		}
		delete(h.nwrote, owner)
	}
	var fs []*os.File
	for n, of := range h.m {
		if of.owner == owner {
			fs = append(fs, of.f)
			h.drop(n, of)
		}
	}
	h.mu.Unlock()
	for _, f := range fs {
		f.Close()
	}
	return len(fs)
}

func (h *handles) closeAll() {
	h.mu.Lock()
	m := h.m
	h.m = make(map[uint64]*openFile)
	h.count = make(map[*wire.Conn]int)
	h.wrote, h.nwrote = make(map[connFile]struct{}), make(map[*wire.Conn]int)
	h.byAddr = make(map[string]int)
	h.mu.Unlock()
	for _, of := range m {
		of.f.Close()
	}
}

// newOpenFile is the open file of a handle about to be added, opened with
// flags on the calling thread, which acts as the opener (identity.go).
func (s *Server) newOpenFile(f *os.File, ino uint64, owner *wire.Conn, flags uint32) *openFile {
	of := &openFile{f: f, ino: ino, owner: owner, appending: flags&syscall.O_APPEND != 0,
		writable: flags&syscall.O_ACCMODE != syscall.O_RDONLY, writeOnly: flags&syscall.O_ACCMODE == syscall.O_WRONLY}
	if of.writable && s.switchCreds {
		if id := threadIdentity(); id.uid != 0 {
			of.opener = &id
		}
	}
	return of
}
