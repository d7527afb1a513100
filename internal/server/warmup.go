package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/coord/warmup"
	"github.com/coopfs/coopfs/internal/wire"
)

// The cluster warm-up (`coopfs warmup --cluster`): the server plans the
// job with the warmup state machine (internal/coord/warmup), pushes each
// client its assignments (WarmupAssign), takes their reports and answers
// the initiator's polls. A client whose connection closes mid-job is
// dropped from it and its unfinished share reassigned.

// warmJobs are the cluster warm-ups under way.
type warmJobs struct {
	active atomic.Int32 // jobs not over yet: warming's fast path
	mu     sync.Mutex
	next   uint64
	jobs   map[uint64]*warmRun
}

// warming reports whether client id takes part in a warm-up under way.
func (w *warmJobs) warming(id uint32) bool {
	if w.active.Load() == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, run := range w.jobs {
		if _, in := run.conns[warmup.Member(id)]; in && run.job.Phase() != warmup.Done {
			return true
		}
	}
	return false
}

// warmRun is one job and what the server needs to drive it.
type warmRun struct {
	id        uint64
	initiator uint32      // the client that started it
	job       *warmup.Job // guarded by warmJobs.mu
	conns     map[warmup.Member]*wire.Conn
	names     map[warmup.Member]string
	listens   map[warmup.Member]string // peer listeners ("" none)
	uid, gid  uint32
	ended     chan struct{} // closed when the job is over
	endOnce   sync.Once
}

// warmPushTimeout bounds the push of one assignment (the client answers
// at once and works in the background).
const warmPushTimeout = 30 * time.Second

// serveWarmup handles the warm-up messages; handled is false for others.
func (s *Server) serveWarmup(c *wire.Conn, cl *client, m wire.Msg) (wire.Msg, error, bool) {
	switch m := m.(type) {
	case *wire.WarmupStart:
		r, err := s.startWarmup(cl, m)
		return r, err, true
	case *wire.WarmupReport:
		s.warmReport(cl, m)
		return &wire.OK{}, nil, true
	case *wire.WarmupStatus:
		r, err := s.warmStatus(m)
		return r, err, true
	}
	return nil, nil, false
}

// warmMembers picks the connected clients named in names (all when empty).
func (s *Server) warmMembers(names []string) ([]warmup.Member, map[warmup.Member]*wire.Conn, map[warmup.Member]string, map[warmup.Member]string, error) {
	conns := make(map[warmup.Member]*wire.Conn)
	byID := make(map[warmup.Member]string)
	listens := make(map[warmup.Member]string)
	var ids []warmup.Member
	var all []string
	found := make(map[string]bool)
	s.mu.Lock()
	for c := range s.conns {
		cl, _ := c.Value.Load().(*client)
		if cl == nil {
			continue
		}
		all = append(all, cl.name)
		if len(names) > 0 && !slices.Contains(names, cl.name) {
			continue
		}
		found[cl.name] = true
		id := warmup.Member(cl.id)
		ids, conns[id], byID[id], listens[id] = append(ids, id), c, cl.name, cl.listen
	}
	s.mu.Unlock()
	for _, n := range names {
		if !found[n] {
			slices.Sort(all)
			return nil, nil, nil, nil, fmt.Errorf("no connected client is named %q (connected: %s): give --clients the --name of running mounts: %w",
				n, strings.Join(slices.Compact(all), ", "), syscall.ENOENT)
		}
	}
	slices.Sort(ids)
	return ids, conns, byID, listens, nil
}

// Bounds of the cluster warm-ups: jobs under way in all, per initiating
// client, and items in one job. A job's members each read what it names,
// so these bound what one member can make the cluster do (a member takes
// part in others' jobs only with mount --warmup-accept).
const (
	MaxWarmJobs          = 4
	MaxWarmJobsPerClient = 1
	MaxWarmItems         = 1 << 16
)

// warmRoom says why a job of client cl with n items may not start ("" when
// it may); s.warm.mu held.
func (s *Server) warmRoom(cl *client, n int) string {
	if n > MaxWarmItems {
		return fmt.Sprintf("%d items: at most %d in one warm-up", n, MaxWarmItems)
	}
	all, mine := 0, 0
	for _, run := range s.warm.jobs {
		if run.job.Phase() == warmup.Done {
			continue
		}
		all++
		if run.initiator == cl.id {
			mine++
		}
	}
	switch {
	case mine >= MaxWarmJobsPerClient:
		return fmt.Sprintf("this client has %d warm-up under way (the cap): wait for it to end", mine)
	case all >= MaxWarmJobs:
		return fmt.Sprintf("%d warm-ups under way (the cap): try again later", all)
	}
	return ""
}

func (s *Server) startWarmup(cl *client, m *wire.WarmupStart) (wire.Msg, error) {
	if cl == nil {
		return nil, syscall.EPROTO
	}
	if len(m.Items) > MaxWarmItems {
		return nil, fmt.Errorf("cluster warm-up: %d items: at most %d in one: %w", len(m.Items), MaxWarmItems, syscall.EINVAL)
	}
	if s.cfg.Policy == "none" {
		return nil, fmt.Errorf("the server runs policy none, under which clients never fetch from their peers: a --cluster warm-up would take every byte from the server once per client; serve with --policy directory or hints, or run `coopfs warmup` on each client: %w", syscall.EOPNOTSUPP)
	}
	ids, conns, names, listens, err := s.warmMembers(m.Clients)
	if err != nil {
		return nil, err
	}
	items := make([]warmup.Item, len(m.Items))
	for i, it := range m.Items {
		items[i] = warmup.Item{Path: it.Path, Off: it.Off, Len: it.Len, Size: it.Size}
	}
	cut := uint64(s.cfg.BlockSize)
	if s.cfg.Policy == "wholefile" {
		cut = 0 // files are fetched and held whole: a share never splits one
	}
	job, acts, err := warmup.New(items, ids, cut)
	if err != nil {
		return nil, fmt.Errorf("cluster warm-up: %v: %w", err, syscall.EINVAL)
	}
	s.warm.mu.Lock()
	if why := s.warmRoom(cl, len(m.Items)); why != "" {
		s.warm.mu.Unlock()
		return nil, fmt.Errorf("cluster warm-up: %s: %w", why, syscall.EBUSY)
	}
	if s.warm.jobs == nil {
		s.warm.jobs = make(map[uint64]*warmRun)
	}
	s.warm.next++
	run := &warmRun{id: s.warm.next, initiator: cl.id, job: job, conns: conns, names: names, listens: listens, uid: m.UID, gid: m.GID, ended: make(chan struct{})}
	s.warm.jobs[run.id] = run
	s.warm.active.Add(1)
	s.warm.mu.Unlock()
	var list []string
	for _, id := range ids {
		list = append(list, names[id])
		go s.watchWarmMember(run, id)
	}
	s.log.Info("cluster warm-up started", "job", run.id, "clients", strings.Join(list, ","), "files", len(m.Items))
	s.pushWarm(run, acts)
	return &wire.WarmupStarted{Job: run.id, Clients: list}, nil
}

// watchWarmMember drops a member whose connection closes before the job ends.
func (s *Server) watchWarmMember(run *warmRun, id warmup.Member) {
	select {
	case <-run.ended:
	case <-run.conns[id].Done():
		s.warm.mu.Lock()
		acts := run.job.Left(id)
		s.warm.mu.Unlock()
		s.log.Warn("a client left a cluster warm-up; its unfinished share goes to the others", "job", run.id, "client", id, "name", run.names[id])
		s.pushWarm(run, acts)
		s.checkWarmEnd(run)
	}
}

// pushWarm sends assignments, each from its own goroutine; a client that
// cannot be reached is dropped from the job.
func (s *Server) pushWarm(run *warmRun, acts []warmup.Assign) {
	for _, a := range acts {
		msg := &wire.WarmupAssign{Job: run.id, Phase: a.Phase, Seq: a.Seq, UID: run.uid, GID: run.gid, Items: make([]wire.WarmupItem, len(a.Items))}
		for i, it := range a.Items {
			msg.Items[i] = wire.WarmupItem{Path: it.Path, Off: it.Off, Len: it.Len, Size: it.Size}
		}
		for _, from := range a.From {
			msg.From = append(msg.From, run.listens[from])
		}
		c := run.conns[a.To]
		go func(to warmup.Member) {
			ctx, cancel := context.WithTimeout(context.Background(), warmPushTimeout)
			defer cancel()
			if _, err := c.Call(ctx, msg); err != nil {
				s.log.Warn("cluster warm-up: a client refused its assignment; dropping it from the job", "job", run.id, "client", to, "err", err)
				s.warm.mu.Lock()
				more := run.job.Left(to)
				s.warm.mu.Unlock()
				s.pushWarm(run, more)
				s.checkWarmEnd(run)
			}
		}(a.To)
	}
}

func (s *Server) warmReport(cl *client, m *wire.WarmupReport) {
	s.warm.mu.Lock()
	run := s.warm.jobs[m.Job]
	var acts []warmup.Assign
	if run != nil && cl != nil {
		acts = run.job.Report(warmup.Member(cl.id), m.Seq, m.Bytes, m.Done, m.Err)
	}
	s.warm.mu.Unlock()
	if run == nil {
		return
	}
	s.pushWarm(run, acts)
	s.checkWarmEnd(run)
}

// checkWarmEnd closes run.ended once the job is done; the job stays for
// the initiator's last poll, and goes a minute later if nobody asks.
func (s *Server) checkWarmEnd(run *warmRun) {
	s.warm.mu.Lock()
	st := run.job.State()
	s.warm.mu.Unlock()
	if st.Phase != warmup.Done {
		return
	}
	run.endOnce.Do(func() {
		close(run.ended)
		s.warm.active.Add(-1)
		s.log.Info("cluster warm-up done", "job", run.id, "clients", len(st.Members), "err", st.Err)
		time.AfterFunc(time.Minute, func() {
			s.warm.mu.Lock()
			delete(s.warm.jobs, run.id)
			s.warm.mu.Unlock()
		})
	})
}

func (s *Server) warmStatus(m *wire.WarmupStatus) (wire.Msg, error) {
	s.warm.mu.Lock()
	defer s.warm.mu.Unlock()
	run := s.warm.jobs[m.Job]
	if run == nil {
		return nil, fmt.Errorf("no cluster warm-up %d (it ended over a minute ago, or the server restarted): %w", m.Job, syscall.ENOENT)
	}
	st := run.job.State()
	r := &wire.WarmupState{Phase: st.Phase, ClientsDone: uint32(st.ClientsDone), Bytes: st.Bytes, TotalBytes: st.TotalBytes}
	for _, id := range st.Members {
		r.Names = append(r.Names, run.names[id])
	}
	if st.Err != nil {
		r.Err = st.Err.Error()
	}
	return r, nil
}
