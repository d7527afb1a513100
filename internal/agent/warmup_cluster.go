package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/hints"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// The cluster warm-up, client side: the initiator sends the file list to
// the server (WarmupStart) and polls the job (WarmupStatus); every member
// fetches what the server assigns it (WarmupAssign) with the fetcher of
// warmup.go, reporting its progress (WarmupReport). Phase 1 assignments
// come from the server, phase 2 ones from the peers: through the policy,
// like any read.

// ClusterProgress is the state of a cluster warm-up as the server reports
// it to the initiator.
type ClusterProgress struct {
	Clients, ClientsDone int
	Bytes, TotalBytes    int64    // over every client: TotalBytes is the files' size times the clients
	Phase                string   // "shares" (each client its share, from the server), "peers" (the rest, from peers), "done"
	Names                []string // the clients taking part
}

// warmPoll is how often the initiator asks the server how the job goes;
// warmReportEvery how often a member reports its bytes.
const (
	warmPoll        = 250 * time.Millisecond
	warmReportEvery = 300 * time.Millisecond
)

func phaseName(p uint8) string {
	switch p {
	case wire.WarmupShares:
		return "shares"
	case wire.WarmupPeers:
		return "peers"
	case wire.WarmupDone:
		return "done"
	}
	return fmt.Sprintf("phase%d", p)
}

// WarmCluster warms items on a set of clients together (names; empty:
// every connected client), as the caller in ctx, and returns when every
// client is done. progress is called after each poll.
func (a *Agent) WarmCluster(ctx context.Context, items []WarmItem, names []string, progress func(ClusterProgress)) (ClusterProgress, error) {
	start := &wire.WarmupStart{Clients: names, Items: make([]wire.WarmupItem, len(items))}
	if c, ok := vfs.CallerOf(ctx); ok {
		start.UID, start.GID = c.UID, c.GID
	}
	for i, it := range items {
		start.Items[i] = wire.WarmupItem{Path: it.Path, Off: it.Off, Len: it.Len, Size: it.Size}
	}
	done := a.warm.starting()
	r, _, err := a.sess.call(ctx, start, false)
	st, ok := r.(*wire.WarmupStarted)
	if err == nil && ok {
		a.warm.started(st.Job)
	}
	done()
	if err != nil {
		return ClusterProgress{}, err
	}
	if !ok {
		return ClusterProgress{}, fmt.Errorf("warm-up start: unexpected reply %v", r.Type())
	}
	defer a.warm.ended(st.Job)
	a.log.Info("cluster warm-up started", "job", st.Job, "clients", len(st.Clients))
	t := time.NewTicker(warmPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ClusterProgress{}, ctx.Err()
		case <-t.C:
		}
		r, _, err := a.sess.call(ctx, &wire.WarmupStatus{Job: st.Job}, true)
		if err != nil {
			return ClusterProgress{}, fmt.Errorf("cluster warm-up %d: %w", st.Job, err)
		}
		s, ok := r.(*wire.WarmupState)
		if !ok {
			return ClusterProgress{}, fmt.Errorf("warm-up status: unexpected reply %v", r.Type())
		}
		p := ClusterProgress{Clients: len(s.Names), ClientsDone: int(s.ClientsDone), Bytes: int64(s.Bytes),
			TotalBytes: int64(s.TotalBytes), Phase: phaseName(s.Phase), Names: s.Names}
		if progress != nil {
			progress(p)
		}
		if s.Phase == wire.WarmupDone {
			if s.Err != "" {
				return p, errors.New(s.Err)
			}
			return p, nil
		}
	}
}

// warmers are the assignments this client is working on.
type warmers struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	own   map[uint64]bool // jobs this client started
	start int             // WarmupStarts awaiting their reply
}

// accepts says whether to work on an assignment of job: one this client
// started (or is starting: the server's first assignment may come before
// its answer), or any with all (mount --warmup-accept).
func (w *warmers) accepts(all bool, job uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return all || w.own[job] || w.start > 0
}

func (w *warmers) starting() func() {
	w.mu.Lock()
	w.start++
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.start--
		w.mu.Unlock()
	}
}

func (w *warmers) started(job uint64) {
	w.mu.Lock()
	if w.own == nil {
		w.own = make(map[uint64]bool)
	}
	w.own[job] = true
	w.mu.Unlock()
}

func (w *warmers) ended(job uint64) {
	w.mu.Lock()
	delete(w.own, job)
	w.mu.Unlock()
}

func (w *warmers) init() {
	w.once.Do(func() { w.ctx, w.cancel = context.WithCancel(context.Background()) })
}

// close stops the assignments under way and waits for them.
func (w *warmers) close() {
	w.init()
	w.cancel()
	w.wg.Wait()
}

// warmAssigned starts an assignment of the server's and answers at once.
func (a *Agent) warmAssigned(m *wire.WarmupAssign) wire.Msg {
	a.warm.init()
	a.warm.wg.Add(1)
	go func() {
		defer a.warm.wg.Done()
		a.runAssignment(a.warm.ctx, m)
	}()
	return &wire.OK{}
}

// runAssignment fetches an assignment's items as the initiating user,
// reporting its bytes every warmReportEvery and at its end.
func (a *Agent) runAssignment(ctx context.Context, m *wire.WarmupAssign) {
	ctx = vfs.WithCaller(ctx, vfs.Caller{UID: m.UID, GID: m.GID})
	items := make([]WarmItem, len(m.Items))
	for i, it := range m.Items {
		items[i] = WarmItem{Path: it.Path, Off: it.Off, Len: it.Len, Size: it.Size}
		if i < len(m.From) {
			items[i].From = m.From[i]
		}
	}
	report := func(bytes int64, done bool, err error) {
		r := &wire.WarmupReport{Job: m.Job, Seq: m.Seq, Bytes: uint64(bytes), Done: done}
		if err != nil {
			r.Err = fmt.Sprintf("%s: %v", a.cfg.Name, err)
		}
		if _, _, err := a.sess.call(ctx, r, true); err != nil && done {
			a.log.Warn("cluster warm-up: could not report the end of an assignment", "job", m.Job, "err", err)
		}
	}
	var bytes atomic.Int64
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(warmReportEvery)
		defer t.Stop()
		sent := int64(-1)
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if b := bytes.Load(); b != sent {
					sent = b
					report(b, false, nil)
				}
			}
		}
	}()
	start := time.Now()
	p, err := a.Warm(ctx, items, func(p WarmProgress) { bytes.Store(p.Bytes) })
	close(stop)
	<-ticked
	a.log.Info("cluster warm-up: assignment done", "job", m.Job, "phase", phaseName(m.Phase), "files", p.Files,
		"bytes", p.Bytes, "took", time.Since(start).Round(time.Millisecond).String(), "err", err)
	report(p.Bytes, true, err)
}

// warmSource is a policy that a cluster warm-up tells where the blocks it
// reads in phase 2 are: the member that fetched them from the server in
// phase 1. Under directory the server's cache directory knows, and under
// wholefile the valid-cache map; under hints the hints handed out on open
// are the last opener's, and in a warm-up the last opener is often a
// member that opened the file a moment ago and holds none of it yet.
type warmSource interface {
	// warmFrom: blocks [first, end) of f are at the peer listening on
	// listen.
	warmFrom(ctx context.Context, f *file, listen string, first, end uint64)
}

var _ warmSource = (*hintsClient)(nil)

// warmFrom makes the phase-1 fetcher the hinted holder of the blocks: its
// copies are master copies (it read them from the server). A fetcher this
// client has not heard of yet (the server's message of its join is still
// on its way: a job can start as soon as the members have connected) is
// looked for again in the whole list, asked of the server; without a hint
// the blocks would come from the server.
func (h *hintsClient) warmFrom(ctx context.Context, f *file, listen string, first, end uint64) {
	if end <= first || h.hintFrom(f, listen, first, end) {
		return
	}
	if _, err := h.askPeers(ctx); err != nil {
		h.a.log.Debug("warm-up: the client list could not be asked for", "err", err)
		return
	}
	if !h.hintFrom(f, listen, first, end) {
		h.a.log.Debug("warm-up: the member named as holder is not in the client list", "peer", listen)
	}
}

// hintFrom imports hints naming the member listening on listen as the
// holder of blocks [first, end) of f; false if no member listens there.
func (h *hintsClient) hintFrom(f *file, listen string, first, end uint64) bool {
	f.mu.Lock()
	ino, v := f.attr.Ino, f.attr.Version
	f.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hc == nil {
		return true // no policy state: nothing to hint
	}
	for id, mb := range h.members {
		if mb.Listen != listen {
			continue
		}
		hint := hints.Hint{Holder: hints.ClientID(id), Boot: hints.BootID(mb.Boot), Since: now()}
		hs := make([]hints.BlockHint, 0, end-first)
		for idx := first; idx < end; idx++ {
			hs = append(hs, hints.BlockHint{Index: idx, Hint: hint})
		}
		h.hc.ImportHints(ino, block.Version(v), hs)
		return true
	}
	return false
}
