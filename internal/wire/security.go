package wire

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Message types of the security layer (the range 100-109 is theirs).
const (
	TPeerReport Type = 100 // client → server: a holder sent a block that failed its digest
)

func newSecurityMsg(t Type) Msg {
	switch t {
	case TPeerReport:
		return &PeerReport{}
	}
	return nil
}

// DigestSize is the length of a block digest (SHA-256).
const DigestSize = sha256.Size

// BlockDigest is the digest of a block's bytes that a forwarded block must
// match: SHA-256 (crypto/sha256, which uses the CPU's SHA extensions).
func BlockDigest(p []byte) []byte {
	d := sha256.Sum256(p)
	return d[:]
}

// DigestMatches reports whether p hashes to digest, in constant time.
func DigestMatches(p, digest []byte) bool {
	return len(digest) == DigestSize && subtle.ConstantTimeCompare(BlockDigest(p), digest) == 1
}

// PeerReport tells the server that Holder answered a forward with a block
// that was not the one asked for (wrong file, index, version or digest).
type PeerReport struct {
	Holder               uint32
	File, Index, Version uint64
	Reason               string
}

func (*PeerReport) Type() Type { return TPeerReport }
func (m *PeerReport) encode(e *encoder) {
	e.u32(m.Holder)
	e.u64(m.File)
	e.u64(m.Index)
	e.u64(m.Version)
	e.str(m.Reason)
}
func (m *PeerReport) decode(d *decoder) {
	m.Holder = d.u32()
	m.File = d.u64()
	m.Index = d.u64()
	m.Version = d.u64()
	m.Reason = string(d.raw(1024))
}
