package agent

import (
	"sync"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/wire"
)

// capStore keeps capabilities by file and version: the ones the server
// issued to this client (shown to the peers it reads from), or, under
// hints, the ones that came with master copies (shown to the server and
// to peers as the copy's provenance).
type capStore struct {
	mu sync.Mutex
	m  map[capID]wire.Capability
}

type capID struct{ file, version uint64 }

// maxCaps bounds a capStore; past it the store restarts.
const maxCaps = 1 << 14

func (s *capStore) put(c wire.Capability) {
	if !c.Valid() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxCaps {
		s.m = make(map[capID]wire.Capability)
	}
	s.m[capID{c.File, c.Version}] = c
}

// get returns the capability for version of file, or none.
func (s *capStore) get(file, version uint64) wire.Capability {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[capID{file, version}]
}

// servable says whether a peer that proved key (conn.PeerKey) may be
// served version v of block id against capability c: the server signed it
// for that file and version, it is unexpired, and it names that peer. A
// refusal is counted and logged.
func (a *Agent) servable(conn *wire.Conn, c *wire.Capability, id block.ID, v uint64) bool {
	var key []byte
	if conn != nil {
		key = conn.PeerKey()
	}
	err := a.caps.Check(c, id.File, v, key, time.Now())
	if err == nil && len(key) == 0 {
		err = wire.ErrCapability // a peer that proved no identity can be named by none
	}
	if err != nil {
		a.capRefusals.Add(1)
		a.log.Warn("refused a peer's request without a valid capability", "file", id.File, "index", id.Index,
			"version", v, "err", err)
		return false
	}
	return true
}
