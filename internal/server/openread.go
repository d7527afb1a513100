package server

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Opens that bring the data (wire.OpenRead, issue 9): a cold read of a
// small file was an Open, a GetAttr and a ReadBlock, three round trips;
// the reply of an OpenRead carries the attributes and, for a regular file
// that fits one block and the client's bound, the file's bytes at the
// version those attributes name. The data is served as a ReadBlock of
// block 0 would be: from the server's memory cache or the export, counted
// the same way, and with the running policy's bookkeeping (the directory
// policy records the client as the block's holder; a block a peer holds is
// not sent inline, so that the client's ReadBlock is forwarded to it).

// openRead serves OpenRead.
func (s *Server) openRead(c *wire.Conn, m *wire.OpenRead) (*wire.OpenData, error) {
	if m.Flags&syscall.O_ACCMODE != syscall.O_RDONLY || m.Flags&(syscall.O_TRUNC|syscall.O_CREAT) != 0 {
		return nil, fmt.Errorf("open %s: flags %#o are not a plain open for reading (send Open): %w", m.Path, m.Flags, syscall.EINVAL)
	}
	or, err := s.open(c, m.Path, m.Flags&^syscall.O_EXCL, 0, nil, nil)
	if err != nil {
		return nil, err
	}
	r := &wire.OpenData{Handle: or.Handle, Attr: or.Attr, Cap: or.Cap}
	a := &r.Attr
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG || a.Size > uint64(m.Max) || a.Size > uint64(s.cfg.BlockSize) {
		return r, nil
	}
	of := s.handles.get(or.Handle, c)
	if of == nil || !s.inlineData(c, of, r) || !m.Lazy {
		return r, nil
	}
	// The client reads the whole file from its cache under its callback:
	// it needs no handle (it reopens by path if it ever does).
	s.release(c, r.Handle)
	r.Handle = 0
	return r, nil
}

// inlineData puts the whole file of the open file of into r, at the
// version r's attributes name; false when it cannot (the policy sends the
// client to a peer, the file changed meanwhile, a read error).
func (s *Server) inlineData(c *wire.Conn, of *openFile, r *wire.OpenData) bool {
	a := &r.Attr
	id := block.ID{File: a.Ino, Index: 0}
	if a.Size == 0 {
		r.HasData = true // no block at all
		return true
	}
	cl, _ := c.Value.Load().(*client)
	if in, ok := s.pol.(inliner); ok && !in.mayInline(cl, id, a.Version) {
		return false
	}
	if data, ok := s.cache.Get(id, block.Version(a.Version)); ok && uint64(len(data)) == a.Size {
		r.Data, r.Layer, r.HasData = data, wire.LayerMemory, true
		s.cfg.Metrics.CountRead(obs.LayerServerMemory, len(data))
		s.pol.served(of.f, id, a.Version, data, false)
		return true
	}
	buf := make([]byte, a.Size+1) // one more: a file that grew is not whole
	n, err := of.f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	fi, err := of.f.Stat()
	if err != nil || uint64(n) != a.Size || s.attrOf(fi).Version != a.Version {
		return false // changed while it was read: the client reads it by block
	}
	r.Data, r.Layer, r.HasData = buf[:n], wire.LayerDisk, true
	s.cache.Put(id, block.Version(a.Version), r.Data)
	s.pol.served(of.f, id, a.Version, r.Data, true)
	s.cfg.Metrics.CountRead(obs.LayerServerDisk, n)
	return true
}

// inliner is a policy that decides whether the server may hand a client a
// block with its open (the policies that do not implement it always let it).
type inliner interface {
	mayInline(cl *client, id block.ID, v uint64) bool
}

// mayInline under the directory policy: only a block no client holds is
// sent inline, and the client is recorded as its holder as for a ReadBlock
// the server serves; one a peer holds is left to the client's ReadBlock,
// which the server forwards to the holder.
func (p directoryPolicy) mayInline(cl *client, id block.ID, v uint64) bool {
	if cl == nil || cl.listen == "" {
		return true // a client without a peer listener holds nothing for peers (forward)
	}
	return p.s.coop.serveInline(cl.id, id, v)
}

// serveInline records client as the holder of block id at version v and
// reports true when no client holds it (the server serves it itself);
// when a client does, it changes nothing and reports false.
func (c *coop) serveInline(client uint32, id block.ID, v uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.dir.Holders(id)) > 0 {
		return false
	}
	act := c.dir.Request(c.now(), directory.ClientID(client), id, block.Version(v))
	return act.Kind == directory.ActServe
}
