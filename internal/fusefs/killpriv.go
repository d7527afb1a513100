package fusefs

import (
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
)

// The kernel reads a file's security.capability before every write(2) to
// it (file_remove_privs: a write must drop file capabilities), and a FUSE
// mount never marks an inode as having none (S_NOSEC), so each write of a
// small file costs a GETXATTR round trip besides the write itself — the
// largest single share of `tar x`'s messages. capsCache answers that read
// locally while this mount holds the file open for writing and has seen
// the attribute absent since that open: at the first open for writing, on
// every setxattr or removexattr through this mount, and when the last
// writer closes, the mount asks the server again. A new file this mount
// creates has no capabilities. A change of the attribute by another client
// while this one writes the file is seen at the next open, as the file's
// data is (close-to-open).

// capsName is the attribute the kernel reads before a write.
const capsName = "security.capability"

// capsCache is one node's knowledge of security.capability. state's low
// bit says "absent" (valid while writers > 0); the rest is a generation
// that every invalidation advances, so that a reply that raced with an
// invalidation does not set the bit.
type capsCache struct {
	writers atomic.Int32
	state   atomic.Uint64
}

// absent reports whether the attribute is known to be absent, and else
// the generation to pass to noteAbsent after asking the server.
func (c *capsCache) absent() (bool, uint64) {
	s := c.state.Load()
	return s&1 == 1 && c.writers.Load() > 0, s &^ 1
}

// noteAbsent records the server's "no such attribute" if nothing changed
// since gen was read.
func (c *capsCache) noteAbsent(gen uint64) {
	if c.writers.Load() > 0 {
		c.state.CompareAndSwap(gen, gen|1)
	}
}

// invalidate forgets what is known.
func (c *capsCache) invalidate() {
	for {
		s := c.state.Load()
		if c.state.CompareAndSwap(s, (s&^1)+2) {
			return
		}
	}
}

// opened counts a writer; the first one asks the server afresh, unless
// created says the file is new.
func (c *capsCache) opened(created bool) {
	if c.writers.Add(1) == 1 {
		c.invalidate()
		if created {
			_, gen := c.absent()
			c.state.CompareAndSwap(gen, gen|1)
		}
	}
}

// closed uncounts a writer.
func (c *capsCache) closed() {
	if c.writers.Add(-1) == 0 {
		c.invalidate()
	}
}

// writable reports whether open flags allow writing.
func writable(flags uint32) bool { return flags&syscall.O_ACCMODE != syscall.O_RDONLY }

// writerHandle wraps a new handle of in's node as a counted writer when
// flags allow writing.
func writerHandle(h *handle, in *fs.Inode, flags uint32, created bool) *handle {
	if !writable(flags) || in == nil {
		return h
	}
	if n, ok := in.Operations().(*node); ok {
		n.caps.opened(created)
		h.writer = n
	}
	return h
}
