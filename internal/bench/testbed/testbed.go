package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrClosed is returned by Start and friends once the testbed is torn down.
var ErrClosed = errors.New("testbed: closed")

// envMarker is set in the environment of every process the testbed starts,
// to its prefix, so that Cleanup finds them and their descendants even when
// they have left the namespace or its bind mount is gone.
const envMarker = "COOPFS_TESTBED"

// Testbed is a running set of hosts. Its methods are safe for concurrent use.
type Testbed struct {
	cfg    Config
	log    *slog.Logger
	tools  tools
	hub    string // namespace of the bridge
	server *Host
	client []*Host

	mu     sync.Mutex
	closed bool
	procs  []*Proc
	seq    int
	startc chan startReq // to the starter thread; closed on teardown

	once     sync.Once
	closeErr error
	done     chan struct{}
}

// Host is one namespace of the testbed.
type Host struct {
	Name string     // "server", "client1", ...
	NS   string     // network namespace name: prefix + Name (see `ip netns list`)
	Addr netip.Addr // the host's address on the testbed network
	Link string     // the configured rate of its link, "" if unshaped

	tb  *Testbed
	dir string
}

// New checks the prerequisites, removes leftovers of crashed earlier runs
// (CleanupStale), and builds the testbed cfg describes. When ctx is cancelled
// the testbed tears itself down (Close still returns the teardown's error).
// On error nothing the call made is left behind.
func New(ctx context.Context, cfg Config) (*Testbed, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	tl, err := findTools()
	if err != nil {
		return nil, err
	}
	if err := CleanupStale(); err != nil {
		cfg.Logger.Warn("testbed: removing leftovers of an earlier run failed", "err", err)
	}
	if names, err := listNamespaces(cfg.Prefix); err != nil {
		return nil, err
	} else if len(names) > 0 {
		return nil, fmt.Errorf("testbed: namespaces with prefix %q exist (%s): another run uses it, or call Cleanup(%q)",
			cfg.Prefix, strings.Join(names, ", "), cfg.Prefix)
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "coopfs-testbed-"+cfg.Prefix); err != nil {
			return nil, fmt.Errorf("testbed: work directory: %w", err)
		}
	}
	tb := &Testbed{cfg: cfg, log: cfg.Logger, tools: tl, hub: cfg.Prefix + "hub",
		done: make(chan struct{}), startc: make(chan startReq)}
	go tb.starter()
	tb.server = tb.newHost("server", 0, cfg.ServerLink)
	for i := 1; i <= cfg.Clients; i++ {
		tb.client = append(tb.client, tb.newHost("client"+strconv.Itoa(i), i, cfg.ClientLink))
	}
	start := time.Now()
	if err := tb.setup(ctx); err != nil {
		return nil, errors.Join(err, tb.Close())
	}
	tb.log.Debug("testbed: up", "prefix", cfg.Prefix, "hosts", len(tb.Hosts()), "took", time.Since(start))
	var sigs chan os.Signal
	if cfg.HandleSignals {
		sigs = make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	}
	go tb.watch(ctx, sigs)
	return tb, nil
}

func (tb *Testbed) newHost(name string, i int, link string) *Host {
	if r, _ := ParseRate(link); r == 0 {
		link = ""
	}
	ns := tb.cfg.Prefix + name
	return &Host{Name: name, NS: ns, Addr: hostAddr(tb.cfg.Subnet, i), Link: link,
		tb: tb, dir: filepath.Join(tb.cfg.Dir, ns)}
}

// watch tears the testbed down when ctx ends or when a signal arrives on
// sigs (HandleSignals; nil otherwise), then re-raising the signal.
func (tb *Testbed) watch(ctx context.Context, sigs chan os.Signal) {
	if sigs != nil {
		defer signal.Stop(sigs)
	}
	select {
	case <-tb.done:
	case <-ctx.Done():
		tb.log.Debug("testbed: context ended, tearing down", "err", context.Cause(ctx))
		_ = tb.Close() // the error is kept for Close's callers
	case sig := <-sigs:
		tb.log.Warn("testbed: signal, tearing down", "signal", sig)
		_ = tb.Close()
		signal.Stop(sigs)
		_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}
}

func (tb *Testbed) setup(ctx context.Context) error {
	ip, tc, hub := tb.tools.ip, tb.tools.tc, tb.hub
	steps := [][]string{
		{ip, "netns", "add", hub},
		{ip, "-n", hub, "link", "add", "name", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0"},
		{ip, "-n", hub, "link", "set", "dev", "br0", "up"},
	}
	for _, h := range tb.Hosts() {
		port := "v-" + h.Name
		steps = append(steps,
			[]string{ip, "netns", "add", h.NS},
			[]string{ip, "-n", hub, "link", "add", "name", port, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
			[]string{ip, "-n", hub, "link", "set", "dev", port, "master", "br0", "up"},
			[]string{ip, "-n", h.NS, "link", "set", "dev", "lo", "up"},
			[]string{ip, "-n", h.NS, "addr", "add", netip.PrefixFrom(h.Addr, tb.cfg.Subnet.Bits()).String(), "dev", "eth0"},
			[]string{ip, "-n", h.NS, "link", "set", "dev", "eth0", "up"},
		)
		if rate, _ := ParseRate(h.Link); rate > 0 {
			args := tbfFor(rate).args()
			steps = append(steps,
				append([]string{tc, "-n", h.NS, "qdisc", "replace", "dev", "eth0"}, args...),
				append([]string{tc, "-n", hub, "qdisc", "replace", "dev", port}, args...))
		}
	}
	for _, argv := range steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("testbed: setup: %w", err)
		}
		if err := run(argv); err != nil {
			return fmt.Errorf("testbed: setup: %w", err)
		}
	}
	for _, h := range tb.Hosts() {
		if err := os.MkdirAll(h.dir, 0o755); err != nil {
			return fmt.Errorf("testbed: host directory: %w", err)
		}
	}
	return nil
}

// run runs a setup command; its error carries the command and its output.
func run(argv []string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Close stops every process the testbed started (SIGTERM to its process
// group, SIGKILL after StopGrace), kills whatever else still runs in its
// namespaces or carries its marker, detaches mounts under its host
// directories, and deletes its namespaces (which removes the bridge and the
// veths). It is idempotent; every call returns the first teardown's error.
// Logs under Dir are kept.
func (tb *Testbed) Close() error {
	tb.once.Do(func() {
		tb.closeErr = tb.teardown()
		close(tb.done)
	})
	return tb.closeErr
}

// Done is closed once the testbed is torn down (by Close, by the context
// given to New, or by a signal with HandleSignals).
func (tb *Testbed) Done() <-chan struct{} { return tb.done }

func (tb *Testbed) teardown() error {
	start := time.Now()
	tb.mu.Lock()
	tb.closed = true // no more sends on startc
	procs := tb.procs
	tb.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { _ = p.Stop() }) // exit statuses belong to Wait's callers
	}
	wg.Wait()
	err := Cleanup(tb.cfg.Prefix)
	// Only now may the starter thread end: its end SIGKILLs (Pdeathsig)
	// whatever it started, which must first get its SIGTERM and grace.
	close(tb.startc)
	tb.log.Debug("testbed: torn down", "prefix", tb.cfg.Prefix, "took", time.Since(start), "err", err)
	return err
}

// Server returns the server host.
func (tb *Testbed) Server() *Host { return tb.server }

// Clients returns the client hosts, client1 first.
func (tb *Testbed) Clients() []*Host { return append([]*Host(nil), tb.client...) }

// Hosts returns the server followed by the clients.
func (tb *Testbed) Hosts() []*Host { return append([]*Host{tb.server}, tb.client...) }

// Host returns the host with the given name, or nil.
func (tb *Testbed) Host(name string) *Host {
	for _, h := range tb.Hosts() {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Prefix returns the prefix of every name the testbed made.
func (tb *Testbed) Prefix() string { return tb.cfg.Prefix }

// Dir returns the work directory holding one directory per host.
func (tb *Testbed) Dir() string { return tb.cfg.Dir }

// Procs returns every process started so far, in start order.
func (tb *Testbed) Procs() []*Proc {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]*Proc(nil), tb.procs...)
}

// Dir returns the host's own directory (Testbed.Dir()/<NS>): default home of
// its process logs and a good place for its mountpoints, which teardown
// detaches if they are still mounted.
func (h *Host) Dir() string { return h.dir }

// String returns the host's name and address.
func (h *Host) String() string { return h.Name + "(" + h.Addr.String() + ")" }

// AddrPort returns the host's address with the given port, e.g. for a
// listen or dial address.
func (h *Host) AddrPort(port uint16) netip.AddrPort { return netip.AddrPortFrom(h.Addr, port) }

// nsPath is the bind mount of the host's network namespace.
func (h *Host) nsPath() string { return filepath.Join(netnsDir, h.NS) }

// tools are the absolute paths of the external commands the testbed needs.
type tools struct{ ip, tc, nsenter string }

// CheckPrereqs reports, wrapping ErrPrereq, whether the testbed can run
// here: root, and ip and tc (iproute2) and nsenter (util-linux) on PATH.
func CheckPrereqs() error {
	_, err := findTools()
	return err
}

func findTools() (tools, error) {
	var t tools
	var missing []string
	for _, x := range []struct {
		dst       *string
		name, pkg string
	}{{&t.ip, "ip", "iproute2"}, {&t.tc, "tc", "iproute2"}, {&t.nsenter, "nsenter", "util-linux"}} {
		p, err := exec.LookPath(x.name)
		if err != nil {
			missing = append(missing, x.name+" (apt-get install "+x.pkg+")")
			continue
		}
		*x.dst = p
	}
	if os.Geteuid() != 0 {
		missing = append([]string{"root (euid is " + strconv.Itoa(os.Geteuid()) + ")"}, missing...)
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("%w; missing: %s", ErrPrereq, strings.Join(missing, ", "))
	}
	return t, nil
}
