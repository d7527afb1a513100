// Package demo is `coopfs demo`: it generates a data set, starts a local
// cluster (internal/bench/cluster) of one server and N FUSE clients, has
// every client read the same files at once, checks every byte against the
// SHA-256 of the data set, and reports throughput and the reads by layer
// taken from each process's counters. Where FUSE cannot be used it runs the
// same workload through the client library (internal/agent) instead:
// in-process clients over loopback TCP to a `coopfs serve` process.
package demo
