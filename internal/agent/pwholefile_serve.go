package agent

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/wire"
)

// The wholefile policy's peer side: blocks served to clients fetching a
// file whole, at exactly the version asked, from memory or disk. A client
// whose own copy is still arriving (it reads the file and is one of its
// fetchers) serves the blocks it has, and waits a little for the first one
// asked when it is on its way, as the directory policy's holder does for a
// block "on its way" to it.

// maxPartialWait caps the wait a request may ask for.
const maxPartialWait = 10 * time.Second

// arrivalPoll bounds a waiting request's sleep between looks: an arrival
// is signalled before the block reaches the tiers (file.fetch stores it
// after the policy's fetch returns).
const arrivalPoll = 20 * time.Millisecond

// arrivals wakes requests waiting for blocks on their way here.
type arrivals struct {
	mu sync.Mutex
	ch chan struct{} // closed at the next arrival
}

func (a *arrivals) next() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ch == nil {
		a.ch = make(chan struct{})
	}
	return a.ch
}

func (a *arrivals) signal() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ch != nil {
		close(a.ch)
		a.ch = nil
	}
}

// arrived signals that blocks reached (or are reaching) the tiers.
func (w *wholeClient) arrived() { w.wake.signal() }

// servePeer answers peers' requests.
func (w *wholeClient) servePeer(ctx context.Context, c *wire.Conn, m wire.Msg) (wire.Msg, error) {
	switch m := m.(type) {
	case *wire.WholeRead:
		if !w.a.servable(c, &m.Cap, block.ID{File: m.File, Index: m.Index}, m.Version) {
			return nil, fmt.Errorf("segment of file %d at version %d: %w: %w", m.File, m.Version, wire.ErrCapability, syscall.EACCES)
		}
		return w.serveRead(ctx, m)
	case *wire.Ping:
		return &wire.OK{}, nil
	}
	return nil, fmt.Errorf("a wholefile peer does not serve %v: %w", m.Type(), syscall.ENOSYS)
}

// serveRead answers a WholeRead: the blocks held at the version asked from
// m.Index on, up to the first one missing; the first one is waited for up
// to m.Wait while this client is reading the file. None at all fails the
// request (the requester moves the work to another holder).
func (w *wholeClient) serveRead(ctx context.Context, m *wire.WholeRead) (wire.Msg, error) {
	bs := w.a.BlockSize()
	count := min(uint64(m.Count), uint64(max(1, int(wire.DefaultLimits.MaxData)/bs)))
	out := &wire.WholeData{Version: m.Version, Lens: make([]uint32, 0, count)}
	for i := uint64(0); i < count; i++ {
		id := block.ID{File: m.File, Index: m.Index + i}
		data, ok := w.a.forPeer(id, block.Version(m.Version))
		if !ok && i == 0 && m.Wait > 0 {
			data, ok = w.await(ctx, id, m.Version, min(time.Duration(m.Wait)*time.Millisecond, maxPartialWait))
		}
		if !ok {
			break
		}
		out.Lens = append(out.Lens, uint32(len(data)))
		if i == 0 {
			out.Data = data // blocks are read-only: one goes out without a copy
		} else {
			if i == 1 {
				out.Data = append(make([]byte, 0, int(count)*bs), out.Data...)
			}
			out.Data = append(out.Data, data...)
		}
	}
	if len(out.Lens) == 0 {
		return nil, fmt.Errorf("block %d of file %d at version %d is not here: %w", m.Index, m.File, m.Version, syscall.ENOENT)
	}
	w.stats.served.Add(uint64(len(out.Lens)))
	return out, nil
}

// await waits up to d for block id at version v while this client is
// reading the file (its copy is on its way), or while blocks of the file
// are on their way to its disk tier (a block the memory tier dropped may
// be one of them).
func (w *wholeClient) await(ctx context.Context, id block.ID, v uint64, d time.Duration) ([]byte, bool) {
	w.stats.partialWaits.Add(1)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return w.waitFor(ctx, id, v, nil, func() bool { return w.arriving(id.File, v) || w.a.diskPending(id.File) })
}

// waitFor waits for block id at v to reach the tiers while more() holds,
// until stop closes or ctx ends, looking again at every arrival and every
// arrivalPoll.
func (w *wholeClient) waitFor(ctx context.Context, id block.ID, v uint64, stop <-chan struct{}, more func() bool) ([]byte, bool) {
	poll := time.NewTicker(arrivalPoll)
	defer poll.Stop()
	for more() {
		next := w.wake.next()
		if data, ok := w.a.forPeer(id, block.Version(v)); ok {
			return data, true
		}
		select {
		case <-next:
		case <-poll.C:
		case <-stop:
			return w.a.forPeer(id, block.Version(v))
		case <-ctx.Done():
			return nil, false
		}
	}
	return w.a.forPeer(id, block.Version(v))
}

// diskPending reports whether background writes of file ino to the disk
// tier are under way (tiers.go).
func (a *Agent) diskPending(ino uint64) bool {
	d := &a.disk
	if d.c == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pending[ino] > 0
}
