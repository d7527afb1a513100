package server

import (
	"context"
	"fmt"
	"os"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/wire"
)

// directoryPolicy plugs the `directory` policy (coop.go, around
// internal/coord/directory) into the server's policy seam.
type directoryPolicy struct{ s *Server }

func newDirectoryPolicy(s *Server) (policy, error) {
	s.digests = newDigests(DefaultDigestEntries)
	c, err := newCoop(s.cfg.Directory)
	if err != nil {
		return nil, err
	}
	s.coop = c
	if err := s.cfg.Metrics.Register(newCoopCollector(c)); err != nil {
		return nil, fmt.Errorf("register directory metrics: %w", err)
	}
	return directoryPolicy{s}, nil
}

func (p directoryPolicy) joined(cl *client, c *wire.Conn) {
	p.s.coop.joined(cl.id, c, cl.listen, peerWho(cl))
}
func (p directoryPolicy) left(cl *client)        { p.s.coop.left(cl.id) }
func (p directoryPolicy) fileChanged(ino uint64) { p.s.coop.fileChanged(ino) }
func (p directoryPolicy) memEvicted(id block.ID) { p.s.coop.evicted(id) }

func (p directoryPolicy) read(c *wire.Conn, _ *client, m *wire.ReadBlock, f *os.File, id block.ID, v uint64, reply *wire.BlockReply) bool {
	return p.s.forward(c, m, f, id, v, reply)
}

func (p directoryPolicy) served(_ *os.File, id block.ID, _ uint64, _ []byte, fromDisk bool) {
	if fromDisk {
		p.s.coop.cached(id)
	}
}

func (p directoryPolicy) serve(_ context.Context, _ *wire.Conn, cl *client, m wire.Msg) (wire.Msg, error, bool) {
	switch m := m.(type) {
	case *wire.Discard:
		if cl != nil {
			p.s.coop.discarded(cl.id, m.Blocks)
		}
		return nil, nil, true
	case *wire.Held:
		if cl != nil {
			p.s.coop.held(cl.id, m.Blocks)
		}
		return nil, nil, true
	case *wire.PeerReport:
		if cl != nil {
			p.s.badBlock(cl, m)
		}
		return nil, nil, true
	case *wire.HintsDiscard:
		return nil, nil, true
	}
	return nil, nil, false
}
