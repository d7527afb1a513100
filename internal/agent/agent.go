package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Config configures an agent.
type Config struct {
	Server           string          // host:port of `coopfs serve`
	Secret           []byte          // the cluster secret, used when Security is nil
	Security         *wire.Security  // TLS and authentication; nil: TLS with Secret, or plaintext on loopback without one
	TLSServerName    string          // the name the server's certificate must carry; default the host of Server
	PeerConns        wire.ConnLimits // directory policy: caps on the peer listener's connections
	CacheSize        int64           // memory block cache; default 512 MiB
	ReadAhead        int             // blocks fetched ahead of a sequential reader; default 4
	ReconnectTimeout time.Duration   // how long calls wait for an unreachable server; default 30s
	RequestTimeout   time.Duration   // how long one request waits for its reply; default 2m
	Name             string          // how the server's logs name us; default the host name

	// Policy is the coordination policy the mount expects: "" follows the
	// server's, "none", "directory" or "hints" must match it.
	Policy         string
	Listen         string        // cooperative policies: peer listener (host:port); "" picks the address toward the server
	ForwardTimeout time.Duration // cooperative policies: how long to wait for a peer's block or answer; default 5s
	DiscardQueue   int           // directory policy: discard notification batch; default 400
	// WholeFileMinSize: wholefile policy: files smaller than this are read
	// from the server block by block, without the counter and map (the
	// coordination would cost more than the data); default
	// DefaultWholeFileMinSize, negative: every file.
	WholeFileMinSize int64
	NoDiscard        bool // directory policy: send no discard notifications (for comparisons)
	// WarmupAccept lets other members' cluster warm-ups (`coopfs warmup
	// --cluster` on another mount) make this client read what they name;
	// without it the client takes part only in the warm-ups it starts.
	WarmupAccept bool
	// OpenDataMax is the largest file whose data an open for reading
	// brings in its reply (openread.go); default DefaultOpenDataMax,
	// negative: none.
	OpenDataMax int64
	Disk        DiskConfig        // the disk tier under memory (tiers.go); none when Disk.Dir is ""
	WritePolicy cache.WritePolicy // read-only, write-through (default) or write-back (writeback.go; needs Disk)
	WriteBack   WriteBackConfig   // tuning of the write-back policy
	// NoCallbacks asks the server for no callbacks (callbacks.go): every
	// lookup, getattr, listing and open then goes to the server.
	NoCallbacks bool
	// DirAttrTimeout is how long the attributes a directory had right
	// after this agent's own create or removal in it answer getattrs of it
	// (dirattrs.go); default 250ms, negative: never. A mount keeps it
	// within its attribute timeout.
	DirAttrTimeout time.Duration
	Logger         *slog.Logger
	Metrics        *obs.Metrics
}

func (c *Config) setDefaults() {
	if c.CacheSize == 0 {
		c.CacheSize = mem.DefaultCapacity
	}
	if c.Security == nil {
		c.Security = wire.MustSecurity(wire.SecurityConfig{Secret: c.Secret, Insecure: len(c.Secret) == 0})
	}
	if c.TLSServerName == "" {
		c.TLSServerName, _, _ = net.SplitHostPort(c.Server)
	}
	if c.ReadAhead == 0 {
		c.ReadAhead = 4
	}
	if c.ReconnectTimeout == 0 {
		c.ReconnectTimeout = 30 * time.Second
	}
	if c.Name == "" {
		c.Name, _ = os.Hostname()
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 2 * time.Minute
	}
	if c.WholeFileMinSize == 0 {
		c.WholeFileMinSize = DefaultWholeFileMinSize
	} else if c.WholeFileMinSize < 0 {
		c.WholeFileMinSize = 0
	}
	if c.OpenDataMax == 0 {
		c.OpenDataMax = DefaultOpenDataMax
	}
	if c.ForwardTimeout == 0 {
		c.ForwardTimeout = 5 * time.Second
	}
	if c.DirAttrTimeout == 0 {
		c.DirAttrTimeout = 250 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = obs.NewMetrics()
	}
	c.WriteBack.setDefaults()
}

func (c *Config) validate() error {
	switch {
	case c.Server == "":
		return fmt.Errorf("no server address: give --server HOST:PORT")
	case c.CacheSize < 0:
		return fmt.Errorf("cache size %d is negative", c.CacheSize)
	case c.ReadAhead < 0:
		return fmt.Errorf("read-ahead %d is negative", c.ReadAhead)
	case c.Policy != "" && !slices.Contains(Policies, c.Policy):
		return fmt.Errorf("unknown policy %q: use none, directory, hints or wholefile", c.Policy)
	case c.WritePolicy == cache.WriteBack && c.Disk.Dir == "":
		return fmt.Errorf("--write-policy write-back keeps dirty data on disk: add --disk-cache DIR")
	}
	return c.WriteBack.validate()
}

// Agent is a connected coopfs client.
type Agent struct {
	cfg         Config
	log         *slog.Logger
	metrics     *obs.Metrics
	sess        *session
	cache       *mem.Cache
	disk        diskTier   // the disk tier under memory (tiers.go); off without --disk-cache
	wb          *writeBack // dirty files under the write-back policy (writeback.go); nil otherwise
	wbMu        sync.Mutex // guards wb while it is set (the connection hook reads it)
	flights     singleflight.Group
	prefetch    chan struct{}             // bounds read-ahead fetches in flight
	pol         atomic.Pointer[policyBox] // the coordination policy (policy.go)
	lockOwners  lockOwners                // fcntl lock owners per file (lock.go)
	releases    releaser                  // releases of closed files, batched (release.go)
	holds       holds                     // files holding writes back (pipe.go)
	dirs        dirAttrs                  // directories' attributes from this agent's entry changes (dirattrs.go)
	delegs      delegs                    // directory delegations held (deleg.go)
	pend        pending                   // entry changes answered here, to send (defer.go, newfile.go)
	ahead       openAhead                 // read-ahead across a directory's files (openahead.go)
	writeSeq    atomic.Uint64             // sequence numbers of writes (exactly once: the server's drc.go)
	plainWrite  atomic.Bool               // the server does not know WriteBase (rewrite.go)
	fastMeta    atomic.Bool               // the server knows the types 160–169 (openread.go)
	pinned      atomic.Int64              // bytes pinned by open files without a server handle (openread.go)
	cbs         *callbacks                // what the server's callbacks let the agent cache (callbacks.go)
	warm        warmers                   // cluster warm-up assignments under way (warmup_cluster.go)
	meta        *metaDisk                 // the callbacks cache on disk (metadisk.go); nil without one
	identity    ed25519.PrivateKey        // this client's identity, proved on every connection; capabilities name it
	caps        wire.CapVerifier          // checks peers' capabilities with the server's key
	ownCaps     capStore                  // the capabilities the server issued to this client (caps.go)
	capRefusals atomic.Uint64             // peers' requests refused for want of a valid capability

	mu       sync.Mutex
	versions map[uint64]uint64 // file id → the version its cached blocks belong to
	fresh    sync.Map          // block.ID → struct{}: fetched by read-ahead, not yet read
}

// New connects to the server, retrying for up to cfg.ReconnectTimeout with
// a visible message, and returns the agent.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics,
		prefetch: make(chan struct{}, 16), versions: make(map[uint64]uint64), cbs: newCallbacks()}
	a.releases.a = a
	a.pend.init(a)
	a.ahead.init(a)
	a.dirs.ttl = cfg.DirAttrTimeout
	a.pol.Store(&policyBox{policyNone{}})
	var ln net.Listener
	if cfg.Policy != "none" {
		var err error
		if ln, err = listenPeer(cfg.Listen, cfg.Server); err != nil {
			return nil, err
		}
	}
	memCfg := mem.Config{Capacity: cfg.CacheSize, OnEvict: func(id block.ID, _ block.Version) { a.memEvicted(id) }}
	var err error
	if a.cache, err = mem.New(memCfg); err != nil {
		return nil, err
	}
	cfg.Metrics.Register(obs.NewTierCollector("local_memory", a.cache.Stats))
	cfg.Metrics.Register(a.cbs.metrics()...)
	cfg.Metrics.Register(a.pend.metrics()...)
	cfg.Metrics.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coopfs_peer_capability_refusals_total",
		Help: "Peers' requests this client refused for want of a valid capability (docs/security.md)."},
		func() float64 { return float64(a.capRefusals.Load()) }))
	hello := wire.Hello{Role: wire.RoleClient, Name: cfg.Name, BootID: uint64(time.Now().UnixNano())}
	if ln != nil {
		hello.Listen = ln.Addr().String()
	}
	if _, a.identity, err = ed25519.GenerateKey(nil); err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	a.sess = &session{identity: a.identity, capKeys: &a.caps, addr: cfg.Server, sec: cfg.Security, serverName: cfg.TLSServerName, timeout: cfg.ReconnectTimeout, callTimeout: cfg.RequestTimeout,
		log: cfg.Logger, metrics: cfg.Metrics, hello: hello, handler: wire.HandlerFunc(a.serveServer),
		connected: func(gen uint64, registered bool) {
			a.delegs.connected()
			a.cbs.connected(gen, registered)
			a.wbReconnected()
		}, lost: a.cbs.lost}
	a.sess.register = func(ctx context.Context, c *wire.Conn) bool {
		a.pipeline(ctx, c) // dirattrs.go
		return !cfg.NoCallbacks && register(ctx, c)
	}
	if _, _, err := a.sess.current(ctx); err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("connect to %s: %w", cfg.Server, err)
	}
	if err := a.openDisk(); err != nil {
		a.sess.close()
		if ln != nil {
			ln.Close()
		}
		return nil, err
	}
	if err := a.openWriteBackIf(ctx); err != nil {
		a.sess.close()
		a.closeDisk()
		if ln != nil {
			ln.Close()
		}
		return nil, err
	}
	a.openMetaIf(ctx)
	a.delegs.init(a)
	policy := a.sess.serverPolicy()
	switch {
	case cfg.Policy != "" && cfg.Policy != policy:
		a.sess.close()
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("the server runs policy %q but --policy %s was asked: mount with --policy %s (or leave --policy out to follow the server)", policy, cfg.Policy, policy)
	case policy == "directory" || policy == "hints" || policy == "wholefile":
		p, err := a.newPolicy(ctx, policy, ln)
		if err != nil {
			a.sess.close()
			ln.Close()
			return nil, err
		}
		a.pol.Store(&policyBox{p})
		if h, ok := p.(*hintsClient); ok {
			h.catchUp()
		}
		a.log.Info("cooperative caching on", "policy", policy, "peer_listener", ln.Addr().String())
	case ln != nil:
		ln.Close()
	}
	return a, nil
}

// newPolicy builds a cooperative policy's client side on the peer
// listener ln and registers its metrics.
func (a *Agent) newPolicy(ctx context.Context, name string, ln net.Listener) (policy, error) {
	if name == "wholefile" {
		w := newWholeClient(a, ln)
		a.metrics.Register(wholeCollector{w})
		return w, nil
	}
	if name == "hints" {
		h, err := newHintsClient(ctx, a, ln)
		if err != nil {
			return nil, err
		}
		a.metrics.Register(h)
		return h, nil
	}
	c, err := newCoop(a, ln)
	if err != nil {
		return nil, err
	}
	a.metrics.Register(newCoopCollector(c))
	return c, nil
}

// serveServer answers what the server sends on its own: pings, and the
// running policy's messages (forwards under directory, hint requests and
// the client list under hints).
func (a *Agent) serveServer(ctx context.Context, _ *wire.Conn, m wire.Msg) (wire.Msg, error) {
	if _, ok := m.(*wire.Ping); ok {
		return &wire.OK{}, nil
	}
	if m, ok := m.(*wire.CallbackBreak); ok {
		a.dirs.clear()            // dirattrs.go: someone else changed something
		a.wb.recall(ctx, m)       // a write delegation's break: write back first (writeback_deleg.go)
		a.delegs.recalled(ctx, m) // a directory delegation's: send what was answered here first (deleg.go)
		return a.cbs.serveBreak(m), nil
	}
	if m, ok := m.(*wire.WarmupAssign); ok {
		if !a.warm.accepts(a.cfg.WarmupAccept, m.Job) {
			return nil, fmt.Errorf("this mount takes part only in the cluster warm-ups it starts (mount --warmup-accept lets others'): %w", syscall.EPERM)
		}
		return a.warmAssigned(m), nil
	}
	if r, err, ok := a.policy().serveServer(ctx, m); ok {
		return r, err
	}
	switch m.(type) {
	case *wire.Forward, *wire.PeerNack, *wire.HintsPeers, *wire.HintsExport:
		return nil, errNoPolicy(m)
	}
	return nil, fmt.Errorf("a client does not serve %v: %w", m.Type(), syscall.ENOSYS)
}

// Close drops the server connection; calls after it fail.
func (a *Agent) Close() error {
	var wbErr error
	if a.wb != nil {
		wbErr = a.wb.close(wbCloseTimeout)
	}
	a.warm.close()
	a.policy().close()
	a.pend.flush(context.Background()) // defer.go: what was answered here goes out
	a.delegs.close()
	a.releases.close()
	a.sess.close()
	return errors.Join(wbErr, a.meta.close(), a.closeDisk())
}

// BlockSize is the export's block size.
func (a *Agent) BlockSize() int {
	bs, _ := a.sess.params()
	return bs
}

// Metrics returns the agent's counters.
func (a *Agent) Metrics() *obs.Metrics { return a.metrics }

// pathCall sends m, a request that names paths, as the caller of ctx,
// after the changes answered here that it depends on (defer.go).
func (a *Agent) pathCall(ctx context.Context, m wire.Msg, idempotent bool) (wire.Msg, uint64, error) {
	a.pend.before(ctx, m)
	return a.sess.call(ctx, as(ctx, m), idempotent)
}

func (a *Agent) attrCall(ctx context.Context, m wire.Msg, idempotent bool) (wire.Attr, error) {
	r, _, err := a.pathCall(ctx, m, idempotent)
	if err != nil {
		return wire.Attr{}, err
	}
	ar, ok := r.(*wire.AttrReply)
	if !ok {
		return wire.Attr{}, fmt.Errorf("%v: unexpected reply %v: %w", m.Type(), r.Type(), syscall.EIO)
	}
	return ar.Attr, nil
}

// entryAttrCall is attrCall for an entry change of path (dirattrs.go).
func (a *Agent) entryAttrCall(ctx context.Context, m wire.Msg, path string, idempotent bool) (wire.Attr, error) {
	r, _, err := a.entryCall(ctx, m, path, idempotent)
	if err != nil {
		return wire.Attr{}, err
	}
	ar, ok := r.(*wire.AttrReply)
	if !ok {
		return wire.Attr{}, fmt.Errorf("%v: unexpected reply %v: %w", m.Type(), r.Type(), syscall.EIO)
	}
	return ar.Attr, nil
}

func (a *Agent) okCall(ctx context.Context, m wire.Msg, idempotent bool) error {
	_, _, err := a.pathCall(ctx, m, idempotent)
	return err
}

// Lookup implements fusefs.Backend.
func (a *Agent) Lookup(ctx context.Context, path string) (wire.Attr, error) {
	at, err := a.settledAttr(func() (wire.Attr, error) {
		return a.attrOf(ctx, path, &wire.Lookup{Path: path})
	}, a.getAttr(ctx, path))
	a.holds.overlay(&at) // pipe.go
	return at, err
}

// GetAttr implements fusefs.Backend.
func (a *Agent) GetAttr(ctx context.Context, path string) (wire.Attr, error) {
	if at, ok := a.delegs.dirAttr(path); ok {
		return at, nil // deleg.go: its changes answered here included
	}
	if at, ok := a.dirs.get(path); ok {
		return at, nil // dirattrs.go: this agent's change of the directory said so a moment ago
	}
	at, err := a.settledAttr(func() (wire.Attr, error) {
		return a.attrOf(ctx, path, &wire.GetAttr{Path: path})
	}, a.getAttr(ctx, path))
	if err == nil && at.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		a.delegs.serverAttr(path, at) // deleg.go
	}
	a.holds.overlay(&at) // pipe.go
	return at, err
}

// SetAttr implements fusefs.Backend.
func (a *Agent) SetAttr(ctx context.Context, path string, f vfs.File, in vfs.SetAttrIn) (wire.Attr, error) {
	m := &wire.SetAttr{Path: path, Valid: in.Valid, Mode: in.Mode, UID: in.UID, GID: in.GID,
		Size: in.Size, Atime: in.Atime, Mtime: in.Mtime, Ino: in.Ino, Gen: in.Gen}
	var of *file
	if f != nil {
		of, _ = f.(*file)
	}
	if err := a.beforeSetAttr(ctx, path, of, in); err != nil {
		return wire.Attr{}, err
	}
	if in.Valid&(wire.SetMode|wire.SetUID|wire.SetGID) != 0 && of == nil {
		defer a.delegs.invalidate(ctx, path)() // deleg.go: the verdicts rest on permissions
	}
	t := a.dirs.begin(path) // dirattrs.go: a directory's change the replies do not describe
	defer a.dirs.end(t, nil)
	ask, again := func() (wire.Attr, error) { return a.attrCall(ctx, m, true) }, a.getAttr(ctx, path)
	if of != nil {
		if err := of.endHold(ctx, false); err != nil {
			return wire.Attr{}, err // pipe.go: in order after what the file held
		}
		ask = func() (wire.Attr, error) {
			r, err := of.call(ctx, func(h uint64) wire.Msg { m.Handle = h; return as(ctx, m) }, true)
			if ar, ok := r.(*wire.AttrReply); ok {
				return ar.Attr, err
			}
			return wire.Attr{}, err
		}
		again = func() (wire.Attr, error) { return of.serverAttr(ctx) }
	}
	// A file with dirty data keeps its size here (writeback_attr.go).
	tok := a.cbs.token()
	attr, err := a.settledAttr(ask, again)
	a.setAttrHere(tok, path, attr, err) // cached.go
	if err != nil {
		return attr, err
	}
	a.delegs.serverAttr(path, attr) // deleg.go: a delegated directory's own
	if in.Valid&wire.SetSize != 0 && !a.wb.holds(attr.Ino) {
		old := uint64(0)
		if of != nil {
			of.mu.Lock()
			old = of.attr.Version
			of.mu.Unlock()
			of.setAttr(attr)
			of.wrote.Store(true) // a truncation through the open file: a change it commits
		}
		a.noteVersion(attr.Ino, attr.Version)
		if of == nil {
			// By path (a truncation at open): every open file of it
			// writes from the new size on.
			a.wb.resized(attr)
		} else {
			a.wb.sized(attr, old)
		}
	}
	return attr, nil
}

// ReadDir implements fusefs.Backend.
func (a *Agent) ReadDir(ctx context.Context, path string) ([]wire.DirEntry, error) {
	var all []wire.DirEntry
	for {
		r, _, err := a.pathCall(ctx, &wire.ReadDir{Path: path, Offset: uint64(len(all))}, true)
		if err != nil {
			return nil, err
		}
		page, ok := r.(*wire.ReadDirReply)
		if !ok {
			return nil, fmt.Errorf("readdir: unexpected reply %v: %w", r.Type(), syscall.EIO)
		}
		all = append(all, page.Entries...)
		if !page.More || len(page.Entries) == 0 {
			return all, nil
		}
	}
}

// ReadDirPlus implements fusefs.DirPlusReader: the directory's entries with
// their attributes, one message per page. A server that does not know
// ReadDirPlus is asked with ReadDir (entries without attributes).
func (a *Agent) ReadDirPlus(ctx context.Context, path string) ([]wire.DirEntryPlus, error) {
	if ents, ok := a.cachedList(path); ok {
		a.cbs.hits.Add(1)
		return ents, nil
	}
	a.cbs.misses.Add(1)
	a.delegs.listing(ctx, path) // deleg.go: rm -rf's next removals need not wait
	tok := a.cbs.token()
	var all []wire.DirEntryPlus
	for {
		mark := a.wb.mark()
		r, _, err := a.pathCall(ctx, &wire.ReadDirPlus{Path: path, Offset: uint64(len(all))}, true)
		if errors.Is(err, syscall.ENOSYS) && len(all) == 0 {
			return a.readDirNoAttrs(ctx, path)
		}
		if err != nil {
			return nil, err
		}
		page, ok := r.(*wire.ReadDirPlusReply)
		if !ok {
			return nil, fmt.Errorf("readdirplus: unexpected reply %v: %w", r.Type(), syscall.EIO)
		}
		for i := range page.Entries {
			// An entry whose attributes may be from the middle of a
			// write-back here goes without them (writeback_attr.go).
			if e := &page.Entries[i]; e.HasAttr && !a.wb.overlaySince(&e.Attr, mark) {
				e.HasAttr, e.Attr = false, wire.Attr{}
			}
			a.holds.overlay(&page.Entries[i].Attr) // pipe.go
		}
		all = append(all, page.Entries...)
		if !page.More || len(page.Entries) == 0 {
			a.cbs.installList(ctx, tok, path, all)
			return all, nil
		}
	}
}

func (a *Agent) readDirNoAttrs(ctx context.Context, path string) ([]wire.DirEntryPlus, error) {
	ents, err := a.ReadDir(ctx, path)
	if err != nil {
		return nil, err
	}
	out := make([]wire.DirEntryPlus, len(ents))
	for i, e := range ents {
		out[i].DirEntry = e
	}
	return out, nil
}

// Mkdir implements fusefs.Backend.
func (a *Agent) Mkdir(ctx context.Context, path string, mode uint32) (wire.Attr, error) {
	c, _ := vfs.CallerOf(ctx)
	tok := a.cbs.token()
	at, err := a.entryAttrCall(ctx, &wire.Mkdir{Path: path, Mode: mode, UID: c.UID, GID: c.GID}, path, false)
	a.entryChanged(tok, path, true, err, &at) // names.go: made empty, under a callback
	if err == nil {
		a.delegs.ask(ctx, path, reserveFirst) // deleg.go: what comes next in it may not wait
	}
	return at, err
}

// Unlink implements fusefs.Backend.
func (a *Agent) Unlink(ctx context.Context, path string) error {
	if ok, err := a.deferRemove(ctx, path, false); ok {
		return err // defer.go: answered here, sent later
	}
	a.delegs.removing(parentOf(path))
	a.delegs.askBefore(ctx, parentOf(path), 0)
	// Files closed a moment ago may still be open at the server (their
	// releases wait in the batch, release.go): sent first, so that removing
	// a file just closed frees its space at once, as on a local disk.
	a.releases.flushWait(true)
	a.endAllHolds(ctx) // pipe.go: a held file's data must not go after its name
	if err := a.wb.beforeRemove(ctx, path); err != nil {
		return err // writeback.go: its data must reach its other names first
	}
	tok := a.cbs.token()
	_, _, err := a.entryCall(ctx, &wire.Unlink{Path: path}, path, false)
	a.entryChanged(tok, path, false, err, nil)
	if err == nil {
		a.wb.removed(path)
		a.pend.unlinkedHere(path)
	}
	return err
}

// Rmdir implements fusefs.Backend.
func (a *Agent) Rmdir(ctx context.Context, path string) error {
	if ok, err := a.deferRemove(ctx, path, true); ok {
		return err // defer.go: sent with the removals queued before it
	}
	a.delegs.removing(parentOf(path))
	a.delegs.askBefore(ctx, parentOf(path), 0)
	t := a.dirs.begin(path) // the directory itself goes
	defer a.dirs.end(t, nil)
	tok := a.cbs.token()
	_, _, err := a.entryCall(ctx, &wire.Rmdir{Path: path}, path, false)
	a.entryChanged(tok, path, false, err, nil)
	if f := a.pend.takeFailure(path); f != nil && err != nil {
		return f // a removal in it answered here failed: why it is not empty
	}
	return err
}

// Rename implements fusefs.Backend.
func (a *Agent) Rename(ctx context.Context, oldPath, newPath string, flags uint32) error {
	a.endAllHolds(ctx)
	a.dirs.clear() // dirattrs.go: directories move, and with them the paths below
	defer a.dirs.clear()
	defer a.changedHere(true, oldPath, newPath)
	if flags&unix.RENAME_EXCHANGE == 0 {
		if err := a.wb.beforeRemove(ctx, newPath); err != nil {
			return err // writeback.go: the file renamed over may have other names
		}
	}
	defer a.wb.renameLock()()
	err := a.okCall(ctx, &wire.Rename{Old: oldPath, New: newPath, Flags: flags}, false)
	a.renamedHere(oldPath, newPath, flags, err) // names.go
	a.delegs.forgetAttr(parentOf(oldPath))      // deleg.go: link counts, times
	a.delegs.forgetAttr(parentOf(newPath))
	if err == nil && !a.wb.renamedToItself(ctx, oldPath, newPath, flags) {
		a.wb.afterRename(oldPath, newPath, flags)
	}
	return err
}

// Link implements fusefs.Backend.
func (a *Agent) Link(ctx context.Context, oldPath, newPath string, ino, gen uint64) (wire.Attr, error) {
	a.endAllHolds(ctx)
	defer a.changedHere(false, oldPath)
	tok := a.cbs.token()
	at, err := a.settledAttr(func() (wire.Attr, error) {
		return a.entryAttrCall(ctx, &wire.Link{Old: oldPath, New: newPath, Ino: ino, Gen: gen}, newPath, false)
	}, a.getAttr(ctx, newPath))
	a.entryChanged(tok, newPath, true, err, nil)
	if err == nil {
		a.changedIno(at.Ino)
		a.wb.linked(oldPath, newPath)
	}
	return at, err
}

// Symlink implements fusefs.Backend.
func (a *Agent) Symlink(ctx context.Context, target, path string) (wire.Attr, error) {
	c, _ := vfs.CallerOf(ctx)
	tok := a.cbs.token()
	at, err := a.entryAttrCall(ctx, &wire.Symlink{Target: target, Path: path, UID: c.UID, GID: c.GID}, path, false)
	a.entryChanged(tok, path, true, err, nil)
	return at, err
}

// Readlink implements fusefs.Backend.
func (a *Agent) Readlink(ctx context.Context, path string) (string, error) {
	r, _, err := a.pathCall(ctx, &wire.Readlink{Path: path}, true)
	if err != nil {
		return "", err
	}
	rr, ok := r.(*wire.ReadlinkReply)
	if !ok {
		return "", fmt.Errorf("readlink: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	return rr.Target, nil
}

// StatFs implements fusefs.Backend.
func (a *Agent) StatFs(ctx context.Context) (wire.StatFs, error) {
	r, _, err := a.sess.call(ctx, &wire.StatFsReq{}, true)
	if err != nil {
		return wire.StatFs{}, err
	}
	sr, ok := r.(*wire.StatFsReply)
	if !ok {
		return wire.StatFs{}, fmt.Errorf("statfs: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	return sr.StatFs, nil
}

// Open implements fusefs.Backend: it revalidates the file's version with the
// server (close-to-open) and drops cached blocks of an older version.
func (a *Agent) Open(ctx context.Context, path string, flags uint32) (vfs.File, wire.Attr, error) {
	a.ahead.wait(ctx, path) // openahead.go: read ahead a moment ago
	if f, attr, ok := a.openCached(ctx, path, flags); ok {
		a.cbs.hits.Add(1)
		a.ahead.opened(ctx, path, flags)
		return a.pend.track(f), attr, nil
	}
	if a.openReadable(flags) {
		f, attr, err := a.openRead(ctx, path, flags) // openread.go: the data may come along
		if err == nil {
			a.ahead.opened(ctx, path, flags)
		}
		return a.pend.track(f), attr, err
	}
	f, attr, err := a.open(ctx, &wire.Open{Path: path, Flags: flags}, path, flags)
	return a.pend.track(f), attr, err
}

// Create implements fusefs.Backend.
func (a *Agent) Create(ctx context.Context, path string, flags uint32, mode uint32) (vfs.File, wire.Attr, error) {
	if f, at, ok := a.createHere(ctx, path, flags, mode); ok {
		return a.pend.track(f), at, nil // newfile.go: created into a reserved file, sent with its close
	}
	a.delegs.askBefore(ctx, parentOf(path), reserveFirst)
	c, _ := vfs.CallerOf(ctx)
	f, at, err := a.open(ctx, &wire.Create{Path: path, Flags: flags, Mode: mode, UID: c.UID, GID: c.GID}, path, flags)
	return a.pend.track(f), at, err
}

// An open refused at the per-client handle cap is tried again capRetries
// times, capRetryWait apart when no release was queued (agent.open).
const (
	capRetries   = 20
	capRetryWait = 10 * time.Millisecond
)

func (a *Agent) open(ctx context.Context, m wire.Msg, path string, flags uint32) (*file, wire.Attr, error) {
	_, create := m.(*wire.Create)
	if a.writePolicy() == cache.ReadOnly && (create || writeAccess(flags)) {
		return nil, wire.Attr{}, errReadOnly
	}
	idempotent := !create && flags&syscall.O_TRUNC == 0
	if flags&syscall.O_TRUNC != 0 {
		a.endAllHolds(ctx) // pipe.go: held writes go before the truncation
	}
	call := func() (wire.Msg, uint64, error) {
		if create {
			return a.entryCall(ctx, m, path, idempotent) // dirattrs.go
		}
		return a.pathCall(ctx, m, idempotent)
	}
	tok := a.cbs.token()
	mark := a.wb.mark()
	r, gen, err := a.retryCap(call) // openread.go: the per-client handle cap
	switch {
	case create:
		a.entryChanged(tok, path, true, err, nil) // names.go
	case !idempotent:
		a.changedHere(false, path) // an O_TRUNC open
	}
	if err != nil {
		return nil, wire.Attr{}, err
	}
	or, ok := r.(*wire.OpenReply)
	if !ok {
		return nil, wire.Attr{}, fmt.Errorf("open: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	a.ownCaps.put(or.Cap)
	if flags&syscall.O_TRUNC != 0 {
		a.wb.discard(or.Attr.Ino) // the server emptied the file: its dirty data is moot
	}
	if !create {
		// An open of a file that another open file holds writes of
		// (pipe.go) finds them on the server, as write-through would.
		if at, ok := a.commitIno(ctx, or.Attr.Ino); ok {
			or.Attr = at
		}
	}
	if !a.wb.overlaySince(&or.Attr, mark) {
		// The answer may be from the middle of a write-back here that has
		// finished since (writeback_attr.go): ask again through the handle.
		h := or.Handle
		or.Attr, err = a.settledAttr(func() (wire.Attr, error) {
			return a.attrCall(ctx, &wire.GetAttr{Path: path, Handle: h}, true)
		}, nil)
		if err != nil {
			if !a.releases.add(gen, h) {
				a.sess.call(ctx, &wire.Release{Handle: h}, false)
			}
			return nil, wire.Attr{}, err
		}
	}
	keep := a.noteVersion(or.Attr.Ino, or.Attr.Version)
	if idempotent {
		a.cbs.install(ctx, tok, path, or.Attr)
	}
	c, _ := vfs.CallerOf(ctx)
	f := &file{a: a, path: path, flags: flags, h: or.Handle, gen: gen, attr: or.Attr, keep: keep && !create, caller: c}
	if flags&syscall.O_TRUNC != 0 {
		f.wrote.Store(true) // the open emptied the file: a change its close commits
	}
	if or.Attr.Mode&syscall.S_IFMT == syscall.S_IFREG {
		a.policy().opened(ctx, f)
	}
	a.wb.opened(f)
	if create {
		a.startHold(f)
	}
	return f, or.Attr, nil
}

// noteVersion records that file ino is now at version v and drops its
// cached blocks of any other version. It reports whether v is the version
// already known (the kernel's page cache of the file is still good).
func (a *Agent) noteVersion(ino, v uint64) bool {
	if a.wb.holds(ino) {
		// Dirty here: the blocks keep the version they were written at
		// until they are written back (writeback.go).
		return true
	}
	a.mu.Lock()
	old, known := a.versions[ino]
	a.versions[ino] = v
	if !known {
		a.boundVersions()
	}
	a.mu.Unlock()
	if known && old != v {
		a.changedIno(ino)
		a.dropFile(ino)
	} else if !known {
		a.dropOtherDiskVersion(ino, v)
	}
	return known && old == v
}
