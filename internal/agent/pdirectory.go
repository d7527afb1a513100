package agent

import (
	"context"
	"fmt"
	"syscall"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/wire"
)

// The `directory` policy's client side (coop.go) in the policy seam.
var _ policy = (*coop)(nil)

func (c *coop) opened(context.Context, *file) {}

// fetch reads a block under the directory policy: the block is marked on
// its way (a forward for it waits) while the server serves it or forwards
// the request to a holder (fetchCoop), until it is in the memory tier: the
// server recorded us as a holder when it answered, and a forward arriving
// between the end of the mark and file.fetch's store would find the block
// neither on its way nor cached and be answered negatively. (file.fetch
// stores it again: the same bytes.)
func (c *coop) fetch(ctx context.Context, f *file, id block.ID, v uint64) (*wire.BlockReply, error) {
	defer c.startFetch(id, v)()
	br, err := f.fetchCoop(ctx, c, &wire.ReadBlock{File: id.File, Index: id.Index, Version: v})
	if err == nil && !c.a.wb.holds(id.File) {
		c.a.cache.Put(id, block.Version(br.Version), br.Data)
		c.held(id)
	}
	return br, err
}

func (c *coop) hit(block.ID, uint64)           {}
func (c *coop) promoted(block.ID, uint64)      {}
func (c *coop) fileDropped(uint64)             {}
func (c *coop) closing(context.Context, *file) {}

// memEvicted: the block joins the discard queue unless the disk tier still
// holds it: the server keeps forwarding to us what our disk can serve; it
// is discarded when the disk tier drops it (diskEvicted).
func (c *coop) memEvicted(id block.ID) {
	if _, onDisk := c.a.diskPeek(id); !onDisk {
		c.evicted(id)
	}
}

// diskEvicted: a block neither tier holds any more joins the discard queue.
func (c *coop) diskEvicted(id block.ID) {
	if _, inMem := c.a.cache.Peek(id); !inMem {
		c.evicted(id)
	}
}

// serveServer takes the server's forwards, and its word that a holder we
// wait for disconnected (a PeerNack).
func (c *coop) serveServer(ctx context.Context, m wire.Msg) (wire.Msg, error, bool) {
	switch m := m.(type) {
	case *wire.Forward:
		c.onForward(m)
		return nil, nil, true
	case *wire.PeerNack:
		r, err := c.servePeer(ctx, nil, m)
		return r, err, true
	}
	return nil, nil, false
}

// errNoPolicy answers a cooperative message under a policy that has none.
func errNoPolicy(m wire.Msg) error {
	return fmt.Errorf("%v under a policy that does not use it: %w", m.Type(), syscall.EPROTO)
}
