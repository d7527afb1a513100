// Package agent is the coopfs client: the part of `coopfs mount` below the
// FUSE adapter. It keeps one multiplexed, authenticated connection to the
// server (reconnecting when it breaks), a memory block cache with sequential
// read-ahead and single-flight merging of identical misses, optionally a
// persistent disk tier under it (tiers.go: reads go memory → disk → peer →
// server, and peers serve forwarded misses from their disk too), and it
// implements close-to-open consistency: cached blocks are tagged with the
// version they belong to, an open revalidates the file's version with the
// server unless a server callback vouches for it (callbacks.go, cached.go:
// lookups, getattrs, listings and opens of unchanged files need no
// message), and writes reach the server before write(2) returns
// (write-through), so they are there by close or fsync.
//
// The coordination policy the server runs (learned at the handshake) sits
// behind one seam (policy.go): the read path and the tiers report events
// (an open, a hit, a miss, an eviction, a server message) and the policy
// decides where a miss is read from and what peers and the server are
// sent. Adapters: none, directory (pdirectory.go, coop.go) and hints
// (phints.go), around the state machines of internal/coord; peernet.go is
// the client-to-client network both cooperative policies use.
//
// Agent implements fusefs.Backend; the same methods are the client library
// that `coopfs demo` and `coopfs bench` use where FUSE is not available.
package agent
