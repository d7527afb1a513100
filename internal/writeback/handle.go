package writeback

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/coopfs/coopfs/internal/wire"
)

// errGoneFile: the path no longer names the dirty file upstream.
var errGoneFile = errors.New("the file was removed or replaced upstream")

// handle is an upstream handle opened for writing one file back, as its
// writer; it is opened again after a reconnection.
type handle struct {
	e      *Engine
	df     *File
	path   string
	h, gen uint64
	open   bool
}

// as wraps m in the identity of df's writer, if it has one.
func as(df *File, m wire.Msg) wire.Msg {
	if !df.hasCaller {
		return m
	}
	c := df.caller
	return &wire.As{UID: c.UID, GID: c.GID, Groups: c.Groups, HasUmask: c.HasUmask, Umask: c.Umask, Msg: m}
}

// get returns the handle on the live connection, opening the file's path
// for writing if needed; errGoneFile when the path is gone or names
// another file.
func (h *handle) get(ctx context.Context) (uint64, uint64, error) {
	fe := h.e.fe
	gen, err := fe.Gen(ctx)
	if err != nil {
		return 0, 0, err
	}
	if h.open && h.gen == gen {
		return h.h, gen, nil
	}
	r, gen, err := fe.Call(ctx, as(h.df, &wire.Open{Path: h.path, Flags: syscall.O_WRONLY}))
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return 0, 0, fmt.Errorf("%w: %v", errGoneFile, err)
	}
	if err != nil {
		return 0, 0, err
	}
	or, ok := r.(*wire.OpenReply)
	if !ok {
		return 0, 0, fmt.Errorf("open: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	h.h, h.gen, h.open = or.Handle, gen, true
	if or.Attr.Ino != h.df.ino {
		return 0, 0, fmt.Errorf("%w: %s is now file %d, not %d", errGoneFile, h.path, or.Attr.Ino, h.df.ino)
	}
	return h.h, gen, nil
}

// write sends one block, exactly once (WriteSeq), and returns the
// attributes after it.
func (h *handle) write(ctx context.Context, off int64, data []byte) (wire.Attr, error) {
	seq := h.e.fe.NextSeq()
	for attempt := 0; ; attempt++ {
		hd, gen, err := h.get(ctx)
		if err != nil {
			return wire.Attr{}, err
		}
		r, callGen, err := h.e.fe.Call(ctx, &wire.WriteSeq{Seq: seq, Handle: hd, Offset: uint64(off), Data: data})
		if callGen != gen && attempt < 2 {
			continue // the handle died with the old connection
		}
		if err != nil {
			return wire.Attr{}, err
		}
		ar, ok := r.(*wire.AttrReply)
		if !ok {
			return wire.Attr{}, fmt.Errorf("write: unexpected reply %v: %w", r.Type(), syscall.EIO)
		}
		return ar.Attr, nil
	}
}

// setAttr sends a setattr of the file through the handle, as its writer.
func (h *handle) setAttr(ctx context.Context, m wire.SetAttr) (wire.Attr, error) {
	hd, _, err := h.get(ctx)
	if err != nil {
		return wire.Attr{}, err
	}
	m.Path, m.Handle = h.path, hd
	r, _, err := h.e.fe.Call(ctx, as(h.df, &m))
	if err != nil {
		return wire.Attr{}, err
	}
	ar, ok := r.(*wire.AttrReply)
	if !ok {
		return wire.Attr{}, fmt.Errorf("setattr: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	return ar.Attr, nil
}

func (h *handle) release() {
	if h.open {
		h.e.fe.Release(h.gen, h.h)
	}
}
