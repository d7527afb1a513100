package server

import (
	"os"

	"golang.org/x/sys/unix"
)

// serverAhead is how many blocks after a sequential client's block the
// server asks the kernel to start reading from the disk.
const serverAhead = 2

// seqWindow: a block within this many of the handle's last one counts as
// sequential (a client with read-ahead has several blocks in flight, which
// arrive in any order).
const seqWindow = 8

// willNeed starts the disk reads of a block before its pread, and of the
// next blocks for a sequential reader. A client keeps several block
// requests in flight; their concurrent preads on one open file defeat the
// kernel's own read-ahead (it sees out-of-order offsets and falls back to
// small reads): in a stand-alone test of this pattern, half the speed and
// twice the system CPU per byte. One FADV_WILLNEED per block gives the disk whole-block requests
// and keeps it ahead of the reader; it only starts the reads and returns.
func (of *openFile) willNeed(index uint64, blockSize, size int64) {
	off := int64(index) * blockSize
	start, end := off, off+blockSize
	if sequential(of.lastRead.Swap(index+1), index) {
		// Each byte is advised once: what earlier calls covered is in
		// the page cache or on its way.
		start = max(off, of.advised.Load())
		end += serverAhead * blockSize
	}
	end = min(end, size)
	if end <= start {
		return
	}
	if end > of.advised.Load() {
		of.advised.Store(end) // racing readers of one handle only advise a range twice
	}
	fadvise(of.f, start, end-start)
}

// sequential reports whether block index follows a handle whose last
// block read was last-1 (last 0: none read yet) closely enough to count
// as a sequential reader.
func sequential(last, index uint64) bool {
	if last == 0 {
		return false
	}
	prev := last - 1
	return index+seqWindow >= prev && index <= prev+seqWindow
}

// fadvise is FADV_WILLNEED on [off, off+n) of f; a failure only costs
// speed, so it is ignored.
func fadvise(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) { _ = unix.Fadvise(int(fd), off, n, unix.FADV_WILLNEED) })
}
