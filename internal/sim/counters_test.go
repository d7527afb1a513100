package sim

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// loadModel is the load accounting the way it reads in the spec: every
// message adds to the totals and to the current window at once, and a
// window closes when time reaches its end.
type loadModel struct {
	window, now, start   time.Duration
	net, winNet, maxNet  int64
	cli, winCli          []int64
	maxCli               int64
	msgBytes, blockBytes int64
}

func (m *loadModel) advance(t time.Duration) {
	m.now = max(m.now, t)
	if m.window > 0 && m.now-m.start >= m.window {
		m.close()
		m.start = m.now - (m.now-m.start)%m.window
	}
}

func (m *loadModel) close() {
	m.maxNet = max(m.maxNet, m.winNet)
	m.winNet = 0
	for k, v := range m.winCli {
		m.maxCli = max(m.maxCli, v)
		m.winCli[k] = 0
	}
}

func (m *loadModel) msg(from, to int, block bool) {
	n := m.msgBytes
	if block {
		n += m.blockBytes
	}
	m.net += n
	m.winNet += n
	for _, k := range []int{from, to} {
		if k >= 0 && k < len(m.cli) {
			m.cli[k] += n
			m.winCli[k] += n
		}
	}
}

// TestLoadWindowsMatchModel checks that Counters, which add a message to
// its load window only and fold each window into the totals when it
// closes, keep the same windows as the per-message model and end with its
// totals and maxima: unordered times, jumps over many windows, windows
// near the end of time, nodes that are not clients.
func TestLoadWindowsMatchModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	windows := []time.Duration{time.Second, time.Minute, 7, math.MaxInt64 / 2, math.MaxInt64 - 3, math.MaxInt64}
	for _, w := range windows {
		for _, start := range []time.Duration{0, math.MaxInt64 - 1000} {
			p := DefaultParams()
			p.Clients, p.LoadWindow = 5, w
			c := NewCounters(p)
			m := &loadModel{window: w, msgBytes: p.MessageBytes, blockBytes: p.BlockSize,
				cli: make([]int64, 5), winCli: make([]int64, 5)}
			now := start
			for range 20000 {
				switch r.IntN(4) {
				case 0:
					now -= time.Duration(r.IntN(1000)) // time may go back in a trace
				case 1:
					if now < math.MaxInt64/2 {
						now += time.Duration(r.Int64N(int64(3 * time.Minute)))
					}
				default:
					if now < math.MaxInt64-1000 {
						now += time.Duration(r.IntN(1000))
					}
				}
				c.advance(now)
				m.advance(now)
				from, to, block := r.IntN(9)-2, r.IntN(9)-2, r.IntN(2) == 0
				c.Msg(from, to, block)
				m.msg(from, to, block)
				if c.winNet != m.winNet || c.winStart != m.start {
					t.Fatalf("window %v at %v: window from %v with %d bytes, model from %v with %d",
						w, now, c.winStart, c.winNet, m.start, m.winNet)
				}
			}
			c.closeWindow()
			m.close()
			if c.netBytes != m.net || c.maxWinNet != m.maxNet || c.maxWinCli != m.maxCli || c.now != m.now {
				t.Fatalf("window %v: net %d max %d cli max %d now %v, model %d %d %d %v",
					w, c.netBytes, c.maxWinNet, c.maxWinCli, c.now, m.net, m.maxNet, m.maxCli, m.now)
			}
			for k := range m.cli {
				if c.clientBytes[k] != m.cli[k] {
					t.Fatalf("window %v: client %d has %d bytes, model %d", w, k, c.clientBytes[k], m.cli[k])
				}
			}
		}
	}
}
