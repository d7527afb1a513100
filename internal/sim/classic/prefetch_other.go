//go:build !amd64

package classic

// prefetchBlocks is a hint (see prefetch_amd64.go); without the
// instruction it does nothing.
func prefetchBlocks(bl *block, id *uint32, stride uintptr, n int) {}
