package dirsim

// prefetch asks the processor to bring the lines at addrs into its caches
// (PREFETCHT0) and returns at once: unlike a load, a prefetch does not wait
// for its line, so Touch's last stages — whose values it does not need —
// hold no instruction back while the lines arrive. A prefetch never
// faults, and Go's heap does not move, so an address of a heap object
// stays the object's (or is harmless) until it is used.
//
//go:noescape
func prefetch(addrs []uintptr)
