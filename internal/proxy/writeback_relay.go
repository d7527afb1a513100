package proxy

import (
	"context"
	"syscall"

	"github.com/coopfs/coopfs/internal/wire"
	"github.com/coopfs/coopfs/internal/writeback"
)

// writeBack serves the requests that write-back answers here or prepares:
// writes complete in dirty frames; an fsync of a dirty file syncs them; a
// setattr or fallocate of a dirty file writes it back first, then goes
// upstream. done is false for a request to relay.
func (cl *client) writeBack(ctx context.Context, w *writeBack, m wire.Msg) (rep wire.Msg, done bool, err error) {
	switch m := m.(type) {
	// A write at an offset applied twice leaves the same data: WriteSeq
	// and WriteBase need no reply cache here.
	case *wire.Write, *wire.WriteSeq, *wire.WriteBase:
		h, off, data, _ := writeArgs(m)
		_, base := m.(*wire.WriteBase)
		return cl.wbWrite(ctx, w, h, off, data, base)
	case *wire.Fsync:
		if hd, ok := cl.handleInfo(m.Handle); ok && w.holds(hd.ino) {
			if err := w.e.Sync(); err != nil {
				return nil, true, err
			}
			return &wire.OK{}, true, nil
		}
	case *wire.SetAttr:
		ino := uint64(0)
		if hd, ok := cl.handleInfo(m.Handle); ok && m.Handle != 0 {
			ino = hd.ino
		} else if df := w.e.Find(m.Path); df != nil {
			ino = df.Ino()
		} else if w.e.Dirty() {
			// m.Path may be a link of a dirty file made elsewhere.
			if r, err := cl.call(ctx, &wire.GetAttr{Path: m.Path}); err == nil {
				if ar, ok := r.(*wire.AttrReply); ok {
					ino = ar.Attr.Ino
				}
			}
		}
		if err := w.flushBefore(ctx, ino); err != nil {
			return nil, true, err
		}
	case *wire.Fallocate:
		if hd, ok := cl.handleInfo(m.Handle); ok {
			if err := w.flushBefore(ctx, hd.ino); err != nil {
				return nil, true, err
			}
		}
	case *wire.Unlink:
		if err := cl.beforeRemove(ctx, w, m.Path); err != nil {
			return nil, true, err
		}
	case *wire.Rename:
		if m.Flags&renameExchange == 0 {
			if err := cl.beforeRemove(ctx, w, m.New); err != nil {
				return nil, true, err
			}
		}
	}
	return nil, false, nil
}

// renameExchange is RENAME_EXCHANGE: nothing is renamed over.
const renameExchange = 2

// beforeRemove prepares the unlink (or rename over) of path: a dirty file
// with another name here is written back under it from then on
// (writeback.Engine.BeforeRemove); one whose other names were made
// elsewhere (the upstream counts more links than one) is written back
// first, so that they show its data.
func (cl *client) beforeRemove(ctx context.Context, w *writeBack, path string) error {
	df := w.e.BeforeRemove(path)
	if df == nil {
		return nil
	}
	r, err := cl.call(ctx, &wire.GetAttr{Path: path})
	ar, ok := r.(*wire.AttrReply)
	if err != nil || !ok || ar.Attr.Ino != df.Ino() || ar.Attr.Nlink <= 1 {
		return nil // the removal itself says what is wrong
	}
	return w.flushBefore(ctx, df.Ino())
}

// wbWrite completes a write here; a WriteBase (base) is answered with a
// WriteReply whose Prev is the version clients saw right before this
// write. A write through a handle the proxy did not see opened for
// writing, and an append, go upstream (which decides, or places the
// append), after the file's dirty data, if any, is written back.
func (cl *client) wbWrite(ctx context.Context, w *writeBack, h, off uint64, data []byte, base bool) (wire.Msg, bool, error) {
	hd, ok := cl.handleInfo(h)
	if !ok || !hd.writable || hd.attr.Mode&syscall.S_IFMT != syscall.S_IFREG {
		if ok {
			if err := w.flushBefore(ctx, hd.ino); err != nil {
				return nil, true, err
			}
		}
		return nil, false, nil
	}
	if hd.appending {
		// An append lands at the end of the file as the upstream sees
		// it, which only the upstream knows (another client may have
		// appended): it goes there at once, after the file's dirty data
		// here, which it must follow; never journalled at an offset.
		if err := w.flushBefore(ctx, hd.ino); err != nil {
			return nil, true, err
		}
		return nil, false, nil
	}
	attr, prev, err := w.write(ctx, cl, h, hd, off, data)
	if err != nil {
		return nil, true, err
	}
	if base {
		return &wire.WriteReply{Attr: attr, Prev: prev}, true, nil
	}
	return &wire.AttrReply{Attr: attr}, true, nil
}

// afterChange updates the dirty files after a change the upstream made: a
// file unlinked or renamed over is stale (its dirty data is never written
// back) unless it has another name here, a renamed one is written back
// under its new name, and a link is one more name.
func (cl *client) afterChange(w *writeBack, m wire.Msg) {
	switch m := m.(type) {
	case *wire.Unlink:
		w.e.Removed(m.Path)
		for _, c := range cl.p.clientList() {
			c.unlinkedHandles(m.Path)
		}
	case *wire.Link:
		w.e.Linked(m.Old, m.New) // one more name to write it back under
		for _, c := range cl.p.clientList() {
			c.linkedHandles(m.Old, m.New)
		}
	case *wire.Rename:
		if cl.renamedToItself(w, m) {
			return // both names are left (they named one file)
		}
		w.e.AfterRename(m.Old, m.New, m.Flags)
		if m.Flags&renameExchange == 0 {
			for _, c := range cl.p.clientList() {
				c.unlinkedHandles(m.New) // renamed over
			}
		}
		cl.p.renamedHandles(m.Old, m.New, m.Flags)
	}
}

// renamedToItself reports whether rename m, which succeeded, left both
// names (they named one file, which POSIX makes a no-op); it asks the
// upstream only when m.New names a dirty file here.
func (cl *client) renamedToItself(w *writeBack, m *wire.Rename) bool {
	if m.Flags&renameExchange != 0 {
		return false
	}
	if m.Old == m.New {
		return true
	}
	df := w.e.Find(m.New)
	if df == nil {
		return false
	}
	r, err := cl.call(context.Background(), &wire.GetAttr{Path: m.Old})
	ar, ok := r.(*wire.AttrReply)
	return err == nil && ok && ar.Attr.Ino == df.Ino()
}

// renamedHandles moves every client's handles after a rename.
func (p *Proxy) renamedHandles(oldPath, newPath string, flags uint32) {
	for _, cl := range p.clientList() {
		for _, mv := range writeback.Renames(oldPath, newPath, flags) {
			cl.renamedHandles(mv[0], mv[1])
		}
	}
}

// pathOf is the path of file ino as cl's handles, another client's, or
// the proxy's dirty data name it; "" if none does.
func (p *Proxy) pathOf(cl *client, ino uint64) string {
	if hd, ok := cl.handleOf(ino); ok {
		return hd.path
	}
	for _, c := range p.clientList() {
		if hd, ok := c.handleOf(ino); ok {
			return hd.path
		}
	}
	return p.wb.e.PathOf(ino)
}
