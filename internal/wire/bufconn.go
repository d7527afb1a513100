package wire

import (
	"bufio"
	"net"
	"sync"
)

// bufferedConn sits between crypto/tls and the socket. crypto/tls reads and
// writes one record (at most 16 KiB) per system call; a 1 MiB block then
// costs some 130 system calls where a plaintext frame costs a few. Reads
// go through a buffer, and the records of one frame are gathered and
// written together (Conn.writeLoop brackets each frame with batch and
// flush).
type bufferedConn struct {
	net.Conn
	r *bufio.Reader

	mu    sync.Mutex
	batch bool
	w     []byte
}

// bufferedIO is the size of the read buffer and of a batch of records.
const bufferedIO = 256 << 10

func newBufferedConn(nc net.Conn) *bufferedConn {
	return &bufferedConn{Conn: nc, r: bufio.NewReaderSize(nc, bufferedIO)}
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *bufferedConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.batch {
		return b.Conn.Write(p)
	}
	if len(b.w)+len(p) > bufferedIO {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	if len(p) >= bufferedIO {
		return b.Conn.Write(p)
	}
	b.w = append(b.w, p...)
	return len(p), nil
}

func (b *bufferedConn) flushLocked() error {
	if len(b.w) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.w)
	b.w = b.w[:0]
	return err
}

// startBatch gathers the writes that follow until flush.
func (b *bufferedConn) startBatch() {
	b.mu.Lock()
	b.batch = true
	b.mu.Unlock()
}

// flush writes what was gathered and ends the batch.
func (b *bufferedConn) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batch = false
	return b.flushLocked()
}

// NetConn returns the wrapped connection (for socket options).
func (b *bufferedConn) NetConn() net.Conn { return b.Conn }
