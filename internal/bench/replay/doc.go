// Package replay is `coopfs bench replay`: it plays one workload in the
// simulator's trace format (internal/sim) twice — live, on a coopfs cluster
// on the namespace testbed (internal/bench/nscluster: each trace client a
// host with its own shaped link and mount, every trace file a real file of
// the export, written before the run), and through the simulator with the
// same parameters (block size, cache sizes, policy, warm-up) — and reports
// per-layer hit ratios, manager messages per access, lookup messages per
// miss, hint correctness and the average block read time side by side,
// simulated against live, as the seed validated its simulator against its
// prototype (seed 002 chapter 6).
//
// The live replay is sequential in trace order: one access at a time, so
// that every cache sees the same sequence as in the simulator. Reads and
// writes use O_DIRECT so that each trace block is one request to the
// client (the kernel's page cache and read-ahead would hide local hits),
// and mounts run with --read-ahead 0. Live counts come from the
// processes' /metrics (the difference between a scrape at the end of the
// warm-up and one at the end); read times are measured by the driver
// around each pread.
package replay
