package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
	"github.com/coopfs/coopfs/internal/writeback"
)

// Write-back at the proxy (cache.WriteBack): a client's write completes
// here, in dirty frames of the disk tier (durable against the proxy's
// death once written, against a machine crash after the next sync), and
// reaches the upstream later: in the background, on demand (Flush), when
// the upstream recalls it, or before a change that needs it there (a
// truncation, a mode, fallocate). The engine is internal/writeback, shared
// with the write-back mounts; this file and writeback_relay.go are the
// proxy's front end.
//
// The proxy writes back on a connection of its own (ownSession), in its
// own name, as the identity of the client that opened the file. On that
// connection it holds the write delegations of its dirty files
// (DelegateWrite): an open of such a file by any other client of the
// upstream — direct, behind another proxy, or behind this one (its open is
// relayed on its own connection) — is recalled to this proxy, which writes
// the file back and then acks.
//
// Versions: while a file is dirty here its frames are tagged with the
// upstream version it had when it became dirty (so its clean cached blocks
// serve as the base of partial writes), and every write hands the clients
// a new version minted here (mintBit, never an upstream one): a
// client drops what it cached of the file at the old version, as after a
// write through the server, and reads the new data from the proxy.

// mintBit marks the versions the proxy hands out for its dirty files: bit
// 62 set and bit 63 clear. The server's own versions are either counted
// from its boot time in nanoseconds (below bit 62 until the year 2116) or
// derived from a file's state, with bit 63 set (the server's versions.go):
// neither is ever taken for a minted one.
const (
	mintBit    = 1 << 62
	derivedBit = 1 << 63
)

// isMinted reports whether v is a version minted here.
func isMinted(v uint64) bool { return v&(mintBit|derivedBit) == mintBit }

// WriteBackConfig tunes the proxy's write-back policy.
type WriteBackConfig = writeback.Tuning

// wbCloseTimeout bounds the write-back when the proxy stops, and at its
// start the write-back of what the previous run left; what is left stays
// on disk for later.
const wbCloseTimeout = 20 * time.Second

// writeBack is the proxy's write-back: the engine, on the proxy's own
// upstream connection, and its minted versions. Its methods that the
// relay calls for every reply do nothing on a nil writeBack.
type writeBack struct {
	p      *Proxy
	c      *blockCache
	e      *writeback.Engine
	up     *ownSession
	d      *delegs // the clients' write delegations and the proxy's own (deleg.go)
	minted atomic.Uint64
	seq    atomic.Uint64 // WriteSeq numbers of the own session
}

var _ writeback.Frontend = (*writeBack)(nil)

// mint returns a new version for clients of a dirty file.
func (w *writeBack) mint() uint64 { return mintBit | w.minted.Add(1) }

// openWriteBack starts write-back over the open disk tier: what a previous
// run left dirty is declared and written back (within wbCloseTimeout; the
// rest later), and the background flusher starts.
func (p *Proxy) openWriteBack(ctx context.Context) error {
	c := p.cache
	if c.disk == nil {
		return errors.New("--write-policy write-back needs a disk cache: add --disk-cache DIR")
	}
	w := &writeBack{p: p, c: c}
	w.minted.Store(uint64(time.Now().UnixNano()))
	e, err := writeback.New(writeback.Config{Tuning: p.cfg.WriteBack, Dir: p.cfg.Disk.Dir, Disk: c.disk, Mem: c.mem,
		Upstream: "the upstream", RequestTimeout: p.cfg.RequestTimeout, RecoverTimeout: wbCloseTimeout, CloseTimeout: wbCloseTimeout,
		Mint: w.mint, Logger: p.log}, w)
	if err != nil {
		return err
	}
	w.e = e
	w.up = &ownSession{p: p, e: e, boot: uint64(time.Now().UnixNano())}
	w.d = newDelegs(w)
	c.isDirty = e.Holds
	p.wb = w
	e.Start(ctx)
	return nil
}

// close writes back what it can within wbCloseTimeout and closes the own
// connection.
func (w *writeBack) close() error {
	err := w.e.Close()
	w.up.close()
	return err
}

// Flush writes back every dirty file (coopfs flush --proxy, SIGUSR1),
// calling progress after each block; without write-back it does nothing.
func (p *Proxy) Flush(ctx context.Context, progress func(agent.Progress)) (agent.Progress, error) {
	if p.wb == nil {
		return agent.Progress{}, nil
	}
	return p.wb.e.FlushAll(ctx, progress)
}

// Call, Gen, Release and NextSeq make the own session the engine's
// upstream (writeback.Frontend).
func (w *writeBack) Call(ctx context.Context, m wire.Msg) (wire.Msg, uint64, error) {
	if r, done, err := w.d.engineCall(ctx, m); done {
		return r, 0, err
	}
	return w.up.call(ctx, m)
}

func (w *writeBack) Gen(ctx context.Context) (uint64, error) {
	_, gen, err := w.up.current(ctx)
	return gen, err
}

func (w *writeBack) Release(gen, h uint64) { w.up.release(h, gen) }

func (w *writeBack) NextSeq() uint64 { return w.seq.Add(1) }

// Settled implements writeback.Frontend: clients holding a minted version
// are served at the upstream's new one.
func (w *writeBack) Settled(ino, _ uint64, at wire.Attr) {
	if at.Version == 0 {
		w.c.forget(ino)
		return
	}
	w.c.setVersion(ino, at.Version, at.Size)
}

// holds reports whether file ino is dirty here.
func (w *writeBack) holds(ino uint64) bool { return w.e.Holds(ino) }

// mark returns the engine's epoch before a request is relayed.
func (w *writeBack) mark() uint64 {
	if w == nil {
		return 0
	}
	return w.e.Mark()
}

// overlaySince shows a dirty file as its writers see it here (the size,
// mtime and version of its writes over the upstream's attributes); false
// when the upstream's answer, given after mark, may be from the middle of
// a write-back that finished since.
func (w *writeBack) overlaySince(at *wire.Attr, mark uint64) bool {
	return w == nil || w.e.OverlaySince(at, mark)
}

// settleTries bounds how often a relayed reply's attributes are asked for
// again; the last answer is taken as it is.
const settleTries = 4

// settle overlays the attributes of a relayed reply to req (h: the handle
// it opened, if any). When the file finished a write-back here while the
// upstream answered, the size may be from the middle of it (the upstream's
// grows block by block): the attributes are asked again, with a getattr
// as the same caller.
func (w *writeBack) settle(ctx context.Context, cl *client, orig, req wire.Msg, h uint64, at *wire.Attr, mark uint64) {
	for try := 0; !w.overlaySince(at, mark) && try < settleTries; try++ {
		ga := attrAgain(req, h)
		if ga == nil {
			return // nothing to ask again about
		}
		var m wire.Msg = ga
		if as, ok := orig.(*wire.As); ok {
			again := *as
			again.Msg = ga
			m = &again
		}
		mark = w.e.Mark()
		r, err := cl.call(ctx, m)
		ar, ok := r.(*wire.AttrReply)
		if err != nil || !ok {
			return // the first answer stands
		}
		w.c.noteAttr(&ar.Attr)
		*at = ar.Attr
	}
}

// attrAgain is the getattr that asks again for what a reply to req
// described (h: the handle the reply opened, if any); nil if there is
// nothing to ask about.
func attrAgain(req wire.Msg, h uint64) *wire.GetAttr {
	if h != 0 {
		return &wire.GetAttr{Handle: h}
	}
	ga := &wire.GetAttr{}
	switch m := req.(type) {
	case *wire.GetAttr:
		*ga = *m
	case *wire.SetAttr:
		ga.Path, ga.Handle = m.Path, m.Handle
	case *wire.Lookup:
		ga.Path = m.Path
	case *wire.Link:
		ga.Path = m.New
	case *wire.Write, *wire.WriteSeq, *wire.WriteBase:
		ga.Handle, _, _, _ = writeArgs(m)
	case *wire.Fallocate:
		ga.Handle = m.Handle
	default:
		return nil
	}
	return ga
}

// write stores a client's write in dirty frames and returns the file's
// attributes after it and the version clients saw right before it. Blocks
// it covers partly are completed from their current content (fetchBase);
// a gap past the end of the file is zeros.
func (w *writeBack) write(ctx context.Context, cl *client, h uint64, hd handle, off uint64, p []byte) (wire.Attr, uint64, error) {
	nf := writeback.NewFile{Ino: hd.ino, Path: hd.path, Tag: hd.attr.Version, Size: int64(hd.attr.Size),
		Caller: hd.caller, HasCaller: hd.hasAs, Attr: hd.attr}
	if fv, known := w.c.current(hd.ino); known && !isMinted(fv.version) {
		nf.Tag = fv.version
	}
	if fv, known := w.c.current(hd.ino); known && fv.version == nf.Tag {
		nf.Size = int64(fv.size)
	}
	wr, err := w.e.Write(ctx, nf, int64(off), p, w.fetchBase(cl, h))
	if err != nil {
		return wire.Attr{}, 0, err
	}
	return wr.Attr, wr.Prev, nil
}

// fetchBase reads a block of a dirty file upstream, through the client's
// handle h or, if that one cannot read, through a read-only open of the
// proxy's own, and keeps it at the file's tag: the upstream's content of a
// block not dirty here is the current one, whatever version partial
// write-backs gave the file.
func (w *writeBack) fetchBase(cl *client, h uint64) writeback.Fetch {
	return func(ctx context.Context, b writeback.BlockRef) ([]byte, error) {
		r, err := cl.call(ctx, &wire.ReadBlock{Handle: h, File: b.Ino, Index: b.Index, Version: b.Tag})
		if err != nil {
			r, err = w.up.readBlock(ctx, b) // a write-only handle
		}
		if err != nil {
			return nil, fmt.Errorf("write-back at the proxy: read block %d of %s to complete a write: %w", b.Index, b.Path, err)
		}
		br, ok := r.(*wire.BlockReply)
		if !ok || br.Forwarded {
			return nil, fmt.Errorf("write-back at the proxy: read block %d of %s: unexpected reply %v: %w", b.Index, b.Path, r.Type(), syscall.EIO)
		}
		w.c.fill(block.ID{File: b.Ino, Index: b.Index}, b.Tag, br.Data)
		return br.Data, nil
	}
}

// read serves a client's block read of a dirty file from the dirty state:
// its dirty and clean blocks here, the rest upstream. ok is false when the
// file is not dirty here.
func (w *writeBack) read(ctx context.Context, cl *client, m *wire.ReadBlock) (wire.Msg, bool, error) {
	if !w.holds(m.File) || !cl.mayRead(m.Handle, m.File) {
		return nil, false, nil
	}
	data, a, ok, err := w.e.Read(ctx, m.File, m.Index, w.fetchBase(cl, m.Handle))
	if !ok || err != nil {
		return nil, ok, err
	}
	w.p.metrics.CountRead(obs.LayerProxy, len(data))
	return &wire.BlockReply{Version: a.Version, Size: a.Size, Layer: wire.LayerProxy, Data: data}, true, nil
}

// flushBefore writes file ino back before a change that needs the
// upstream to hold its data (a truncation, a mode, fallocate, a write
// this proxy cannot place).
func (w *writeBack) flushBefore(ctx context.Context, ino uint64) error {
	return w.e.FlushIno(ctx, ino)
}
