package proxy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"syscall"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// readBlock serves a block from the cache when the client may read it
// there (it holds a readable handle on that file, and the proxy knows the
// file's size at that version); otherwise it fetches it upstream, once for
// all the clients that miss it at the same moment, and keeps it. Only
// requests through a handle the proxy saw opened on the named file are
// served, shared or kept: the upstream reads through the handle, so the
// handle, not the file id a client names, says whose data comes back.
func (cl *client) readBlock(ctx context.Context, orig wire.Msg, m *wire.ReadBlock) (wire.Msg, error) {
	p, c := cl.p, cl.p.cache
	id := block.ID{File: m.File, Index: m.Index}
	if !cl.mayRead(m.Handle, m.File) {
		// A handle this client did not open for reading here, or one on
		// another file than it names: the upstream decides, and its reply
		// is neither kept nor shared (it could be another file's data).
		return relayReply(cl.call(ctx, orig))
	}
	if w := p.wb; w != nil {
		if rep, ok, err := w.read(ctx, cl, m); ok {
			return rep, err
		}
	}
	ver := m.Version
	if isMinted(ver) {
		// A version of a dirty file this proxy handed out, since written
		// back: its data is the upstream's current version.
		if fv, ok := c.current(m.File); ok {
			ver = fv.version
		}
	}
	if size, ok := c.sizeAt(m.File, ver); ok {
		if data, ok := c.get(id, ver); ok {
			p.metrics.CountRead(obs.LayerProxy, len(data))
			return &wire.BlockReply{Version: ver, Size: size, Layer: wire.LayerProxy, Data: data}, nil
		}
	}
	key := strconv.FormatUint(m.File, 10) + ":" + strconv.FormatUint(m.Index, 10) + ":" + strconv.FormatUint(m.Version, 10)
	ran := false
	v, err, shared := c.flights.Do(key, func() (any, error) {
		ran = true
		return cl.fetch(ctx, orig, m)
	})
	if err != nil && shared && !ran {
		// Another client's fetch failed (its connection may have died):
		// this client's own request may still succeed.
		v, err = cl.fetch(ctx, orig, m)
	}
	if err != nil {
		return relayReply(nil, err)
	}
	return v.(wire.Msg), nil
}

// fetch relays a block request upstream and keeps a complete block of the
// reply (a whole block, or the file's last one). An error reply is the
// reply; a forwarded one (an upstream that forwards though the proxy has
// no peer listener) is asked again with the holder as failed, which the
// upstream then serves itself.
func (cl *client) fetch(ctx context.Context, orig wire.Msg, m *wire.ReadBlock) (wire.Msg, error) {
	p, c := cl.p, cl.p.cache
	r, err := cl.call(ctx, orig)
	if err != nil {
		return nil, err
	}
	br, ok := r.(*wire.BlockReply)
	if ok && br.Forwarded {
		retry := *m
		retry.Retry, retry.Token = br.Holder, 0
		if r, err = cl.call(ctx, &retry); err != nil {
			return nil, err
		}
		br, ok = r.(*wire.BlockReply)
	}
	if !ok || br.Forwarded {
		return nil, fmt.Errorf("read: unexpected reply %v from upstream: %w", r.Type(), syscall.EIO)
	}
	layer := obs.LayerServerDisk
	switch br.Layer {
	case wire.LayerMemory:
		layer = obs.LayerServerMemory
	case wire.LayerProxy:
		layer = obs.LayerProxy
	}
	p.metrics.CountRead(layer, len(br.Data))
	c.noteVersion(m.File, br.Version, br.Size)
	off := m.Index * uint64(c.blockSize)
	if len(br.Data) == c.blockSize || (len(br.Data) > 0 && off+uint64(len(br.Data)) == br.Size) {
		c.put(block.ID{File: m.File, Index: m.Index}, br.Version, br.Data)
	}
	return br, nil
}

// writeArgs returns the handle, offset and data of a write (Write,
// WriteSeq, WriteBase); ok is false for any other message.
func writeArgs(m wire.Msg) (h, off uint64, data []byte, ok bool) {
	switch m := m.(type) {
	case *wire.Write:
		return m.Handle, m.Offset, m.Data, true
	case *wire.WriteSeq:
		return m.Handle, m.Offset, m.Data, true
	case *wire.WriteBase:
		return m.Handle, m.Offset, m.Data, true
	}
	return 0, 0, nil, false
}

// keepWritten keeps (write-through) the whole blocks a relayed write
// covered, at the version the upstream's reply gives: the data a job
// wrote is read back from the proxy. A write that covers only part of a
// block keeps nothing (the rest of the block at the new version is not
// known here). prev is the reply's WriteReply.Prev (0 for an AttrReply):
// it places an append (keepRange).
func (cl *client) keepWritten(req wire.Msg, a *wire.Attr, prev uint64) {
	if as, ok := req.(*wire.As); ok {
		req = as.Msg
	}
	switch m := req.(type) {
	case *wire.Write, *wire.WriteSeq, *wire.WriteBase:
		h, off, data, _ := writeArgs(m)
		cl.keepRange(h, off, data, a, prev)
	case *wire.Commit:
		// A file's held writes (the agent's pipe.go), all at the reply's
		// version: kept only when no two overlap (a later write over part
		// of a block an earlier one filled would leave that block stale).
		type extent struct {
			off  uint64
			data []byte
		}
		var exts []extent
		data := m.Data
		for _, op := range m.Ops {
			if op.Attr == nil {
				if uint64(op.Len) > uint64(len(data)) {
					return
				}
				exts = append(exts, extent{op.Offset, data[:op.Len]})
				data = data[op.Len:]
			}
		}
		slices.SortFunc(exts, func(x, y extent) int { return cmp.Compare(x.off, y.off) })
		for i := 1; i < len(exts); i++ {
			if exts[i-1].off+uint64(len(exts[i-1].data)) > exts[i].off {
				return
			}
		}
		for _, e := range exts {
			cl.keepRange(m.Handle, e.off, e.data, a, 0)
		}
	}
}

// keepRange keeps the whole blocks that data, written at off through
// handle h, covers (see keepWritten). Through an O_APPEND handle the data
// landed at the upstream's end of file, whatever off says (the client's
// idea of the size, stale when another client appended): right below the
// size after it when the upstream saw no other change in between (prev,
// WriteReply.Prev, not 0); else where is not known and nothing is kept.
func (cl *client) keepRange(h, off uint64, data []byte, a *wire.Attr, prev uint64) {
	hd, ok := cl.handleInfo(h)
	if !ok || hd.ino != a.Ino || len(data) == 0 {
		return
	}
	ino := hd.ino
	if hd.appending {
		if prev == 0 || a.Size < uint64(len(data)) {
			return
		}
		off = a.Size - uint64(len(data))
	}
	c, bs := cl.p.cache, uint64(cl.p.cache.blockSize)
	first := (off + bs - 1) / bs // the first block that starts inside the write
	for idx := first; idx*bs < off+uint64(len(data)); idx++ {
		start := idx * bs
		end := min(start+bs, off+uint64(len(data)))
		if end-start < bs && end != a.Size {
			break // a partial block that does not end the file
		}
		// A copy: the client connection's buffer is not ours to keep.
		blk := append([]byte(nil), data[start-off:end-off]...)
		c.put(block.ID{File: ino, Index: idx}, a.Version, blk)
	}
}
