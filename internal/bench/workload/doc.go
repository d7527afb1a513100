// Package workload holds the live workload generators of the demo and the
// benchmarks: reproducible data sets, sequential readers that hash what they
// read, 4 KiB random readers, and the page-cache controls a measurement
// needs (drop one file's pages, drop all caches, O_DIRECT opens with aligned
// buffers). Readers work on anything with a ReadAt, so the same workload
// runs through a FUSE mount (an *os.File) or through the client library
// (an agent file) when FUSE is not available.
package workload
