package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/fusefs"
	"github.com/coopfs/coopfs/internal/obs"
)

// `coopfs status MOUNTPOINT` asks the mount over its control socket
// (control.go) for a "status" report: one JSON line (mountStatus) and then
// "done". `coopfs status --server HOST:PORT` dials the server itself
// (statusserver.go).

// mountStatus is the mount's answer and the JSON that --json prints.
type mountStatus struct {
	Mountpoint string       `json:"mountpoint"`
	Mounted    bool         `json:"mounted"`
	PID        int          `json:"pid,omitempty"`
	Agent      agent.Status `json:"agent"`
	Tiers      []tierUse    `json:"cache_tiers"`
	LastError  *logEvent    `json:"last_error,omitempty"`
	Healthy    bool         `json:"healthy"`
	Problems   []string     `json:"problems"`
}

// tierUse is one cache tier's use, from its coopfs_cache_* metrics.
type tierUse struct {
	Tier     string  `json:"tier"`
	Bytes    float64 `json:"bytes"`
	Capacity float64 `json:"capacity_bytes"`
	Hits     float64 `json:"hits"`
	Misses   float64 `json:"misses"`
}

// dirtyGauges export a write-back mount's backlog (the dashboard's
// write-back panel): coopfs_writeback_dirty_files and _bytes.
func dirtyGauges(a *agent.Agent) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coopfs_writeback_dirty_files", Help: "Files with dirty data waiting to be written back."},
			func() float64 { f, _ := a.Dirty(); return float64(f) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coopfs_writeback_dirty_bytes", Help: "Dirty blocks waiting to be written back, in bytes (blocks × block size)."},
			func() float64 { _, b := a.Dirty(); return float64(b) }),
	}
}

// logEvent is a warning or error the mount logged.
type logEvent struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", "[--json] MOUNTPOINT | --server HOST:PORT [security flags]\n\nExit code 0 only when the mount (or the server) is healthy, 1 otherwise.", stderr)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	server := fs.String("server", "", "report on the coopfs server at HOST:PORT instead of a mount (clients, policy, load)")
	metrics := fs.String("metrics", "", "with --server: the server's --metrics HOST:PORT, for its load")
	secFlags := addSecurityFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if *server != "" {
		if fs.NArg() != 0 {
			return fmt.Errorf("--server takes no MOUNTPOINT (got %q)", fs.Arg(0))
		}
		return serverStatus(ctx, *server, *metrics, secFlags, *asJSON, stdout)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "coopfs status: want exactly one MOUNTPOINT (or --server HOST:PORT)")
		fs.Usage()
		return errUsage
	}
	st := queryMountStatus(ctx, fs.Arg(0))
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return err
		}
	} else {
		writeMountStatus(stdout, st)
	}
	if !st.Healthy {
		return errUnhealthy
	}
	return nil
}

// errUnhealthy is the error of a status that was printed and is not
// healthy: the exit code says it, the report says why.
var errUnhealthy = errors.New("not healthy")

// queryMountStatus asks the mount at dir for its status; what fails is a
// problem of the report, not an error.
func queryMountStatus(ctx context.Context, dir string) mountStatus {
	abs, err := canonical(dir)
	if err != nil {
		abs = dir
	}
	st := mountStatus{Mountpoint: abs, Problems: []string{}, Tiers: []tierUse{}}
	st.Mounted = isCoopfsMount(abs)
	if !st.Mounted {
		st.Problems = append(st.Problems, "not mounted: no coopfs file system at "+abs)
		return st
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", controlSocket(abs))
	if err != nil {
		st.Problems = append(st.Problems, fmt.Sprintf("the mount does not answer on its control socket (%v): is its coopfs mount process alive, and run as this user?", err))
		return st
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	fmt.Fprintln(c, "status")
	line, err := bufio.NewReader(c).ReadString('\n')
	if kind, msg, _ := strings.Cut(strings.TrimSpace(line), " "); err == nil && kind == "error" {
		err = errors.New(msg)
	}
	var got mountStatus
	if err == nil {
		err = json.Unmarshal([]byte(line), &got)
	}
	if err != nil {
		st.Problems = append(st.Problems, fmt.Sprintf("the mount's status: %v (an older coopfs?)", err))
		return st
	}
	got.Mounted = true
	return got
}

// isCoopfsMount reports whether the top mount at dir is a coopfs one.
func isCoopfsMount(dir string) bool {
	ms, err := fusefs.Mounts()
	if err != nil {
		return false
	}
	fstype := ""
	for _, m := range ms {
		if m.Dir == dir {
			fstype = m.FSType // a later mount on the same point is on top
		}
	}
	return fstype == "fuse."+fusefs.DefaultFsName
}

// serveStatusConn answers a "status" request on the control socket.
func serveStatusConn(ctx context.Context, a *agent.Agent, c net.Conn, dir string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st := mountStatus{Mountpoint: dir, Mounted: true, PID: os.Getpid(), Agent: a.Status(ctx), Problems: []string{}}
	st.Tiers = tierUses(a.Metrics())
	if le, ok := log.Handler().(*lastErrorHandler); ok {
		st.LastError = le.last.get()
	}
	if st.Agent.RTTError != "" {
		st.Problems = append(st.Problems, "the server does not answer: "+st.Agent.RTTError)
	}
	for _, p := range st.Agent.Peers {
		if !p.Reachable {
			// A peer that went away costs a detour to the server, not
			// correctness: reported, not unhealthy.
			log.Debug("status: peer not reachable", "peer", p.Addr)
		}
	}
	st.Healthy = len(st.Problems) == 0
	b, err := json.Marshal(st)
	if err != nil {
		fmt.Fprintf(c, "error %v\n", err)
		return
	}
	fmt.Fprintf(c, "%s\ndone\n", b)
}

// tierUses reads the cache tiers' use from the mount's own registry.
func tierUses(m *obs.Metrics) []tierUse {
	out := []tierUse{}
	mfs, err := m.Registry().Gather()
	if err != nil {
		return out
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "coopfs_cache_") {
			enc.Encode(mf)
		}
	}
	ss, err := obs.Parse(&buf)
	if err != nil {
		return out
	}
	for _, t := range orderedKeys(ss.SumBy("coopfs_cache_capacity_bytes", "tier", nil), obs.Layers()) {
		match := map[string]string{"tier": t}
		out = append(out, tierUse{Tier: t, Bytes: ss.Sum("coopfs_cache_bytes", match), Capacity: ss.Sum("coopfs_cache_capacity_bytes", match),
			Hits: ss.Sum("coopfs_cache_hits_total", match), Misses: ss.Sum("coopfs_cache_misses_total", match)})
	}
	return out
}

func writeMountStatus(w io.Writer, st mountStatus) {
	var b strings.Builder
	state := "healthy"
	if !st.Healthy {
		state = "NOT HEALTHY"
	}
	fmt.Fprintf(&b, "coopfs status of %s: %s\n", st.Mountpoint, state)
	for _, p := range st.Problems {
		fmt.Fprintf(&b, "  problem: %s\n", p)
	}
	if !st.Mounted || st.PID == 0 {
		io.WriteString(w, b.String())
		return
	}
	a := st.Agent
	rtt := a.RTT.Round(time.Microsecond).String()
	if a.RTTError != "" {
		rtt = "no answer"
	}
	rows := [][]string{{"mount", ""},
		{"  process", fmt.Sprintf("pid %d", st.PID)},
		{"  server", a.Server},
		{"  round trip", rtt},
		{"  policy", a.Policy},
		{"  tls", a.TLS},
		{"  write policy", a.WritePolicy},
		{"  dirty (write-back)", fmt.Sprintf("%d files, %s", a.DirtyFiles, humanBytes(float64(a.DirtyBytes)))}}
	writeTable(&b, rows)
	t := [][]string{{"Cache tiers", "used", "capacity", "hits", "misses"}}
	for _, u := range st.Tiers {
		t = append(t, []string{"  " + u.Tier, humanBytes(u.Bytes), humanBytes(u.Capacity), count(u.Hits), count(u.Misses)})
	}
	writeTable(&b, t)
	reach := 0
	for _, p := range a.Peers {
		if p.Reachable {
			reach++
		}
	}
	t = [][]string{{fmt.Sprintf("Peers: %d seen, %d reachable", len(a.Peers), reach), ""}}
	for _, p := range a.Peers {
		s := "reachable"
		if !p.Reachable {
			s = "not connected"
		}
		t = append(t, []string{"  " + p.Addr, s})
	}
	writeTable(&b, t)
	if st.LastError != nil {
		fmt.Fprintf(&b, "\nLast error: %s %s %s\n", st.LastError.Time.Format(time.RFC3339), st.LastError.Level, st.LastError.Message)
	} else {
		b.WriteString("\nLast error: none\n")
	}
	io.WriteString(w, b.String())
}

// lastErrorHandler passes records on to its handler and remembers the last
// one at warning level or above, for `coopfs status`.
type lastErrorHandler struct {
	slog.Handler
	attrs string // the attributes of WithAttrs, formatted
	last  *lastEvent
}

type lastEvent struct {
	mu sync.Mutex
	ev *logEvent
}

func (l *lastEvent) get() *logEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ev == nil {
		return nil
	}
	ev := *l.ev
	return &ev
}

// withLastError wraps log's handler in a lastErrorHandler.
func withLastError(log *slog.Logger) *slog.Logger {
	return slog.New(&lastErrorHandler{Handler: log.Handler(), last: &lastEvent{}})
}

func (h *lastErrorHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		b.WriteString(r.Message)
		b.WriteString(h.attrs)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		h.last.mu.Lock()
		h.last.ev = &logEvent{Time: r.Time, Level: r.Level.String(), Message: b.String()}
		h.last.mu.Unlock()
	}
	return h.Handler.Handle(ctx, r)
}

func (h *lastErrorHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return &lastErrorHandler{Handler: h.Handler.WithAttrs(as), attrs: b.String(), last: h.last}
}

func (h *lastErrorHandler) WithGroup(name string) slog.Handler {
	return &lastErrorHandler{Handler: h.Handler.WithGroup(name), attrs: h.attrs, last: h.last}
}
