// Package cluster launches a local coopfs cluster for demos, benchmarks and
// tests: one `coopfs serve` and N `coopfs mount` processes of a coopfs
// binary on loopback, each with its own free ports, temporary mount point
// and --metrics endpoint. Start waits until the server answers and every
// mount is live; Close tears everything down (SIGTERM to the mounts, a lazy
// fusermount3/umount fallback, then the server) and removes the temporary
// directories. Close also runs when the context given to Start ends (Ctrl-C)
// and the kernel stops the children if the launching process dies.
//
// Counters collects every process's Prometheus counters (obs.Fetch), so
// that a workload can report reads by layer and bytes moved per process.
package cluster
