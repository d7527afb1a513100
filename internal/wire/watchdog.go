package wire

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The watchdog bounds what a connection has under way: an inline request
// that runs too long hands the reading over to a fresh goroutine, a request
// whose handler has not returned within HandlerTimeout is answered
// ETIMEDOUT, and a call whose reply has not come within its timeout fails.
//
// One timer per connection does all three, instead of a timer per request
// and per call: adding a timer that becomes the earliest of its P makes the
// runtime wake another thread (the network poller's, or an idle one to
// become it), and on a busy metadata path that was one or two thread
// wake-ups of every request (docs/benchmarks-meta.md, "The round trip,
// microsecond by microsecond"). Requests and calls read no clock: the tick
// that first sees one notes the time, so a deadline is never early and at
// most two ticks late.
//
// The timer ticks every InlineStall while an inline request that may wait
// for other clients is served, else every slow period (watchdogPeriod, or
// less for short timeouts); it stops at a tick that finds nothing under
// way and nothing begun since the previous tick. A steady stream of quick
// requests (ConnConfig.InlineQuick) so keeps one slow tick going rather
// than re-arming a timer per request.
//
// INVARIANT: cur is 0 exactly while the timer is stopped; otherwise the
// timer is pending (or its function about to run) with period cur.
type watchdog struct {
	c *Conn

	slow time.Duration // the tick without inline requests that may wait

	mu      sync.Mutex
	cur     time.Duration // the running tick's period; 0: stopped
	t       *time.Timer
	served  served // sentinel of the list of requests being served
	waiters int    // inline requests in the list that may wait for other clients
	calls   int    // calls with a timeout in Conn.pending
	active  bool   // something began since the last tick
}

// served is a request being served, in the watchdog's list.
type served struct {
	prev, next *served
	h          header
	mode       inlineMode // notInline: served on a goroutine of its own
	seenAt     time.Time  // the first tick that saw it (zero: none yet)
	// state: servingState until the handler returns (doneState), or
	// handedOverState once another goroutine took over the reading (an
	// inline request only).
	state    atomic.Int32
	answered atomic.Bool // the reply (or the timeout's) was sent
}

const (
	servingState int32 = iota
	doneState
	handedOverState
)

// watchdogPeriod is the slow tick: the resolution of handler and call
// timeouts, and how long a quick inline request (ConnConfig.InlineQuick)
// may hold up the reading (once to twice this).
const watchdogPeriod = 100 * time.Millisecond

func newWatchdog(c *Conn) *watchdog {
	w := &watchdog{c: c, slow: watchdogPeriod}
	if d := c.cfg.HandlerTimeout / 8; d > 0 && d < w.slow {
		w.slow = d
	}
	w.served.next, w.served.prev = &w.served, &w.served
	w.t = time.AfterFunc(time.Hour, w.tick)
	w.t.Stop()
	return w
}

// armLocked makes the timer tick at most every d.
func (w *watchdog) armLocked(d time.Duration) {
	w.active = true
	if w.cur == 0 || d < w.cur {
		w.cur = d
		w.t.Reset(d)
	}
}

// begin records a request that starts being served.
func (w *watchdog) begin(h header, mode inlineMode) *served {
	s := &served{h: h, mode: mode}
	w.mu.Lock()
	s.prev, s.next = w.served.prev, &w.served
	s.prev.next, w.served.prev = s, s
	if mode == inlineMayWait {
		w.waiters++
		w.armLocked(InlineStall)
	} else {
		w.armLocked(w.slow)
	}
	w.mu.Unlock()
	return s
}

// end removes a request whose handler returned.
func (w *watchdog) end(s *served) {
	w.mu.Lock()
	s.prev.next, s.next.prev = s.next, s.prev
	s.prev, s.next = nil, nil
	if s.mode == inlineMayWait {
		w.waiters--
	}
	w.mu.Unlock()
}

// callTimeout registers a call's timeout (the call is in Conn.pending);
// the ticks then watch it.
func (w *watchdog) callTimeout(timeout time.Duration) {
	w.mu.Lock()
	w.calls++
	if d := timeout / 8; d > 0 && d < w.slow {
		w.slow = d
	}
	w.armLocked(w.slow)
	w.mu.Unlock()
}

// callDone unregisters a call with a timeout.
func (w *watchdog) callDone() {
	w.mu.Lock()
	w.calls--
	w.mu.Unlock()
}

// stallBound is how long an inline request of mode may hold up the reading.
func (w *watchdog) stallBound(mode inlineMode) time.Duration {
	if mode == inlineMayWait {
		return InlineStall
	}
	return w.slow
}

// tick runs while the connection has something under way.
func (w *watchdog) tick() {
	now := time.Now()
	var handOver int
	var late []*served
	w.mu.Lock()
	timeout := w.c.cfg.HandlerTimeout
	for s := w.served.next; s != &w.served; s = s.next {
		if s.seenAt.IsZero() {
			s.seenAt = now
			continue
		}
		ran := now.Sub(s.seenAt)
		if s.mode != notInline && ran >= w.stallBound(s.mode) && s.state.CompareAndSwap(servingState, handedOverState) {
			handOver++
		}
		if timeout > 0 && ran >= timeout && s.answered.CompareAndSwap(false, true) {
			late = append(late, s)
		}
	}
	calls := w.calls
	busy := w.served.next != &w.served || calls > 0 || w.active
	w.active = false
	switch {
	case w.cur < 0 || !busy || w.c.ctx.Err() != nil:
		if w.cur >= 0 {
			w.cur = 0
		}
	case w.waiters > 0:
		w.cur = InlineStall
		w.t.Reset(w.cur)
	default:
		w.cur = w.slow
		w.t.Reset(w.cur)
	}
	w.mu.Unlock()
	for range handOver {
		go w.c.readLoop()
	}
	for _, s := range late {
		w.c.timedOut(s.h)
	}
	if calls > 0 {
		w.c.expireCalls(now)
	}
}

// stop ends the ticks of a closed connection for good.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.t.Stop()
	w.cur = -1 // never armed again: armLocked sees a running tick
	w.mu.Unlock()
}

// timedOut answers a request whose handler ran past HandlerTimeout.
func (c *Conn) timedOut(h header) {
	if c.ctx.Err() != nil {
		return
	}
	if c.cfg.OnTimeout != nil {
		c.cfg.OnTimeout(h.typ)
	}
	if h.flags&FlagOneWay == 0 {
		c.write(errorMsg(fmt.Errorf("%v: not finished within %s: %w", h.typ, c.cfg.HandlerTimeout, syscall.ETIMEDOUT)), FlagReply, h.id)
	}
}
