// Package slowfs is a passthrough go-fuse file system whose reads cost a
// fixed latency and bypass the page cache: the export of a benchmark
// server on a testbed whose only disk is the page cache. Every read(2) of
// a file in the mount is a FUSE READ (FOPEN_DIRECT_IO: the kernel keeps no
// pages of the files, so a second read of the same bytes costs the same),
// served after Latency from the backing directory, one at a time (one disk
// arm). Writes, metadata and directory operations pass through at once.
//
// It stands in for a slow disk where the kernel has no device-mapper
// (dm-delay) or network block device to put real latency under a real
// block device (this testbed's kernel has neither: docs/benchmarks-replay.md).
package slowfs
