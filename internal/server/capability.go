package server

import (
	"crypto/ed25519"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// capabilities issues the server's signed read capabilities (seed 004's
// NASD model: the file manager issues, the drives — here the clients
// holding blocks — check) and checks the ones clients show it. The key is
// made at start: a restarted server's capabilities are new, and clients
// learn its public key from the Welcome of each connection.
type capabilities struct {
	key    ed25519.PrivateKey
	verify wire.CapVerifier

	mu     sync.Mutex
	issued map[capKey]wire.Capability // the last issued per client, file and version (forwards reuse them)
}

type capKey struct {
	client        string // the client's identity key
	file, version uint64
}

// maxIssued bounds the remembered capabilities; past it the table restarts.
const maxIssued = 1 << 14

func newCapabilities() (*capabilities, error) {
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("capability key: %w", err)
	}
	c := &capabilities{key: key, issued: make(map[capKey]wire.Capability)}
	c.verify.SetKey(pub)
	return c, nil
}

func (c *capabilities) public() []byte { return c.key.Public().(ed25519.PublicKey) }

// issue returns a read capability of file at version for the client that
// proved key, or none when it proved no key (it then reads through the
// server only). One issued less than half its lifetime ago is reused, so
// that holders, which remember the signatures they checked, verify one per
// open rather than one per block.
func (c *capabilities) issue(key []byte, file, version uint64) wire.Capability {
	if len(key) != ed25519.PublicKeySize {
		return wire.Capability{}
	}
	now := time.Now()
	k := capKey{string(key), file, version}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cp, ok := c.issued[k]; ok && cp.Expiry-now.UnixNano() > int64(wire.CapabilityLifetime/2) {
		return cp
	}
	cp := wire.IssueCapability(c.key, file, version, key, now)
	if len(c.issued) >= maxIssued {
		clear(c.issued)
	}
	c.issued[k] = cp
	return cp
}

// provenance checks that cp is one this server issued for version of
// file: whoever shows it got the block from a client that could read it.
// Its expiry and holder are not checked (a master copy outlives opens).
func (c *capabilities) provenance(cp *wire.Capability, file, version uint64) error {
	return c.verify.Check(cp, file, version, nil, time.Now())
}

// openCap is the capability an open's reply carries: to read the version
// opened, for an open that may read a regular file.
func (s *Server) openCap(c *wire.Conn, flags uint32, a *wire.Attr) wire.Capability {
	cl, _ := c.Value.Load().(*client)
	if cl == nil || flags&syscall.O_ACCMODE == syscall.O_WRONLY || a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return wire.Capability{}
	}
	return s.caps.issue(cl.key, a.Ino, a.Version)
}
