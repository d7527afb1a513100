package agent

import (
	"context"
	"errors"

	"github.com/coopfs/coopfs/internal/wire"
)

// Attributes of a file with dirty data here (writeback.Engine.Overlay).
//
// While a file is dirty here every attribute the agent hands out carries
// the writer's size and mtime. An answer the server gave while a
// write-back was under way, but that arrives after it finished, would
// show a size from the middle of it: every such question is asked against
// a mark, and asked again when the file left the dirty set since
// (settledAttr); a block read from the server is read again (file.fetch).

// settleTries bounds how often a question is asked again because the file
// finished a write-back meanwhile; the last answer is taken as it is.
const settleTries = 4

// errUnsettled: a block read from the server while the file was being
// written back here; it is read again.
var errUnsettled = errors.New("the file finished a write-back during the read")

// mark returns the write-back's current epoch, to be passed to steady or
// overlaySince once the server answered.
func (w *writeBack) mark() uint64 {
	if w == nil {
		return 0
	}
	return w.e.Mark()
}

// steady reports whether file ino has not left the dirty set since mark.
func (w *writeBack) steady(ino, mark uint64) bool {
	return w == nil || w.e.Steady(ino, mark)
}

// overlaySince overlays this client's dirty data on an answer the server
// gave after mark; false when the answer cannot be trusted (the file left
// the dirty set since the mark).
func (w *writeBack) overlaySince(at *wire.Attr, mark uint64) bool {
	return w == nil || w.e.OverlaySince(at, mark)
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

// resized makes every open file of at.Ino see its size and version after
// a truncation by path (the kernel truncates at an open with O_TRUNC after
// the open, without naming the file it opened), whatever version they saw.
func (w *writeBack) resized(at wire.Attr) {
	if w == nil || at.Ino == 0 || at.Version == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for f := range w.open {
		f.mu.Lock()
		if f.attr.Ino == at.Ino {
			f.attr.Version, f.attr.Size = at.Version, at.Size
		}
		f.mu.Unlock()
	}
}
