package prefetch

import "unsafe"

// Lines asks the processor to bring the lines at addrs into its caches
// (PREFETCHT0) and returns at once: unlike a load, a prefetch does not wait
// for its line, so a sim.Toucher's stages whose values it does not need
// hold no instruction back while the lines arrive. A prefetch never
// faults, and Go's heap does not move, so an address of a heap object
// stays the object's (or is harmless) until it is used.
//
//go:noescape
func Lines(addrs []uintptr)

// Words asks the processor for the lines of the 8-byte words base[ids[k]],
// for the n numbers ids[0], ids[stride], ids[2*stride], ... (stride in
// bytes: the ID fields of a slice of records). It returns at once, like
// Lines; a number past the end of base's table is harmless (a prefetch
// never faults), so the caller need not check the numbers.
//
//go:noescape
func Words(base unsafe.Pointer, ids *uint32, stride uintptr, n int)
