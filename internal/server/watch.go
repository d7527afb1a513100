package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// Changes made directly in the export (by programs other than the server)
// break callbacks too. The server watches, with inotify, every directory
// it handed out something of: a directory it granted a callback on, and
// the directory of every file it granted one on. Each event becomes a
// break, sent to every holder:
//
//   - an entry created, removed or renamed (IN_CREATE, IN_DELETE,
//     IN_MOVED_FROM/TO): the entry of the directory;
//   - a file written or its attributes changed (IN_MODIFY, IN_CLOSE_WRITE,
//     IN_ATTRIB): the file, if its stat (size, mtime, ctime) differs from
//     what the server last saw (versions.go) — so the events of the
//     server's own writes, whose result it recorded, break nothing;
//   - a directory's own attributes (IN_ATTRIB without a name): the
//     directory;
//   - a lost event queue (IN_Q_OVERFLOW): every callback of every client.
//
// The server's own namespace changes are announced (expect) before they
// are made and their events skipped: they were broken, except for their
// maker, before they were answered. How fast a direct change is noticed:
// inotify queues the event during the changing system call; the watcher
// reads it and sends the breaks at once, so holders hear of it a round
// trip later (docs/consistency.md has the measured figure).
//
// Grants on objects whose directory cannot be watched (the watch limit,
// fs.inotify.max_user_watches, is reached) are broken at once: those
// objects are not cached by clients.

// watchMask is what the watcher asks inotify for on each directory.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// expectTTL is how long an announced change of the server's own waits
// for its event.
const expectTTL = 2 * time.Second

type watchedDir struct {
	path string
	ino  uint64
}

type expectKey struct {
	dir  uint64
	name string
}

type expectation struct {
	n  int
	at time.Time
}

// watcher is the server's inotify watch of the directories it handed out.
type watcher struct {
	s   *Server
	log *slog.Logger
	f   *os.File

	mu       sync.Mutex
	byWd     map[int32]watchedDir
	byPath   map[string]int32
	expected map[expectKey]expectation
	writing  map[uint64]int // files the server is writing: their events are its own
	full     bool           // the watch limit was hit (logged once)
}

func newWatcher(s *Server) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &watcher{s: s, log: s.log, f: os.NewFile(uintptr(fd), "inotify"),
		byWd: make(map[int32]watchedDir), byPath: make(map[string]int32), expected: make(map[expectKey]expectation), writing: make(map[uint64]int)}
	go w.run()
	return w, nil
}

func (w *watcher) close() {
	if w != nil {
		w.f.Close()
	}
}

// watch makes sure directory p (relative to the export) is watched, and
// returns its inode number and whether it is. The directory is opened
// through the export's root (it cannot be outside the export) and watched
// through its descriptor.
func (w *watcher) watch(p string) (uint64, bool) {
	if w == nil {
		return 0, false
	}
	p, err := clean(p)
	if err != nil {
		return 0, false
	}
	w.mu.Lock()
	if wd, ok := w.byPath[p]; ok {
		ino := w.byWd[wd].ino
		w.mu.Unlock()
		return ino, true
	}
	w.mu.Unlock()
	f, err := w.s.openDirFile(p)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() {
		return 0, false
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	wd, err := unix.InotifyAddWatch(int(w.f.Fd()), "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), watchMask)
	if err != nil {
		w.mu.Lock()
		first := !w.full
		w.full = true
		w.mu.Unlock()
		if first {
			w.log.Warn("cannot watch a directory of the export (at fs.inotify.max_user_watches?): files in the directories not watched are not cached by clients", "dir", p, "err", err)
		}
		return ino, false
	}
	w.mu.Lock()
	if old, ok := w.byWd[int32(wd)]; ok && old.path != p {
		delete(w.byPath, old.path) // the directory was renamed
	}
	w.byWd[int32(wd)] = watchedDir{path: p, ino: ino}
	w.byPath[p] = int32(wd)
	w.mu.Unlock()
	return ino, true
}

// expect announces n events of the server's own on entry name of dir.
func (w *watcher) expect(dir uint64, name string, n int) {
	if w == nil || dir == 0 {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.expected) > 4096 {
		for k, e := range w.expected {
			if now.Sub(e.at) > expectTTL {
				delete(w.expected, k)
			}
		}
	}
	k := expectKey{dir, name}
	e := w.expected[k]
	w.expected[k] = expectation{n: e.n + n, at: now}
}

// busy notes that the server is about to change file ino in place (a
// write, a truncation, a setattr); idle that it is done and recorded the
// file's new state (versions.go). Events of a busy file are the server's
// own, and those that come later match the recorded state.
func (w *watcher) busy(ino uint64) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.writing[ino]++
	w.mu.Unlock()
}

func (w *watcher) idle(ino uint64) {
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.writing[ino]--; w.writing[ino] <= 0 {
		delete(w.writing, ino)
	}
	w.mu.Unlock()
}

func (w *watcher) isBusy(ino uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writing[ino] > 0
}

// expected consumes one announced event on entry name of dir.
func (w *watcher) consume(dir uint64, name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := expectKey{dir, name}
	e, ok := w.expected[k]
	if !ok || time.Since(e.at) > expectTTL {
		delete(w.expected, k)
		return false
	}
	if e.n--; e.n <= 0 {
		delete(w.expected, k)
	} else {
		w.expected[k] = e
	}
	return true
}

// run reads events until the watcher is closed.
func (w *watcher) run() {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.log.Error("export watch stopped: direct changes to the export are no longer noticed", "err", err)
			}
			return
		}
		all, items := w.parse(buf[:n])
		if all {
			w.log.Warn("export watch overflowed: breaking every callback")
			w.s.cbs.breakAll()
			continue
		}
		w.s.cbs.Break(context.Background(), dedupe(items), 0)
	}
}

// parse turns a batch of inotify events into breaks.
func (w *watcher) parse(b []byte) (overflow bool, items []wire.BreakItem) {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			break
		}
		name := string(b[unix.SizeofInotifyEvent:end])
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		b = b[end:]
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			return true, nil
		}
		w.mu.Lock()
		d, ok := w.byWd[ev.Wd]
		if ev.Mask&unix.IN_IGNORED != 0 && ok {
			delete(w.byWd, ev.Wd)
			if w.byPath[d.path] == ev.Wd {
				delete(w.byPath, d.path)
			}
		}
		w.mu.Unlock()
		if !ok || ev.Mask&unix.IN_IGNORED != 0 {
			continue
		}
		if it, ok := w.event(d, ev.Mask, name); ok {
			items = append(items, it)
		}
	}
	return false, items
}

// event is the break one event asks for, if any.
func (w *watcher) event(d watchedDir, mask uint32, name string) (wire.BreakItem, bool) {
	if name == "" {
		if mask&unix.IN_ATTRIB != 0 && !w.consume(d.ino, "") {
			return wire.BreakItem{Ino: d.ino}, true
		}
		return wire.BreakItem{}, false
	}
	if mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0 {
		if w.consume(d.ino, name) {
			return wire.BreakItem{}, false
		}
		return wire.BreakItem{Ino: d.ino, Name: name}, true
	}
	fi, err := w.s.lstatAny(path.Join(d.path, name))
	if err != nil {
		return wire.BreakItem{}, false // gone: its removal's event breaks it
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		if w.isBusy(st.Ino) || !w.s.versions.changed(st) {
			return wire.BreakItem{}, false // the server saw this state already
		}
		return wire.BreakItem{Ino: st.Ino}, true
	}
	if mask&unix.IN_ATTRIB == 0 || w.consume(d.ino, name) {
		return wire.BreakItem{}, false
	}
	return wire.BreakItem{Ino: st.Ino}, true
}

func dedupe(items []wire.BreakItem) []wire.BreakItem {
	if len(items) < 2 {
		return items
	}
	seen := make(map[wire.BreakItem]bool, len(items))
	out := items[:0]
	for _, it := range items {
		if !seen[it] {
			seen[it] = true
			out = append(out, it)
		}
	}
	return out
}
