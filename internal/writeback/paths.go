package writeback

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// What happens to dirty files when their names change or go, and when
// they are truncated.

// Opened counts an open file of ino here; Released uncounts it. A dirty
// file removed while open here becomes an orphan (Removed); a proxy, which
// keeps no orphans, counts nothing.
func (e *Engine) Opened(ino uint64) {
	e.mu.Lock()
	e.opens[ino]++
	e.mu.Unlock()
}

// Released uncounts an open file of ino; the last one of an orphan takes
// its data to the stale list.
func (e *Engine) Released(ino uint64) {
	e.mu.Lock()
	if e.opens[ino]--; e.opens[ino] <= 0 {
		delete(e.opens, ino)
	}
	df := e.files[ino]
	orphan := df != nil && df.path == "" && e.opens[ino] == 0
	e.mu.Unlock()
	if orphan {
		df.mu.Lock()
		if !df.gone {
			e.drop(df)
		}
		df.mu.Unlock()
	}
}

// Linked is called after newPath was made a hard link to oldPath: when
// oldPath names a dirty file, newPath is one more name it may be written
// back under.
func (e *Engine) Linked(oldPath, newPath string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, df := range e.files {
		if _, link := df.links[oldPath]; df.path == oldPath || link {
			if df.links == nil {
				df.links = map[string]struct{}{}
			}
			df.links[newPath] = struct{}{}
			return
		}
	}
}

// BeforeRemove is called before path is unlinked or renamed over. When
// path is the name a dirty file is written back under and the file has
// another name here, that one takes its place, journaled before path goes
// (a crash right after the removal writes the data back under a name that
// still exists). It returns the dirty file when path is its only name
// known here: the front end asks the upstream whether the file has other
// links and writes it back first if so (a name made elsewhere, which the
// data must reach).
func (e *Engine) BeforeRemove(path string) *File {
	df := lockLive(e.Find(path))
	if df == nil {
		return nil
	}
	defer df.mu.Unlock()
	e.mu.Lock()
	if df.path != path {
		e.mu.Unlock()
		return nil // one of its other names
	}
	if !e.promoteLocked(df) {
		e.mu.Unlock()
		return df
	}
	e.mu.Unlock()
	if err := e.record(df); err != nil {
		e.log.Warn("write-back: recording a dirty file's other name", "path", path, "err", err)
	}
	return nil
}

// promoteLocked makes one of df's other names the one it is written back
// under (the least, for a reproducible choice); false when it has none.
// Called with e.mu held.
func (e *Engine) promoteLocked(df *File) bool {
	if len(df.links) == 0 {
		return false
	}
	next := ""
	for l := range df.links {
		if next == "" || l < next {
			next = l
		}
	}
	delete(df.links, next)
	df.links[df.path] = struct{}{}
	df.path = next
	return true
}

// Removed is called after path was unlinked or renamed over. A dirty file
// that keeps another name here is written back under it; otherwise its
// dirty data is put on the stale list and never written back. A file still
// open here becomes an orphan: its open files keep reading and writing its
// data until the last one is closed, but it is never written back — its
// journal record loses its path, so a restart drops it too
// (wbjournal.Recover puts it on the stale list) — and its delegation goes
// back.
func (e *Engine) Removed(path string) {
	df := lockLive(e.Find(path))
	if df == nil {
		return
	}
	defer df.mu.Unlock()
	e.mu.Lock()
	if _, link := df.links[path]; link {
		delete(df.links, path)
		e.mu.Unlock()
		return
	}
	if e.promoteLocked(df) {
		delete(df.links, path)
		e.mu.Unlock()
		if err := e.record(df); err != nil {
			e.log.Warn("write-back: recording a dirty file's other name", "path", path, "err", err)
		}
		return
	}
	open := e.opens[df.ino] > 0
	if open {
		df.path = ""
	}
	e.mu.Unlock()
	if !open {
		e.drop(df)
		return
	}
	if err := e.record(df); err != nil {
		e.log.Warn("write-back: recording a removed file that is still open", "path", path, "err", err)
	}
	e.giveBack(df.ino)
}

// drop puts df on the stale list and forgets it. Called with df.mu held.
func (e *Engine) drop(df *File) {
	if err := e.disk.MarkStale(df.ino); err != nil {
		e.log.Warn("write-back: putting a removed file on the stale list", "file", df.ino, "err", err)
	}
	e.mem.RemoveFile(df.ino)
	e.forget(df)
}

// Moved returns where path is after oldPath was renamed to newPath, and
// whether it moved (it is oldPath or below it).
func Moved(path, oldPath, newPath string) (string, bool) {
	if path == oldPath || strings.HasPrefix(path, oldPath+"/") {
		return newPath + path[len(oldPath):], true
	}
	return path, false
}

// renameExchange is RENAME_EXCHANGE.
const renameExchange = 2

// Renames returns the moves a rename of oldPath to newPath with flags
// makes, in order, for a front end that keeps paths of its own (open
// files, handles): one, or three for an exchange (through a name no file
// has).
func Renames(oldPath, newPath string, flags uint32) [][2]string {
	if flags&renameExchange != 0 {
		const tmp = "\x00exchange"
		return [][2]string{{oldPath, tmp}, {newPath, oldPath}, {tmp, newPath}}
	}
	return [][2]string{{oldPath, newPath}}
}

// AfterRename updates the dirty files after a rename: one renamed over is
// stale (Removed), the ones moved are written back to their new paths.
func (e *Engine) AfterRename(oldPath, newPath string, flags uint32) {
	if flags&renameExchange == 0 {
		e.Removed(newPath)
	}
	for _, mv := range Renames(oldPath, newPath, flags) {
		e.renamed(mv[0], mv[1])
	}
}

// RenameLock is held by a rename through the front end while the upstream
// renames and the dirty files follow (AfterRename); it returns the unlock.
func (e *Engine) RenameLock() func() {
	e.renaming.RLock()
	return e.renaming.RUnlock
}

// renamed moves the dirty files at or under oldPath to newPath.
func (e *Engine) renamed(oldPath, newPath string) {
	e.mu.Lock()
	var moved []*File
	for _, df := range e.files {
		p, ok := Moved(df.path, oldPath, newPath)
		if ok {
			df.path = p
			moved = append(moved, df)
		}
		if len(df.links) > 0 {
			links := make(map[string]struct{}, len(df.links))
			for l := range df.links {
				l, _ = Moved(l, oldPath, newPath)
				links[l] = struct{}{}
			}
			df.links = links
		}
	}
	e.mu.Unlock()
	for _, df := range moved {
		df.mu.Lock()
		if !df.gone {
			if err := e.record(df); err != nil {
				e.log.Warn("write-back: recording a renamed file", "path", newPath, "err", err)
			}
		}
		df.mu.Unlock()
	}
}

// Discard drops file ino's dirty data (an open with O_TRUNC emptied it
// upstream).
func (e *Engine) Discard(ino uint64) {
	df := lockLive(e.File(ino))
	if df == nil {
		return
	}
	defer df.mu.Unlock()
	if err := e.disk.Truncate(ino, 0); err != nil {
		e.log.Warn("write-back: dropping a truncated file's dirty data", "file", ino, "err", err)
	}
	e.mem.RemoveFile(ino)
	e.forget(df)
}

// forget drops df from the dirty files and the journal and returns its
// delegation. Called with df.mu held.
//
// The record goes before the delegation does, and the return is not
// waited for: an engine killed in between leaves the upstream holding the
// file as an orphan of this client's name, which the next Start releases
// (it declares every file it still holds, then DelegateReturn of
// wire.SettledIno, deleg.go).
func (e *Engine) forget(df *File) {
	df.gone = true
	e.mu.Lock()
	if e.files[df.ino] == df {
		delete(e.files, df.ino)
	}
	e.leftLocked(df.ino)
	e.dirty -= df.bytes
	e.frames -= int64(len(df.blocks))
	e.mu.Unlock()
	if err := e.journal.Delete(df.ino); err != nil {
		e.log.Warn("write-back: journal", "err", err)
	}
	e.giveBack(df.ino)
}

// PrepareSetAttr prepares a mount's setattr of dirty file df. A truncation
// drops the dirty data past the new size and writes the rest back, so the
// upstream truncates the data the writer saw (and a later write-back
// cannot undo it); so does a mode that takes the owner's write permission
// away (the write-back needs it). Times set explicitly (touch, tar) are
// kept and set again after the write-back, which would change them
// upstream. Other changes (owner, mode) go upstream as they are. (A proxy
// writes a dirty file back before any setattr: it relays the setattr as
// it is.)
func (e *Engine) PrepareSetAttr(ctx context.Context, df *File, in vfs.SetAttrIn) error {
	if in.Valid&wire.SetSize != 0 {
		if err := e.truncate(df, int64(in.Size)); err != nil {
			return err
		}
	}
	if in.Valid&wire.SetSize != 0 || (in.Valid&wire.SetMode != 0 && in.Mode&0o200 == 0) {
		_, err := e.FlushFile(ctx, df)
		return err
	}
	if tv := in.Valid & (wire.SetAtime | wire.SetMtime | wire.SetAtimeNow | wire.SetMtimeNow); tv != 0 {
		now := time.Now().UnixNano()
		e.mu.Lock()
		t := df.times
		if t == nil {
			t = &wire.SetAttr{}
		}
		if tv&(wire.SetAtime|wire.SetAtimeNow) != 0 {
			t.Valid, t.Atime = t.Valid&^(wire.SetAtimeNow)|wire.SetAtime, in.Atime
			if tv&wire.SetAtimeNow != 0 {
				t.Atime = now
			}
		}
		if tv&(wire.SetMtime|wire.SetMtimeNow) != 0 {
			t.Valid, t.Mtime = t.Valid&^(wire.SetMtimeNow)|wire.SetMtime, in.Mtime
			if tv&wire.SetMtimeNow != 0 {
				t.Mtime = now
			}
		}
		df.times = t
		e.mu.Unlock()
	}
	return nil
}

// truncate drops df's dirty data past size.
func (e *Engine) truncate(df *File, size int64) error {
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.gone {
		return nil
	}
	if err := e.disk.Truncate(df.ino, size); err != nil {
		return fmt.Errorf("write-back: truncate file %d: %v: %w", df.ino, err, syscall.EIO)
	}
	e.mem.RemoveFile(df.ino)
	bs := int64(e.disk.BlockSize())
	var freed, gone int64
	for idx, b := range df.blocks {
		start, n := int64(idx)*bs, int64(b.n)
		switch {
		case start >= size:
			delete(df.blocks, idx)
			freed += n
			gone++
		case start+n > size:
			df.gen++
			df.blocks[idx] = dirtyBlock{n: int(size - start), gen: df.gen}
			freed += start + n - size
		}
	}
	e.mu.Lock()
	df.bytes -= freed
	e.dirty -= freed
	e.frames -= gone
	df.size = min(df.size, size)
	e.mu.Unlock()
	return nil
}
