//go:build !amd64

package dirsim

// prefetch is a hint (see prefetch_amd64.go); without the instruction it
// does nothing, and Touch's last stages load nothing.
func prefetch(addrs []uintptr) {}
