// Package nasd simulates caching for several network-attached storage
// servers (seed 004, "Caching for NASD", Zhou and Yang): S storage servers,
// each owning part of the blocks, and C clients, with a cooperation scheme
// on each side — noncoop, global (an overflow cache of 75 % of the side's
// total cache) or 1chance (forward an owned LRU victim once to a peer, found
// again through a reference list of refratio × cache entries; targets
// manager, random, hints, better; optional return on hit). The policy
// decisions are internal/coord/servercoop's; this package holds the caches,
// the cost model (seed 004 table 2) and the read path:
//
//  1. the client's own cache: memory time;
//  2. the client side's cooperative cache (a peer client named by the
//     client's reference list, or the clients' overflow cache), one hop;
//  3. the owning server, Hops away: its cache, then the server side's
//     cooperative cache (the block comes back through the owner), then its
//     disk (seek + one block).
//
// A block fetched from below is cached by the client and, after a disk read,
// by the owning server. Forwards cost one block message (plus the manager's
// request and reply for the manager variant) and are charged to the access
// that caused them, as seed 004 adds up all network time.
//
// Sim implements sim.Algorithm (its cost goes in Outcome.ExtraMs) and
// keeps finer counts in Stats. Workload builds seed 004's synthetic
// workloads: ten application-like client traces, each twice, mapped onto
// the servers by a trace configuration from uneven (1) to even (S),
// lottery-merged.
package nasd
