package workload

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SeqResult is the outcome of a sequential read.
type SeqResult struct {
	Bytes   int64
	Elapsed time.Duration
	Digest  Digest // zero unless hashing was asked for
}

// MBps is the throughput in MB/s (10^6 bytes per second).
func (r SeqResult) MBps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds() / 1e6
}

// SeqOptions configure ReadSeq.
type SeqOptions struct {
	BufSize  int              // bytes per read; default 1 MiB
	Hash     bool             // compute the SHA-256 of what is read
	Progress func(done int64) // called after every read, if set
}

// ReadSeq reads r from offset 0 to end of file with BufSize reads into a
// page-aligned buffer. A read that returns fewer bytes than asked marks the
// end of the file.
func ReadSeq(ctx context.Context, r io.ReaderAt, o SeqOptions) (SeqResult, error) {
	if o.BufSize <= 0 {
		o.BufSize = chunk
	}
	buf := AlignedBuf(o.BufSize)
	h := sha256.New()
	var res SeqResult
	start := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n, err := r.ReadAt(buf, res.Bytes)
		if o.Hash {
			h.Write(buf[:n])
		}
		res.Bytes += int64(n)
		if o.Progress != nil {
			o.Progress(res.Bytes)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return res, fmt.Errorf("workload: read at %d: %w", res.Bytes, err)
		}
		if n < len(buf) {
			break
		}
	}
	res.Elapsed = time.Since(start)
	if o.Hash {
		h.Sum(res.Digest[:0])
	}
	return res, nil
}

// ReadFile opens path (with O_DIRECT if direct) and reads it sequentially.
func ReadFile(ctx context.Context, path string, direct bool, o SeqOptions) (SeqResult, error) {
	f, err := Open(path, direct)
	if err != nil {
		return SeqResult{}, err
	}
	defer f.Close()
	return ReadSeq(ctx, f, o)
}

// Open opens path read-only, with O_DIRECT if direct: reads then bypass the
// page cache and reach the file system as the application issued them.
func Open(path string, direct bool) (*os.File, error) {
	flags := os.O_RDONLY
	if direct {
		flags |= syscall.O_DIRECT
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, fmt.Errorf("workload: open: %w", err)
	}
	return f, nil
}

// RandResult is the outcome of a random-read run.
type RandResult struct {
	Ops     int64
	Elapsed time.Duration
}

// OpsPerSec is the rate of completed reads.
func (r RandResult) OpsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// RandOptions configure ReadRandom.
type RandOptions struct {
	IOSize  int    // bytes per read, aligned to it; default 4096
	Threads int    // concurrent readers; default 4
	Ops     int    // reads per thread; default 10000
	Seed    uint64 // offsets are reproducible for a seed
}

// ReadRandom reads IOSize-aligned blocks at uniformly random offsets of a
// file of size bytes, Ops per thread from Threads goroutines sharing r.
func ReadRandom(ctx context.Context, r io.ReaderAt, size int64, o RandOptions) (RandResult, error) {
	if o.IOSize <= 0 {
		o.IOSize = 4096
	}
	if o.Threads <= 0 {
		o.Threads = 4
	}
	if o.Ops <= 0 {
		o.Ops = 10000
	}
	blocks := size / int64(o.IOSize)
	if blocks == 0 {
		return RandResult{}, fmt.Errorf("workload: file of %d bytes has no %d-byte block", size, o.IOSize)
	}
	var wg sync.WaitGroup
	errs := make([]error, o.Threads)
	ops := make([]int64, o.Threads)
	start := time.Now()
	for t := range o.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(o.Seed, uint64(t)))
			buf := AlignedBuf(o.IOSize)
			for i := range o.Ops {
				if i%256 == 0 && ctx.Err() != nil {
					errs[t] = ctx.Err()
					return
				}
				off := rng.Int64N(blocks) * int64(o.IOSize)
				n, err := r.ReadAt(buf, off)
				if n != len(buf) {
					errs[t] = fmt.Errorf("workload: random read at %d: %d bytes: %w", off, n, err)
					return
				}
				ops[t]++
			}
		}()
	}
	wg.Wait()
	res := RandResult{Elapsed: time.Since(start)}
	for _, n := range ops {
		res.Ops += n
	}
	return res, errors.Join(errs...)
}

// AlignedBuf returns a zeroed buffer of n bytes starting on a page boundary
// (O_DIRECT needs it, and misaligned buffers slow every copy down).
func AlignedBuf(n int) []byte {
	const page = 4096
	b := make([]byte, n+page)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (page - 1))
	if off != 0 {
		off = page - off
	}
	return b[off : off+n : off+n]
}

// DropFile asks the kernel to drop the page cache of the file at path
// (posix_fadvise DONTNEED). Clean pages go at once, on FUSE mounts too.
func DropFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("workload: drop cache: %w", err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("workload: fadvise DONTNEED %s: %w", path, err)
	}
	return nil
}

// DropCaches writes back dirty data and drops the whole page cache, dentries
// and inodes (needs root): the next read of any file comes from its disk.
func DropCaches() error {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		return fmt.Errorf("workload: drop caches (needs root): %w", err)
	}
	return nil
}
