//go:build !amd64

package prefetch

import "unsafe"

// Lines and Words are hints (see prefetch_amd64.go); without the
// instruction they do nothing.
func Lines(addrs []uintptr) {}

func Words(base unsafe.Pointer, ids *uint32, stride uintptr, n int) {}
