package agent

// The agent's tables are bounded (issue 7): a long-lived mount that opens
// millions of files, or serves thousands of requesters, keeps a fixed
// amount of state. Forgetting is always safe here:
//
//   - versions (file id → the version its cached blocks belong to): a file
//     forgotten is treated as never seen at its next open, so the kernel
//     drops its page cache for that open; cached blocks stay tagged with
//     their version and are never served for another.
//   - peers (connections to requesters under the directory policy): a
//     forgotten requester is dialed again when a forward for it arrives.

// maxVersions bounds Agent.versions.
const maxVersions = 1 << 20

// maxPeers bounds coop.peers.
const maxPeers = 256

// boundVersions drops entries past maxVersions (a.mu held). Go's map
// iteration starts at a random place, so the victims are random.
func (a *Agent) boundVersions() {
	for ino := range a.versions {
		if len(a.versions) <= maxVersions {
			return
		}
		delete(a.versions, ino)
	}
}

// prunePeers drops requester connections past maxPeers, closed ones first,
// never keep's (c.peerMu held).
func (c *peerNet) prunePeers(keep string) {
	if len(c.peers) <= maxPeers {
		return
	}
	for addr, p := range c.peers {
		if addr != keep && p.mu.TryLock() {
			if p.conn == nil || p.conn.Err() != nil {
				delete(c.peers, addr)
			}
			p.mu.Unlock()
		}
	}
	for addr, p := range c.peers {
		if len(c.peers) <= maxPeers {
			return
		}
		if addr != keep && p.mu.TryLock() {
			if p.conn != nil {
				p.conn.Close()
			}
			delete(c.peers, addr)
			p.mu.Unlock()
		}
	}
}
