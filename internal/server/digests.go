package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/wire"
)

// digests remembers the SHA-256 of blocks the server has forwarded, by
// (file, version, index), so that a forward can tell the requester what
// the holder must send. A version names one content for good (versions.go:
// a change makes a new version), so entries never go stale; they are
// dropped oldest first when the table is full.
//
// Where a digest comes from (the choice the forward path makes): the first
// forward of a block at a version hashes it — from the server's memory
// cache, where a block recently served still is, else read from the
// export (usually its page cache). Later forwards find it in the table.
// Blocks are not hashed when they are served, only when forwarded: a
// client reading alone pays nothing, and the server's link, which a
// forward spares, stays free either way. A block that changes while it is
// hashed is served by the server itself.
//
// INVARIANT: len(m) <= len(ring), and every key in m is in ring.
type digests struct {
	mu   sync.Mutex
	m    map[digestKey][wire.DigestSize]byte
	ring []digestKey
	next int
}

type digestKey struct{ file, version, index uint64 }

// DefaultDigestEntries bounds the digest table: 128 Ki blocks (128 GiB of
// 1 MiB blocks) in about 10 MiB.
const DefaultDigestEntries = 128 << 10

func newDigests(n int) *digests {
	return &digests{m: make(map[digestKey][wire.DigestSize]byte, 1024), ring: make([]digestKey, n)}
}

func (d *digests) put(k digestKey, sum []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.m[k]; ok {
		return
	}
	if old := d.ring[d.next]; old != (digestKey{}) {
		delete(d.m, old)
	}
	d.ring[d.next] = k
	d.next = (d.next + 1) % len(d.ring)
	d.m[k] = [wire.DigestSize]byte(sum)
}

func (d *digests) get(k digestKey) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.m[k]
	return s[:], ok
}

// learnDigest records the digest of a block just read from f at version
// v, unless the file changed while it was read (the bytes may then belong
// to a newer version, and an honest holder of v would be blamed). It
// returns the digest, or nil for a changed file.
func (s *Server) learnDigest(f *os.File, id block.ID, v uint64, data []byte) []byte {
	sum := wire.BlockDigest(data)
	fi, err := f.Stat()
	if err != nil || s.attrOf(fi).Version != v {
		return nil
	}
	s.digests.put(digestKey{id.File, v, id.Index}, sum)
	return sum
}

// digestKnown returns the digest of block id at version v if it is in the
// table or can be hashed from the memory cache: no read of the export.
func (s *Server) digestKnown(id block.ID, v uint64) ([]byte, bool) {
	if sum, ok := s.digests.get(digestKey{id.File, v, id.Index}); ok {
		return sum, true
	}
	if data, ok := s.cache.Get(id, block.Version(v)); ok {
		sum := wire.BlockDigest(data)
		s.digests.put(digestKey{id.File, v, id.Index}, sum)
		return sum, true
	}
	return nil, false
}

// digestFor returns the digest of block id at version v for a forward:
// from the table, the memory cache, or the export (see digests).
func (s *Server) digestFor(f *os.File, id block.ID, v, size uint64) ([]byte, error) {
	if sum, ok := s.digestKnown(id, v); ok {
		return sum, nil
	}
	off := int64(id.Index) * int64(s.cfg.BlockSize)
	buf := make([]byte, min(int64(s.cfg.BlockSize), int64(size)-off))
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if sum := s.learnDigest(f, id, v, buf[:n]); sum != nil {
		return sum, nil
	}
	return nil, fmt.Errorf("block %d of file %d changed while it was hashed", id.Index, id.File)
}

// serveClient is the handler of client connections: the security layer's
// messages, then the file operations (serveMsg).
func (s *Server) serveClient(ctx context.Context, c *wire.Conn, m wire.Msg) (wire.Msg, error) {
	cl, _ := c.Value.Load().(*client)
	if r, err, ok := s.serveWarmup(c, cl, m); ok {
		return r, err
	}
	if r, err, ok := s.pol.serve(ctx, c, cl, m); ok {
		return r, err
	}
	return s.serveMsg(ctx, c, m)
}

// BadBlockLimit is how many bad blocks a holder may send before the server
// stops forwarding to it.
const BadBlockLimit = 3

// badBlock counts a requester's report against the holder (a bad block,
// or none within the requester's forward timeout); at BadBlockLimit the
// directory distrusts the holder's identity (peerWho), on this connection
// and the ones it makes later. A report is believed as it is: a lying member can at worst
// make the server stop forwarding to an honest one, which costs the
// cluster cooperation, never correctness (docs/security.md).
func (s *Server) badBlock(reporter *client, r *wire.PeerReport) {
	n, distrusted := s.coop.reported(r.Holder)
	s.log.Warn("a client reported a bad block from a peer", "reporter", reporter.id, "holder", r.Holder,
		"file", r.File, "index", r.Index, "version", r.Version, "reason", r.Reason, "reports_against_holder", n)
	if distrusted {
		s.log.Warn("no longer forwarding to a client that sent bad blocks", "client", r.Holder, "reports", n)
	}
}

// reported counts a bad block against holder and distrusts it at
// BadBlockLimit; it returns the count and whether this report crossed it.
func (c *coop) reported(holder uint32) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pi, known := c.conns[directory.ClientID(holder)]
	if !known {
		return 0, false
	}
	c.badReports++
	if _, ok := c.bad[pi.who]; !ok && len(c.bad) >= maxPeerStrikes {
		for who, n := range c.bad {
			if n < BadBlockLimit { // the distrusted are kept
				delete(c.bad, who)
				break
			}
		}
	}
	c.bad[pi.who]++
	n := c.bad[pi.who]
	if n == BadBlockLimit {
		c.dir.Distrust(directory.ClientID(holder))
		return n, true
	}
	return n, false
}
