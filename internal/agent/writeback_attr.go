package agent

import (
	"context"
	"errors"

	"github.com/coopfs/coopfs/internal/wire"
)

// Attributes of a file with dirty data here.
//
// While a file is dirty here the server's size and mtime of it are behind
// (its last blocks may not have arrived yet): every attribute the agent
// hands out passes through overlay, which puts in what the writer sees. An
// answer the server gave while a write-back was under way, but that
// arrives after the write-back finished, is the dangerous one: the file is
// no longer dirty, so nothing corrects it, and the kernel would take the
// size from the middle of the write-back (a short read, an old fstat).
// Every such question is therefore asked against a mark: when the file
// left the dirty set after the mark (written back, dropped or removed),
// the answer is thrown away and the server asked again (settledAttr); a
// block read from the server is read again (file.fetch).

// settleTries bounds how often a question is asked again because the file
// finished a write-back meanwhile; the last answer is taken as it is.
const settleTries = 4

// maxLeft bounds the files remembered as having left the dirty set; past
// it the memory is cleared and older marks count as unsettled.
const maxLeft = 4096

// errUnsettled: a block read from the server while the file was being
// written back here; it is read again.
var errUnsettled = errors.New("the file finished a write-back during the read")

// mark returns the current epoch, to be passed to steady or overlaySince
// once the server answered.
func (w *writeBack) mark() uint64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.epoch
}

// leftLocked records that file ino left the dirty set. Called with w.mu held.
func (w *writeBack) leftLocked(ino uint64) {
	w.epoch++
	if len(w.left) >= maxLeft {
		clear(w.left)
		w.floor = w.epoch - 1
	}
	w.left[ino] = w.epoch
}

// steadyLocked reports whether file ino has not left the dirty set since
// mark. Called with w.mu held.
func (w *writeBack) steadyLocked(ino, mark uint64) bool {
	return mark >= w.floor && w.left[ino] <= mark
}

// steady reports whether file ino has not left the dirty set since mark:
// an answer of the server about it taken after the mark is not from the
// middle of a write-back that has finished since.
func (w *writeBack) steady(ino, mark uint64) bool {
	if w == nil {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.steadyLocked(ino, mark)
}

// overlay replaces the server's size and mtime of a file with dirty data
// by what the writer sees here.
func (w *writeBack) overlay(at *wire.Attr) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.overlayLocked(at)
	w.mu.Unlock()
}

// overlaySince is overlay of an answer the server gave after mark; it
// reports false when the answer cannot be trusted: the file is not dirty
// now but left the dirty set since the mark.
func (w *writeBack) overlaySince(at *wire.Attr, mark uint64) bool {
	if w == nil {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.overlayLocked(at) || w.steadyLocked(at.Ino, mark)
}

// overlayLocked overlays at and reports whether the file is dirty here.
// Called with w.mu held.
func (w *writeBack) overlayLocked(at *wire.Attr) bool {
	df, ok := w.files[at.Ino]
	if !ok {
		return false
	}
	// While dirty, only this writer changes the file: its size is at
	// least the server's (a truncation is written back first).
	at.Size, at.Version = max(at.Size, uint64(df.size)), df.version
	at.Blocks = (at.Size + 511) / 512
	switch {
	case df.times != nil && df.times.Valid&(wire.SetMtime|wire.SetMtimeNow) != 0:
		at.Mtime = df.times.Mtime // set explicitly (touch, tar): it stands
	case df.mtime > at.Mtime:
		at.Mtime = df.mtime
	}
	if df.times != nil && df.times.Valid&(wire.SetAtime|wire.SetAtimeNow) != 0 {
		at.Atime = df.times.Atime
	}
	if df.mtime > at.Ctime {
		at.Ctime = df.mtime
	}
	return true
}

// sized makes every open file of at.Ino see its size and version after a
// write-back or a truncation, so that the next write there starts from the
// file's real size.
func (w *writeBack) sized(at wire.Attr, old uint64) {
	if w == nil || at.Ino == 0 || at.Version == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for f := range w.open {
		f.mu.Lock()
		if f.attr.Ino == at.Ino && f.attr.Version == old {
			f.attr.Version, f.attr.Size = at.Version, at.Size
		}
		f.mu.Unlock()
	}
}

// settledAttr gets a file's attributes from the server with ask and
// overlays this client's dirty data. An answer the server gave while the
// file was being written back here is replaced by again's (ask's when nil).
func (a *Agent) settledAttr(ask, again func() (wire.Attr, error)) (wire.Attr, error) {
	if again == nil {
		again = ask
	}
	mark := a.wb.mark()
	at, err := ask()
	for try := 0; err == nil && !a.wb.overlaySince(&at, mark) && try < settleTries; try++ {
		mark = a.wb.mark()
		at, err = again()
	}
	return at, err
}

// getAttr asks the server for path's attributes.
func (a *Agent) getAttr(ctx context.Context, path string) func() (wire.Attr, error) {
	return func() (wire.Attr, error) { return a.attrCall(ctx, &wire.GetAttr{Path: path}, true) }
}
