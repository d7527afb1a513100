// Package wholefile is `coopfs bench wholefile`: the experiments of seed
// 001 (C2Cfs) run live on the namespace testbed (internal/bench/nscluster,
// shaped links), side by side for a list of policies, plus the cluster
// warm-up against independent warm-ups:
//
//   - stagger: clients read one large file in turn (each starts when the
//     previous one finished); the server's bytes for each client;
//   - web: the web-server workload (files of Zipf popularity, a log append
//     every 10 reads), clients in turn; the server's bytes for clients
//     2..n against client 1's;
//   - overload: two large files, two clients each; the second pair starts
//     while the first reads; the second pair's time against `none`;
//   - overhead: one client reads files of several sizes cold; the time
//     against `none`;
//   - warmup: `coopfs warmup --cluster` of a tree to n clients against n
//     independent `coopfs warmup`s under `none`; server bytes and time.
//
// Server bytes are the server's coopfs_read_bytes_total of its own layers
// (memory and disk), from its /metrics. Sizes are flags so that a test runs
// a tiny version. See docs/benchmarks-wholefile.md.
package wholefile
