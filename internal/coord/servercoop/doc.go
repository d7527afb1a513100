// Package servercoop is the cooperation policy of a group of caches that
// each own part of the blocks (seed 004, "Caching for NASD"): several storage
// servers, or clients with distinct working sets.
//
// It decides, and only decides: where a member looks after a local miss
// (nowhere, the global overflow cache, or the peer its reference list names),
// what happens to a member's LRU victim (dropped, sent to the overflow cache,
// or forwarded once to a peer chosen by the 1-Chance target variant), and
// whether a block hit at a peer goes back to its owner (return on hit). The
// caches themselves belong to the caller: the simulator (internal/sim/nasd)
// and, later, the live servers drive the same Group.
//
// Schemes:
//   - NonCoop: each member its own LRU cache; victims are dropped.
//   - Global: every member's victims go to one overflow cache (the caller
//     sizes it; seed 004 uses 75 % of the total); its victims are dropped.
//   - OneChance: a member forwards its LRU victim to a peer only if the
//     block is its own (owned) — a block received from a peer is dropped,
//     so every block is forwarded at most once per stay away from its owner.
//     The member remembers where it sent the block in a reference list of
//     RefRatio × CacheEntries entries (LRU; the oldest reference is
//     forgotten, and the block becomes unreachable). The target is chosen by
//     the Target variant: Manager (least busy member, asking the manager:
//     two extra messages), Better (the same choice, known locally by
//     snooping), Random, or Hints (the peer with the fewest blocks sent to
//     it plus received from it). ReturnOnHit sends a block hit at a peer
//     back to its owner.
//
// A Group is a deterministic state machine: no I/O, no clock, no goroutines;
// randomness comes from a generator seeded by Config.Seed. Every call is
// O(1) except target choice by load, which scans the members (a constant of
// the deployment, not of the workload). A Group is not safe for concurrent
// use; wrap it in a mutex in live code.
package servercoop
