// Package meta is `coopfs bench meta`: metadata and small-file workloads run
// side by side, in one run, against three targets on the same export
// directory:
//
//   - ext4: the export directory itself (whatever file system holds it);
//   - passthrough: a FUSE passthrough of the export (bindfs, or go-fuse's
//     loopback file system in its own process when bindfs is missing or
//     --passthrough loopback is given): the ceiling of any FUSE file system;
//   - coopfs: a coopfs server exporting the directory and one mount, policy
//     none, started with internal/bench/cluster.
//
// Per repetition and target it runs, in this order: `tar x` of a tree of many
// small files (default: the Go installation's src/ tree), `find -type f -exec
// stat` cold, `grep -r` cold, `grep -r` again on the unchanged tree (warm),
// `find -exec stat` warm, `du -s` warm, a Python import of a generated
// package tree cold and warm, and `rm -rf`. "Cold" means: sync, drop the
// kernel's caches (/proc/sys/vm/drop_caches, root only) and remount the FUSE
// targets, restarting the coopfs server and client so that their caches are
// empty too. The real tools run, as users run them.
//
// The coopfs rows are compared with the passthrough (ratio of times, lower
// is better) against the targets of issue 9: warm workloads ≤ 1.3×, cold
// workloads, tar and rm ≤ 2×. The messages the coopfs client sends during
// each workload come from its /metrics (coopfs_messages_total by type); for
// the warm grep they are also given per directory and per file of the tree
// (target: ≤ 1 per directory, none per file).
//
// After the steps, a round-trip probe (stat-rtt) creates 1000 empty files,
// lets their kernel entries expire and times one lstat of each: on the FUSE
// targets every call is one LOOKUP, on coopfs one Lookup message (FUSE op →
// agent → wire → server → back); issue 9's target is a median of ≤ 50 µs.
// BenchmarkRoundTrip (rtt_test.go) splits that round trip into TCP, the
// wire layer's goroutine hand-offs, a wire Ping and a wire Lookup.
//
// A last phase mounts coopfs twice, writes a tree of small files through one
// mount and reads it through the other, checking every byte, then rewrites
// every file (same sizes, new bytes) and checks again: close-to-open across
// clients, timed.
package meta
