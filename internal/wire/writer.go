package wire

import (
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The write path. A frame is written by the goroutine that sends it, with
// no hand-off, when no other frame is being written; otherwise it is queued
// and the connection's write loop writes it after the frame in progress,
// frames without a data section (requests, small replies, forwards,
// negative replies) first: a control message never waits behind queued
// megabytes of blocks for the same peer. Queued control frames are written
// together, in one system call.
//
// INVARIANT: at most one goroutine writes to the socket at a time: the one
// that set Conn.writing. While writing is set and a queue is not empty,
// the write loop has been kicked or is draining the queues.

// frameReq is one frame waiting for the writer.
type frameReq struct {
	head, data []byte
	done       chan error // nil: nobody waits
}

// write sends one frame and waits until it is written.
func (c *Conn) write(m Msg, flags uint8, id uint64) error {
	if c.closed.Load() {
		return c.Err()
	}
	head, data, long := appendFrameLong(nil, m, flags, id, c.crc)
	if long {
		// The receiver's decoder would refuse it and drop the connection.
		return &RemoteError{Errno: syscall.ENAMETOOLONG,
			Msg: fmt.Sprintf("%v: a path or name longer than %d bytes (the protocol's limit)", m.Type(), MaxPath)}
	}
	if uint32(len(head)-HeaderSize) > c.cfg.Limits.MaxMeta || uint32(len(data)) > c.cfg.Limits.MaxData {
		return fmt.Errorf("send %v: %w", m.Type(), ErrFrameTooLarge)
	}
	r := &frameReq{head: head, data: data}
	c.wmu.Lock()
	if !c.writing {
		c.writing = true
		c.wmu.Unlock()
		one := [1]*frameReq{r}
		err := c.writeOut(one[:])
		c.endDirect()
		if err != nil {
			return err
		}
		c.observeOut(m, len(head)+len(data))
		return nil
	}
	r.done = make(chan error, 1)
	if len(data) == 0 {
		c.prioQ = append(c.prioQ, r)
	} else {
		c.bulkQ = append(c.bulkQ, r)
	}
	c.wmu.Unlock()
	select {
	case err := <-r.done:
		if err != nil {
			return err
		}
	case <-c.done:
		return c.Err()
	}
	c.observeOut(m, len(head)+len(data))
	return nil
}

func (c *Conn) observeOut(m Msg, n int) {
	if c.cfg.Observer != nil {
		c.cfg.Observer.Message("out", observed(m), n)
	}
}

// endDirect ends a write made by the sender itself: frames queued in the
// meantime are left to the write loop, so the sender returns at once.
func (c *Conn) endDirect() {
	c.wmu.Lock()
	if len(c.prioQ) == 0 && len(c.bulkQ) == 0 {
		c.writing = false
		c.wmu.Unlock()
		return
	}
	c.wmu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// observed is the type metrics count a message as: a request wrapped in
// As (the caller's identity) counts as the request it wraps.
func observed(m Msg) Type {
	if as, ok := m.(*As); ok && as.Msg != nil {
		return as.Msg.Type()
	}
	return m.Type()
}

// writeLoop drains the queues when a direct writer leaves frames behind.
func (c *Conn) writeLoop() {
	var batch []*frameReq
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		for {
			batch = c.nextBatch(batch[:0])
			if len(batch) == 0 {
				break
			}
			err := c.writeOut(batch)
			for i, r := range batch {
				r.done <- err
				batch[i] = nil
			}
		}
	}
}

// nextBatch takes every queued control frame, or else one data frame; when
// both queues are empty it clears writing and returns nothing.
func (c *Conn) nextBatch(batch []*frameReq) []*frameReq {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	switch {
	case len(c.prioQ) > 0:
		batch = append(batch, c.prioQ...)
		clear(c.prioQ)
		c.prioQ = c.prioQ[:0]
	case len(c.bulkQ) > 0:
		batch = append(batch, c.bulkQ[0])
		c.bulkQ[0] = nil
		c.bulkQ = c.bulkQ[1:]
		if len(c.bulkQ) == 0 {
			c.bulkQ = nil // let the backing array go
		}
	default:
		c.writing = false
	}
	return batch
}

// writeOut writes frames to the socket (the caller holds the writer role).
// Under TLS their records are gathered into few system calls. A failed
// write closes the connection.
func (c *Conn) writeOut(frames []*frameReq) error {
	// wbufs keeps its backing array from frame to frame; WriteTo consumes
	// wpending, a second header over the same array.
	bufs := c.wbufs[:0]
	for _, r := range frames {
		bufs = append(bufs, r.head)
		if len(r.data) > 0 {
			bufs = append(bufs, r.data)
		}
	}
	c.wbufs = bufs
	c.wpending = bufs
	// The write deadline is renewed at most once a second: setting it
	// costs a timer update per frame, and a deadline 59–60 s away is as
	// good a bound as one exactly 60 s away.
	if now := time.Now(); now.Sub(c.deadlineSet) > time.Second {
		c.nc.SetWriteDeadline(now.Add(writeTimeout))
		c.deadlineSet = now
	}
	if c.batcher != nil {
		c.batcher.startBatch()
	}
	_, err := c.wpending.WriteTo(c.nc)
	clear(c.wbufs) // no references to sent frames

	if c.batcher != nil {
		if ferr := c.batcher.flush(); err == nil {
			err = ferr
		}
	}
	if err != nil {
		c.fail(err)
		return c.Err()
	}
	return nil
}

// notSentLowat bounds the bytes a socket holds unsent, so that queued data
// waits in the queues, where control frames can overtake it, rather than in
// the kernel's send buffer (seconds of it on a slow link).
const notSentLowat = 128 << 10

func limitUnsent(nc net.Conn) {
	tc, ok := tcpConn(nc)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, notSentLowat)
	})
}

// writeTimeout bounds one frame's write: a peer that stops reading for this
// long is treated as dead rather than blocking its senders forever.
const writeTimeout = 60 * time.Second
