package server

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// Directory listings are paged (ReadDir carries the number of entries the
// client already has). Re-reading the directory for every page would make
// a listing of N entries cost O(N²/page); instead the server keeps the open
// directory between pages, a cursor per (connection, path, offset), and
// goes on reading where the last page ended, so a whole listing costs O(N).
// A page asked at an offset no cursor is at (a cursor evicted, a listing
// restarted) opens the directory again and skips to it: slower, same
// entries.

// dirCursor is a directory being listed.
type dirCursor struct {
	path string
	f    *os.File
	next uint64 // entries handed out so far
	used time.Time
}

// dirCursors is every connection's cursors, at most max per connection
// (the least recently used is closed first).
type dirCursors struct {
	mu   sync.Mutex
	max  int
	m    map[*wire.Conn][]*dirCursor
	read uint64 // entries read from the export, for tests and metrics
}

func newDirCursors(max int) *dirCursors {
	return &dirCursors{max: max, m: make(map[*wire.Conn][]*dirCursor)}
}

// take removes and returns c's cursor of path at offset, if there is one.
func (d *dirCursors) take(c *wire.Conn, path string, offset uint64) *dirCursor {
	d.mu.Lock()
	defer d.mu.Unlock()
	cs := d.m[c]
	for i, cur := range cs {
		if cur.path == path && cur.next == offset {
			d.m[c] = append(cs[:i], cs[i+1:]...)
			return cur
		}
	}
	return nil
}

// put keeps a cursor for the next page, closing the least recently used
// one past the cap.
func (d *dirCursors) put(c *wire.Conn, cur *dirCursor) {
	cur.used = time.Now()
	d.mu.Lock()
	cs := append(d.m[c], cur)
	var evicted *dirCursor
	if len(cs) > d.max {
		oldest := 0
		for i, x := range cs {
			if x.used.Before(cs[oldest].used) {
				oldest = i
			}
		}
		evicted = cs[oldest]
		cs = append(cs[:oldest], cs[oldest+1:]...)
	}
	d.m[c] = cs
	d.mu.Unlock()
	if evicted != nil {
		evicted.f.Close()
	}
}

func (d *dirCursors) counted(n int) {
	d.mu.Lock()
	d.read += uint64(n)
	d.mu.Unlock()
}

// dropConn closes a connection's cursors.
func (d *dirCursors) dropConn(c *wire.Conn) {
	d.mu.Lock()
	cs := d.m[c]
	delete(d.m, c)
	d.mu.Unlock()
	for _, cur := range cs {
		cur.f.Close()
	}
}

func (d *dirCursors) closeAll() {
	d.mu.Lock()
	m := d.m
	d.m = make(map[*wire.Conn][]*dirCursor)
	d.mu.Unlock()
	for _, cs := range m {
		for _, cur := range cs {
			cur.f.Close()
		}
	}
}

// readDir serves one page of a directory listing.
func (s *Server) readDir(c *wire.Conn, m *wire.ReadDir) (*wire.ReadDirReply, error) {
	r := &wire.ReadDirReply{}
	more, err := s.statPage(c, m.Path, m.Offset, func(fd int, ents []os.DirEntry) {
		r.Entries = make([]wire.DirEntry, 0, len(ents))
		for _, e := range ents {
			var st unix.Stat_t
			if unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue // removed since the listing
			}
			r.Entries = append(r.Entries, wire.DirEntry{Name: e.Name(), Ino: st.Ino, Mode: st.Mode})
		}
	})
	r.More = more
	return r, err
}

// readDirPlus serves one page of a directory listing with every entry's
// attributes: one statx per entry relative to the open directory (as the
// caller, like the Lookup it replaces), none by path.
func (s *Server) readDirPlus(c *wire.Conn, m *wire.ReadDirPlus) (*wire.ReadDirPlusReply, error) {
	r := &wire.ReadDirPlusReply{}
	more, err := s.statPage(c, m.Path, m.Offset, func(fd int, ents []os.DirEntry) {
		r.Entries = make([]wire.DirEntryPlus, 0, len(ents))
		for _, e := range ents {
			de := wire.DirEntryPlus{DirEntry: wire.DirEntry{Name: e.Name(), Mode: uint32(direntType(e.Type()))}}
			var stx unix.Statx_t
			err := unix.Statx(fd, e.Name(), unix.AT_SYMLINK_NOFOLLOW,
				unix.STATX_BASIC_STATS|unix.STATX_BTIME, &stx)
			switch {
			case errors.Is(err, syscall.ENOENT):
				continue // removed since the listing
			case err == nil:
				st := statxStat(&stx)
				de.HasAttr, de.Attr = true, s.attrOfStat(&st)
				de.Attr.Gen = genOf(&stx)
				de.Ino, de.Mode = de.Attr.Ino, de.Attr.Mode
			}
			// Any other error (EACCES: the caller may not search the
			// directory): the entry goes without attributes, and the
			// client's lookup of it gets the error.
			r.Entries = append(r.Entries, de)
		}
	})
	r.More = more
	return r, err
}

// statPage reads the page of directory path at offset and calls stat with
// the open directory's descriptor and the page's entries, so that each
// entry is looked at relative to it (never by a path walk); it returns
// whether more pages follow. Past the end it calls nothing and returns
// false.
func (s *Server) statPage(c *wire.Conn, path string, offset uint64, stat func(fd int, ents []os.DirEntry)) (bool, error) {
	cur, ents, err := s.readDirPage(c, path, offset)
	if err != nil || cur == nil {
		return false, err
	}
	rc, err := cur.f.SyscallConn()
	if err != nil {
		cur.f.Close()
		return false, err
	}
	if err := rc.Control(func(fd uintptr) { stat(int(fd), ents) }); err != nil {
		cur.f.Close()
		return false, err
	}
	more := len(ents) == readDirPage
	s.donePage(c, cur, more)
	return more, nil
}

// readDirPage reads the page of directory path at offset from c's cursor
// (or a new one). A nil cursor and no error is the end of the directory.
func (s *Server) readDirPage(c *wire.Conn, path string, offset uint64) (*dirCursor, []os.DirEntry, error) {
	p, err := clean(path)
	if err != nil {
		return nil, nil, err
	}
	cur := s.dirs.take(c, p, offset)
	if cur == nil {
		if cur, err = s.openDir(p, offset); err != nil {
			return nil, nil, err
		}
	}
	ents, err := cur.f.ReadDir(readDirPage)
	s.dirs.counted(len(ents))
	if err != nil && len(ents) == 0 {
		cur.f.Close()
		if errors.Is(err, io.EOF) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	cur.next += uint64(len(ents))
	return cur, ents, nil
}

// donePage keeps the cursor for the next page, or closes it at the end.
func (s *Server) donePage(c *wire.Conn, cur *dirCursor, more bool) {
	if more {
		s.dirs.put(c, cur)
	} else {
		cur.f.Close()
	}
}

// direntType is the st_mode type bits of a directory entry's type.
func direntType(t os.FileMode) uint32 {
	switch {
	case t&os.ModeDir != 0:
		return syscall.S_IFDIR
	case t&os.ModeSymlink != 0:
		return syscall.S_IFLNK
	case t&os.ModeNamedPipe != 0:
		return syscall.S_IFIFO
	case t&os.ModeSocket != 0:
		return syscall.S_IFSOCK
	case t&os.ModeCharDevice != 0:
		return syscall.S_IFCHR
	case t&os.ModeDevice != 0:
		return syscall.S_IFBLK
	}
	return syscall.S_IFREG
}

// statxStat is the stat(2) view of a statx result.
func statxStat(x *unix.Statx_t) syscall.Stat_t {
	ts := func(t unix.StatxTimestamp) syscall.Timespec {
		return syscall.Timespec{Sec: t.Sec, Nsec: int64(t.Nsec)}
	}
	return syscall.Stat_t{
		Dev: unix.Mkdev(x.Dev_major, x.Dev_minor), Ino: x.Ino, Nlink: uint64(x.Nlink),
		Mode: uint32(x.Mode), Uid: x.Uid, Gid: x.Gid,
		Rdev: unix.Mkdev(x.Rdev_major, x.Rdev_minor), Size: int64(x.Size),
		Blksize: int64(x.Blksize), Blocks: int64(x.Blocks),
		Atim: ts(x.Atime), Mtim: ts(x.Mtime), Ctim: ts(x.Ctime),
	}
}

// openDir opens directory p and skips its first skip entries.
func (s *Server) openDir(p string, skip uint64) (*dirCursor, error) {
	f, err := s.openDirFile(p)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		f.Close()
		if err == nil {
			err = &os.PathError{Op: "readdir", Path: p, Err: syscall.ENOTDIR}
		}
		return nil, err
	}
	cur := &dirCursor{path: p, f: f}
	for cur.next < skip {
		ents, err := f.ReadDir(int(min(skip-cur.next, readDirPage)))
		s.dirs.counted(len(ents))
		cur.next += uint64(len(ents))
		if err != nil || len(ents) == 0 {
			break // past the end: the page will be empty
		}
	}
	return cur, nil
}
