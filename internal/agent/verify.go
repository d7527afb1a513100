package agent

import (
	"context"
	"fmt"

	"github.com/coopfs/coopfs/internal/wire"
)

// verify admits a block a peer sent for a forwarded request only if it is
// the one asked for: the file and index of the request, the version the
// server forwarded at, and the digest the server sent with the forward. A
// block that fails is dropped (the caller asks the server), counted, logged
// and reported to the server, which stops forwarding to a holder that keeps
// sending bad blocks.
func (c *coop) verify(req *wire.ReadBlock, br *wire.BlockReply, pd *wire.PeerData) bool {
	var why string
	switch {
	case pd.File != req.File || pd.Index != req.Index:
		why = fmt.Sprintf("sent block %d of file %d for block %d of file %d", pd.Index, pd.File, req.Index, req.File)
	case pd.Version != br.Version:
		why = fmt.Sprintf("sent version %d, the server forwarded version %d", pd.Version, br.Version)
	case pd.Holder != br.Holder:
		why = fmt.Sprintf("the block says it comes from client %d, the server forwarded to %d", pd.Holder, br.Holder)
	case !wire.DigestMatches(pd.Data, br.Digest):
		why = "the block's SHA-256 differs from the server's"
	default:
		return true
	}
	c.stats.badBlocks.Add(1)
	c.a.log.Warn("dropped a bad block from a peer; reading it from the server", "holder", br.Holder,
		"file", req.File, "index", req.Index, "version", br.Version, "why", why)
	c.report(req, br, why)
	return false
}

// report tells the server that the holder br named failed the forwarded
// request req: why says how.
func (c *coop) report(req *wire.ReadBlock, br *wire.BlockReply, why string) {
	conn, _, err := c.a.sess.current(context.Background())
	if err == nil {
		err = conn.Send(&wire.PeerReport{Holder: br.Holder, File: req.File, Index: req.Index, Version: br.Version, Reason: why})
	}
	if err != nil {
		c.a.log.Debug("peer failure not reported", "err", err)
	}
}
