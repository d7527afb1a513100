//go:build !amd64

package prefetch

// Lines is a hint (see prefetch_amd64.go); without the instruction it
// does nothing.
func Lines(addrs []uintptr) {}
