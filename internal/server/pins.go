package server

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// Rename seen by others (issue 7 point 5). The protocol names files by
// path, and a client's kernel caches name → inode for a while. When another
// client renames a file over the name, the kernel's next open of the name
// reaches the old inode; the client answers ESTALE (the name now denotes
// another file), and the kernel walks the path again with a fresh lookup
// and opens once more. That second open still races with the next rename:
// the name may change again between the fresh lookup and the open.
//
// pins closes that window: the retry's fresh lookup (LookupPinned: the
// client sends it for a name whose open it just answered ESTALE) keeps an
// O_PATH descriptor of the regular file it found for a short while
// (pinTTL). The client sends the retry's open as OpenPinned with the (ino, gen) its fresh lookup
// returned, and when the name has moved on since, the server opens that
// very file: the open returns the file the kernel's own lookup found, as
// NFS opens the file handle its lookup returned. Only the retry after an
// ESTALE is sent this way, so every other open still revalidates by name
// (close-to-open).
//
// A pin is reopened through /proc/self/fd, which skips the search
// permission of the path's directories: only the identity whose lookup
// pinned the file (and so was allowed to search them, moments ago) may
// open it from its pin. The open itself runs as the caller: the file's own
// permissions are checked by the kernel as for any open.

// pinTTL is how long a lookup's file can be opened after the name moved:
// long enough for the kernel's lookup → open of a retry on a loaded
// machine, short enough that an open never returns a file replaced longer
// ago than that.
const pinTTL = 500 * time.Millisecond

// maxPins bounds the pinned descriptors (the oldest go first).
const maxPins = 256

type pinKey struct {
	ino, gen uint64
	who      string // the identity whose lookup pinned it (whoKey)
}

// whoKey names the identity the calling thread acts as (identity.go).
func whoKey() string {
	id := threadIdentity()
	return fmt.Sprint(id.uid, id.gid, id.groups)
}

type pin struct {
	f  *os.File
	at time.Time
}

// pins is the recently looked-up files.
//
// INVARIANT: len(order) == len(m), and order lists m's keys oldest first.
type pins struct {
	mu    sync.Mutex
	m     map[pinKey]pin
	order []pinKey
}

func newPins() *pins { return &pins{m: make(map[pinKey]pin)} }

// pin keeps f, a descriptor of the file a lookup found as a, if it is a
// regular file, and reports whether it did (else the caller closes f).
func (s *Server) pin(f *os.File, a wire.Attr) bool {
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return false
	}
	ps := s.pins
	k := pinKey{a.Ino, a.Gen, whoKey()}
	var drop []*os.File
	ps.mu.Lock()
	if old, ok := ps.m[k]; ok {
		drop = append(drop, old.f)
		ps.remove(k)
	}
	ps.m[k] = pin{f: f, at: time.Now()}
	ps.order = append(ps.order, k)
	for len(ps.order) > maxPins || (len(ps.order) > 0 && time.Since(ps.m[ps.order[0]].at) > pinTTL) {
		drop = append(drop, ps.m[ps.order[0]].f)
		delete(ps.m, ps.order[0])
		ps.order = ps.order[1:]
	}
	ps.mu.Unlock()
	for _, f := range drop {
		f.Close()
	}
	return true
}

// remove drops k from order (ps.mu held; the caller closes the file).
func (ps *pins) remove(k pinKey) {
	delete(ps.m, k)
	for i, o := range ps.order {
		if o == k {
			ps.order = append(ps.order[:i], ps.order[i+1:]...)
			return
		}
	}
}

// reopen opens the pinned file (ino, gen) read-only, if it was pinned
// less than pinTTL ago by the identity the calling thread acts as.
func (ps *pins) reopen(ino, gen uint64, flags uint32) (*os.File, bool) {
	k := pinKey{ino, gen, whoKey()}
	ps.mu.Lock()
	p, ok := ps.m[k]
	if !ok || time.Since(p.at) > pinTTL {
		ps.mu.Unlock()
		return nil, false
	}
	// Reopen through /proc while the pin is held, so its descriptor
	// cannot be closed and reused in between.
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(p.f.Fd())), int(flags)|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	ps.mu.Unlock()
	if err != nil {
		return nil, false
	}
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil || st.Ino != ino || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		f.Close()
		return nil, false
	}
	return f, true
}

// closeAll closes every pinned descriptor and returns how many.
func (ps *pins) closeAll() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	n := len(ps.m)
	for _, p := range ps.m {
		p.f.Close()
	}
	ps.m, ps.order = make(map[pinKey]pin), nil
	return n
}

// openPinned serves OpenPinned: the name's file if it is still the one the
// client knows, else the pinned one, else the name's file (the client sees
// that it differs and answers ESTALE).
func (s *Server) openPinned(c *wire.Conn, m *wire.OpenPinned) (*wire.OpenReply, error) {
	flags := m.Flags &^ (syscall.O_CREAT | syscall.O_EXCL | syscall.O_TRUNC)
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, fmt.Errorf("pinned open for writing: %w", syscall.EINVAL)
	}
	r, err := s.open(c, m.Path, flags, 0, nil, nil)
	if err == nil && r.Attr.Ino == m.Ino && r.Attr.Gen == m.Gen {
		return r, nil
	}
	f, ok := s.pins.reopen(m.Ino, m.Gen, flags)
	if !ok {
		return r, err
	}
	if err == nil {
		s.handles.release(r.Handle, c)
	}
	fi, serr := f.Stat()
	if serr != nil {
		f.Close()
		return r, err
	}
	a := s.fattr(f, fi)
	h := s.handles.add(s.newOpenFile(f, a.Attr.Ino, c, flags), s.cfg.Limits.MaxHandles)
	if h == 0 {
		f.Close()
		return nil, fmt.Errorf("open %s: this client already holds %d open files on the server: %w", m.Path, s.cfg.Limits.MaxHandles, syscall.EMFILE)
	}
	s.pinnedOpens.Add(1)
	return &wire.OpenReply{Handle: h, Attr: a.Attr, Cap: s.openCap(c, flags, &a.Attr)}, nil
}

// lookup is lstat that pins a regular file it finds (LookupPinned).
func (s *Server) lookup(p string) (*wire.AttrReply, error) {
	cp, err := clean(p)
	if err != nil {
		return nil, err
	}
	// The reply's attributes and the pin come from one descriptor: a stat
	// by name and an open by name could find two different files when the
	// name is renamed over in between.
	f, err := s.root.OpenFile(cp, unix.O_PATH|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		// Out of descriptors: answer the lookup without a pin.
		return s.lstat(cp)
	}
	if err != nil {
		return nil, err
	}
	r, err := s.fstat(f)
	if err != nil || !s.pin(f, r.Attr) {
		f.Close()
	}
	return r, err
}
