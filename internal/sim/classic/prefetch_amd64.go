package classic

// prefetchBlocks asks the processor to bring the lines of the block
// records bl[id] into its caches (PREFETCHT0), for the n block numbers at
// id, id+stride, ... (stride in bytes: the ID fields of a slice of
// accesses). It returns at once: a prefetch waits for nothing and never
// faults, so a number past the table's end (a block new to the caches) is
// harmless.
//
//go:noescape
func prefetchBlocks(bl *block, id *uint32, stride uintptr, n int)
