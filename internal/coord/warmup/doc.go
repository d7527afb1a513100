// Package warmup plans a cluster warm-up (`coopfs warmup --cluster`): a set
// of clients fetch the same files so that every byte crosses the server's
// link about once.
//
// The plan: the file list, in its order, is cut into one contiguous segment
// per client of about equal bytes (files larger than a segment are split at
// block boundaries). Phase 1: client i fetches segment i from the server.
// When every client has its segment, phase 2: client i fetches the other
// segments starting with segment i+1 (a ring), through the coordination
// policy, which finds them at the peers that hold them (at first each
// segment has one holder, and every holder serves one reader).
//
// A client that leaves in phase 1 has its unfinished share handed to the
// live client with the least outstanding work; one that leaves in phase 2
// is dropped (what only it held is then fetched from the server again).
//
// Job is a deterministic state machine: events in (reports, departures),
// actions out (assignments to push), no I/O, goroutines or clocks. The
// server drives it (internal/server/warmup.go) under one mutex.
package warmup
