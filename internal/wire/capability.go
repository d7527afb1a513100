package wire

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A Capability is the server's signed statement that one client may read
// one version of one file until a time (seed 004's NASD capability: the
// file manager issues it, the drive — here a peer holding the blocks —
// serves only against it). The server issues one with every open that may
// read; a holder serves a block, a hint answer or a wholefile segment only
// when the requester presents one for that file and version, signed with
// the server's key, unexpired, and naming the key the requester proved on
// its peer connection (IdentityKey). So a member reads through its peers
// exactly what it could read through the server.
type Capability struct {
	File, Version uint64
	Rights        uint8  // CapRead
	Expiry        int64  // Unix nanoseconds
	Client        []byte // the Ed25519 public key of the client it was issued to
	Sig           []byte // Ed25519 over capSigned
}

// Capability rights.
const CapRead uint8 = 1

// CapabilityLifetime is how long a capability is valid: an open held longer
// reads from the server once it expires (its peers refuse it), never wrong
// bytes.
const CapabilityLifetime = 12 * time.Hour

// Capability errors: what a holder tells a requester it refused.
var (
	ErrCapability = errors.New("no valid capability for this file and version")
)

const capLabel = "coopfs capability v1"

// capSigned is the byte string the server signs.
func (c *Capability) capSigned() []byte {
	e := encoder{b: append(make([]byte, 0, 96), capLabel...)}
	e.u64(c.File)
	e.u64(c.Version)
	e.u32(uint32(c.Rights))
	e.i64(c.Expiry)
	e.bytes(c.Client)
	return e.b
}

// Valid says whether c carries a signature at all (a zero Capability is
// "none").
func (c *Capability) Valid() bool { return len(c.Sig) == ed25519.SignatureSize }

// IssueCapability signs a read capability for client's key.
func IssueCapability(key ed25519.PrivateKey, file, version uint64, client ed25519.PublicKey, now time.Time) Capability {
	c := Capability{File: file, Version: version, Rights: CapRead, Expiry: now.Add(CapabilityLifetime).UnixNano(),
		Client: append([]byte(nil), client...)}
	c.Sig = ed25519.Sign(key, c.capSigned())
	return c
}

func encodeCap(e *encoder, c *Capability) {
	e.u64(c.File)
	e.u64(c.Version)
	e.u32(uint32(c.Rights))
	e.i64(c.Expiry)
	e.bytes(c.Client)
	e.bytes(c.Sig)
}

func decodeCap(d *decoder, c *Capability) {
	c.File = d.u64()
	c.Version = d.u64()
	c.Rights = uint8(d.u32())
	c.Expiry = d.i64()
	c.Client = d.optRaw(ed25519.PublicKeySize)
	c.Sig = d.optRaw(ed25519.SignatureSize)
}

// CapVerifier checks capabilities against the server's public key. It
// remembers the signatures it verified (a reader presents the same
// capability for every block of its open), so a signature is checked once
// per open and holder, not once per block.
type CapVerifier struct {
	mu   sync.Mutex
	pub  ed25519.PublicKey
	seen map[[sha256.Size]byte]struct{}
}

// maxVerified bounds the remembered signatures; past it the set restarts.
const maxVerified = 1 << 14

// SetKey sets the server's public key (learnt from the server's Welcome);
// a new key (a restarted server) forgets what was verified with the old.
func (v *CapVerifier) SetKey(pub []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if bytes.Equal(v.pub, pub) {
		return
	}
	v.pub = append(ed25519.PublicKey(nil), pub...)
	v.seen = nil
}

// Check says why c does not let the client that proved key client read
// version of file at now, or nil when it does. A nil client skips the
// identity check (a capability shown as provenance, not to be served).
func (v *CapVerifier) Check(c *Capability, file, version uint64, client []byte, now time.Time) error {
	switch {
	case !c.Valid():
		return fmt.Errorf("%w: none presented", ErrCapability)
	case c.File != file || c.Version != version:
		return fmt.Errorf("%w: it is for version %d of file %d", ErrCapability, c.Version, c.File)
	case c.Rights&CapRead == 0:
		return fmt.Errorf("%w: it does not grant reading", ErrCapability)
	case client != nil && !bytes.Equal(c.Client, client):
		return fmt.Errorf("%w: it names another client", ErrCapability)
	case client != nil && now.UnixNano() > c.Expiry:
		return fmt.Errorf("%w: it expired", ErrCapability)
	}
	signed := c.capSigned()
	k := sha256.Sum256(append(signed, c.Sig...))
	v.mu.Lock()
	pub := v.pub
	_, ok := v.seen[k]
	v.mu.Unlock()
	if ok {
		return nil
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, signed, c.Sig) {
		return fmt.Errorf("%w: its signature is not the server's", ErrCapability)
	}
	v.mu.Lock()
	if bytes.Equal(v.pub, pub) {
		if v.seen == nil || len(v.seen) >= maxVerified {
			v.seen = make(map[[sha256.Size]byte]struct{})
		}
		v.seen[k] = struct{}{}
	}
	v.mu.Unlock()
	return nil
}
