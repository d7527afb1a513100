package agent

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// Releases nobody waits for. The kernel does not make close(2) wait for
// FUSE's RELEASE (the data is on the server already: writes are
// write-through, and a close's FLUSH is answered first), so a Release
// message per closed file is a round trip that only costs. The agent queues
// the handles of closed files and sends them in one one-way ReleaseBatch
// per batch, when the batch is full or shortly after the first one was
// queued. A file that took locks is released at once (its flock and OFD
// locks go with the handle, and the next locker must not find them).
//
// While the mount creates files, the queued releases ride on the next
// Commit (pipe.go) instead: the queue then waits up to releaseRide for one.
//
// The queue is bounded: a release that finds it full is sent by its caller.
// An open that the server refuses with EMFILE (the per-client handle cap)
// sends the queue and tries again, a few times over up to 200 ms, so that
// the releases of files closed a moment ago can make room (agent.open).

const (
	releaseBatch = 64                   // handles per ReleaseBatch
	releaseDelay = 2 * time.Millisecond // how long a queued release may wait
	releaseMax   = 1024                 // queued handles at most
	// While files are being created and committed (pipe.go), a queued
	// release waits up to releaseRide for the next Commit to carry it.
	releaseRide   = 20 * time.Millisecond
	releaseRecent = 100 * time.Millisecond // a Commit this recent means more are coming
)

// releaser is the queue of handles to release, all of one session
// generation.
type releaser struct {
	a *Agent

	mu      sync.Mutex
	gen     uint64
	pending []uint64
	timer   *time.Timer
	closed  bool
	taken   time.Time // when a Commit last took handles (take)
}

// add queues handle h of session generation gen; false: the queue is full
// (or closed), the caller releases h itself.
func (r *releaser) add(gen, h uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || len(r.pending) >= releaseMax {
		return false
	}
	if gen != r.gen {
		r.pending = r.pending[:0] // the server forgot those with the old connection
		r.gen = gen
	}
	r.pending = append(r.pending, h)
	switch {
	case len(r.pending) >= releaseBatch:
		go r.flush()
	case r.timer == nil:
		delay := releaseDelay
		if time.Since(r.taken) < releaseRecent {
			delay = releaseRide
		}
		r.timer = time.AfterFunc(delay, func() { r.flush() })
	}
	return true
}

// take hands out up to releaseBatch queued handles of session generation
// gen, for a message that carries them (a Commit, pipe.go).
func (r *releaser) take(gen uint64) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.taken = time.Now()
	if r.gen != gen || len(r.pending) == 0 {
		return nil
	}
	n := min(len(r.pending), releaseBatch)
	hs := slices.Clone(r.pending[:n])
	r.pending = r.pending[n:]
	if len(r.pending) == 0 && r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	return hs
}

// flush sends the queued handles one-way; it returns how many it sent.
func (r *releaser) flush() int { return r.flushWait(false) }

// flushWait sends the queued handles; with wait it returns once the
// server has closed them. It returns how many it sent.
func (r *releaser) flushWait(wait bool) int {
	r.mu.Lock()
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	hs, gen := r.pending, r.gen
	r.pending = nil
	r.mu.Unlock()
	sent := len(hs)
	for len(hs) > 0 {
		n := min(len(hs), releaseBatch)
		r.send(gen, hs[:n], wait)
		hs = hs[n:]
	}
	return sent
}

func (r *releaser) send(gen uint64, hs []uint64, wait bool) {
	// Handles belong to their connection: a broken one took them along (the
	// server closes a connection's handles when it goes), so there is no
	// reason to wait for a reconnection here.
	c, cur, ok := r.a.sess.live()
	if !ok || cur != gen {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.a.cfg.RequestTimeout)
	defer cancel()
	var err error
	m := &wire.ReleaseBatch{Handles: hs}
	if wait {
		_, err = c.Call(ctx, m) // answered OK once done
	} else {
		err = c.Send(m)
	}
	if err != nil {
		r.a.log.Warn("release of closed files failed", "handles", len(hs), "err", err)
	}
}

// close sends what is queued and queues nothing more.
func (r *releaser) close() {
	r.flushWait(true)
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}
