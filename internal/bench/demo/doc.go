// Package demo is `coopfs demo`: it generates a data set, has several
// clients read the same files, checks every byte against the SHA-256 of the
// data set, and reports throughput and where the reads were served, taken
// from each process's counters.
//
// RunAuto picks the mode. Where root and network namespaces are available
// (internal/bench/nscluster) every client is a host on the testbed with its
// own link and the server's link shaped to be the bottleneck; client1 reads
// the data set first, then the others at once, under each policy of
// Config.Policies side by side (none, directory, hints), and the report
// gives the speed-up over none and the server's bytes (HostsReport).
// Elsewhere it says why and runs Run: a local cluster on loopback
// (internal/bench/cluster) of one server and N FUSE clients, or, where
// FUSE cannot be used, the same workload through the client library
// (internal/agent): in-process clients over loopback TCP to a `coopfs
// serve` process.
package demo
