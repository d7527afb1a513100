package wire

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The watchdog bounds what a connection has under way: an inline request
// that runs past InlineStall hands the reading over to a fresh goroutine, a
// request whose handler has not returned within HandlerTimeout is answered
// ETIMEDOUT, and a call whose reply has not come within its timeout fails.
//
// One timer per connection does all three, instead of a timer per request
// and per call: adding a timer that becomes the earliest of its P makes the
// runtime wake another thread (the network poller's, or an idle one to
// become it), and on a busy metadata path that was one or two thread
// wake-ups of every request (docs/benchmarks-meta.md, "The round trip,
// microsecond by microsecond"). The timer runs every period while anything
// is under way and stops at the first tick that finds nothing. Requests and
// calls read no clock: the tick that first sees one notes the time, so a
// deadline is never early and at most two periods late.
//
// INVARIANT: armed is true exactly while the timer is pending or its
// function is about to run (the function re-arms or clears it under mu).
type watchdog struct {
	c *Conn

	mu     sync.Mutex
	period time.Duration
	armed  bool
	t      *time.Timer
	served served // sentinel of the list of requests being served
	calls  int    // calls with a timeout in Conn.pending
}

// served is a request being served, in the watchdog's list.
type served struct {
	prev, next *served
	h          header
	inline     bool
	seenAt     time.Time // the first tick that saw it (zero: none yet)
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

// watchdogPeriod is the tick of a connection without inline requests: the
// resolution of handler and call timeouts.
const watchdogPeriod = 100 * time.Millisecond

func newWatchdog(c *Conn) *watchdog {
	w := &watchdog{c: c, period: watchdogPeriod}
	if c.cfg.Inline != nil {
		w.period = InlineStall
	}
	if d := c.cfg.HandlerTimeout / 8; d > 0 && d < w.period {
		w.period = d
	}
	w.served.next, w.served.prev = &w.served, &w.served
	w.t = time.AfterFunc(time.Hour, w.tick)
	w.t.Stop()
	return w
}

// armLocked starts the ticks if they are not running.
func (w *watchdog) armLocked() {
	if !w.armed {
		w.armed = true
		w.t.Reset(w.period)
	}
}

// begin records a request that starts being served.
func (w *watchdog) begin(h header, inline bool) *served {
	s := &served{h: h, inline: inline}
	w.mu.Lock()
	s.prev, s.next = w.served.prev, &w.served
	s.prev.next, w.served.prev = s, s
	w.armLocked()
	w.mu.Unlock()
	return s
}

// end removes a request whose handler returned.
func (w *watchdog) end(s *served) {
	w.mu.Lock()
	s.prev.next, s.next.prev = s.next, s.prev
	s.prev, s.next = nil, nil
	w.mu.Unlock()
}

// callTimeout registers a call's timeout (under Conn.mu, before the call
// is in Conn.pending); the ticks then watch it.
func (w *watchdog) callTimeout(timeout time.Duration) {
	w.mu.Lock()
	w.calls++
	if d := timeout / 8; d > 0 && d < w.period {
		w.period = d
	}
	w.armLocked()
	w.mu.Unlock()
}

// callDone unregisters a call with a timeout.
func (w *watchdog) callDone() {
	w.mu.Lock()
	w.calls--
	w.mu.Unlock()
}

// tick runs every period while the connection has something under way.
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
		if s.inline && ran >= InlineStall && s.state.CompareAndSwap(servingState, handedOverState) {
			handOver++
		}
		if timeout > 0 && ran >= timeout && s.answered.CompareAndSwap(false, true) {
			late = append(late, s)
		}
	}
	calls := w.calls
	if (w.served.next != &w.served || calls > 0) && w.c.ctx.Err() == nil {
		w.t.Reset(w.period)
	} else {
		w.armed = false
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

// stop ends the ticks of a closed connection.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.t.Stop()
	w.armed = true // never armed again: the connection is closed
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
