package server

import (
	"net"
	"sync"

	"github.com/coopfs/coopfs/internal/wire"

	"golang.org/x/sync/semaphore"
)

// inflight holds the in-flight byte budgets shared by connections: one per
// client address (an IPv6 /64), and one for the whole server. A client's
// connections each have their own budget too (wire.ConnConfig); opening
// more of them no longer multiplies what one client may hold.
type inflight struct {
	perAddr int64
	total   *semaphore.Weighted

	mu    sync.Mutex
	addrs map[string]*addrBudget
}

type addrBudget struct {
	sem  *semaphore.Weighted
	refs int // connections using it
}

func newInflight(l Limits) *inflight {
	return &inflight{perAddr: l.MaxInFlightPerAddr, total: semaphore.NewWeighted(l.MaxInFlightTotal),
		addrs: make(map[string]*addrBudget)}
}

// join returns the budgets a connection from ip takes its request bytes
// from, and the function to call when the connection ends.
func (f *inflight) join(ip string) ([]*semaphore.Weighted, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.addrs[ip]
	if b == nil {
		b = &addrBudget{sem: semaphore.NewWeighted(f.perAddr)}
		f.addrs[ip] = b
	}
	b.refs++
	var once sync.Once
	return []*semaphore.Weighted{b.sem, f.total}, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if b.refs--; b.refs == 0 {
				delete(f.addrs, ip)
			}
		})
	}
}

// remoteIP is the address a connection counts against (wire.Conn.RemoteIP).
func remoteIP(nc net.Conn) string { return wire.RemoteIP(nc) }
