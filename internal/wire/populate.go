package wire

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// populateMin is the smallest data section whose pages are populated in
// one system call.
const populateMin = 256 << 10

// AllocData returns a zeroed buffer of n bytes for block data, its pages
// mapped at once (populate) when it is large.
func AllocData(n int) []byte {
	b := make([]byte, n)
	populate(b)
	return b
}

// populate maps the pages of a freshly allocated buffer in one system call
// (MADV_POPULATE_WRITE) before its bytes arrive. A large Go allocation is
// usually fresh memory (the heap grows as the caches fill): copying a
// block into it took one page fault per 4 KiB, a quarter of a client's CPU
// in a cold read. The contents are left as they are; a kernel without the
// advice (before 5.14) only keeps the faults. The pages become resident
// before the bytes arrive: a peer that claims a section and sends nothing
// holds at most upfront bytes of one frame per connection (frames are read
// one at a time, and only after the handshake, whose limits allow no data).
func populate(b []byte) {
	if len(b) < populateMin {
		return
	}
	const page = 4096
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	first := (start + page - 1) &^ (page - 1) // whole pages inside b only
	last := (start + uintptr(len(b))) &^ (page - 1)
	if last <= first {
		return
	}
	_ = unix.Madvise(b[first-start:last-start], unix.MADV_POPULATE_WRITE)
}
