package writeback

import "github.com/coopfs/coopfs/internal/wire"

// Attributes of a file with dirty data here.
//
// While a file is dirty here the upstream's size and mtime of it are
// behind (its last blocks may not have arrived yet): every attribute a
// front end hands out passes through Overlay, which puts in what the
// writer sees. An answer the upstream gave while a write-back was under
// way, but that arrives after the write-back finished, is the dangerous
// one: the file is no longer dirty, so nothing corrects it, and the reader
// would take the size from the middle of the write-back (a short read, an
// old fstat). A front end that can ask again therefore asks against a
// Mark: when the file left the dirty set after the mark (written back,
// dropped or removed), OverlaySince says so and the answer is thrown away.

// maxLeft bounds the files remembered as having left the dirty set; past
// it the memory is cleared and older marks count as unsettled.
const maxLeft = 4096

// Mark returns the current epoch, to pass to Steady or OverlaySince once
// the upstream answered.
func (e *Engine) Mark() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.epoch
}

// leftLocked records that file ino left the dirty set. Called with e.mu held.
func (e *Engine) leftLocked(ino uint64) {
	e.epoch++
	if len(e.left) >= maxLeft {
		clear(e.left)
		e.floor = e.epoch - 1
	}
	e.left[ino] = e.epoch
}

// steadyLocked reports whether file ino has not left the dirty set since
// mark. Called with e.mu held.
func (e *Engine) steadyLocked(ino, mark uint64) bool {
	return mark >= e.floor && e.left[ino] <= mark
}

// Steady reports whether file ino has not left the dirty set since mark:
// an answer of the upstream about it taken after the mark is not from the
// middle of a write-back that has finished since.
func (e *Engine) Steady(ino, mark uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.steadyLocked(ino, mark)
}

// Overlay replaces the upstream's size, times and version of a file with
// dirty data by what its writers see here, and keeps the rest as the
// upstream's attributes last seen (AttrOf).
func (e *Engine) Overlay(at *wire.Attr) {
	e.mu.Lock()
	if df, ok := e.files[at.Ino]; ok {
		df.attr = *at
		e.overlayLocked(at)
	}
	e.mu.Unlock()
}

// OverlaySince is Overlay of an answer the upstream gave after mark; it
// reports false when the answer cannot be trusted: the file is not dirty
// now but left the dirty set since the mark.
func (e *Engine) OverlaySince(at *wire.Attr, mark uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if df, ok := e.files[at.Ino]; ok {
		df.attr = *at
		return e.overlayLocked(at)
	}
	return e.steadyLocked(at.Ino, mark)
}

// AttrOf returns df's attributes as its readers see them: the upstream's
// last seen, overlaid.
func (e *Engine) AttrOf(df *File) wire.Attr {
	e.mu.Lock()
	defer e.mu.Unlock()
	at := df.attr
	at.Ino = df.ino
	if e.files[df.ino] == df {
		e.overlayLocked(&at)
	}
	return at
}

// overlayLocked overlays at with the dirty file it names and reports
// whether there is one. Called with e.mu held.
func (e *Engine) overlayLocked(at *wire.Attr) bool {
	df, ok := e.files[at.Ino]
	if !ok {
		return false
	}
	// While dirty, only this writer changes the file: its size is at
	// least the upstream's (a truncation is written back first).
	at.Size, at.Version = max(at.Size, uint64(df.size)), df.shown
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
