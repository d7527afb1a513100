package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Config configures a file server.
type Config struct {
	Export    string // the directory to export
	BlockSize int    // bytes per block; default 1 MiB
	CacheSize int64  // the server's memory block cache; default 256 MiB
	ReadOnly  bool
	Secret    []byte           // the cluster secret, used when Security is nil
	Security  *wire.Security   // TLS and authentication; nil: TLS with Secret, or plaintext on loopback without one
	Conns     wire.ConnLimits  // caps on connections and handshakes
	Policy    string           // coordination policy: "none" (default), "directory", "hints" or "wholefile" (Policies)
	Directory directory.Config // the directory policy's settings
	// DiscardCacheSize is the hints policy's discard cache in server
	// memory (young master copies clients evicted by mistake), rounded down
	// to whole blocks; 0 takes DefaultDiscardCacheSize, negative means none.
	DiscardCacheSize int64
	PingTimeout      time.Duration // directory policy: how long a pinged client has to answer; default 2s
	// Squash maps client identities as NFS does: "root" (default: a
	// client's root is the anonymous user), "all" or "none".
	Squash           string
	AnonUID, AnonGID uint32 // the anonymous user; default 65534 (0 is taken as the default)
	Limits           Limits // per-connection caps; zero fields take DefaultLimits
	// CallbackTimeout is how long a callback break waits for a holder's
	// ack before it disconnects the holder (callbacks.go); default 2s.
	CallbackTimeout time.Duration
	// MaxCallbacks is how many objects one client may hold callbacks on;
	// past it all its callbacks are broken at once. Default 1<<20.
	MaxCallbacks int
	// RecallTimeout bounds the recall of a write delegation (recall.go):
	// the holder's write-back of the file an open waits for; default 20s.
	RecallTimeout time.Duration
	// RecallTimeoutPolicy is what such an open gets when the holder does
	// not answer in time: RecallEIO (default) or RecallStale.
	RecallTimeoutPolicy string
	Logger              *slog.Logger
	Metrics             *obs.Metrics
}

// Defaults.
const (
	DefaultBlockSize = 1 << 20
	DefaultCacheSize = 256 << 20
	// DefaultDiscardCacheSize is the hints policy's discard cache.
	DefaultDiscardCacheSize = 64 << 20
	MaxBlockSize            = 8 << 20

	DefaultCallbackTimeout = 2 * time.Second
	DefaultMaxCallbacks    = 1 << 20
)

func (c *Config) setDefaults() {
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.Policy == "" {
		c.Policy = "none"
	}
	if c.DiscardCacheSize == 0 {
		c.DiscardCacheSize = DefaultDiscardCacheSize
	}
	if c.Squash == "" {
		c.Squash = SquashRoot
	}
	if c.AnonUID == 0 {
		c.AnonUID = DefaultAnonID
	}
	if c.AnonGID == 0 {
		c.AnonGID = DefaultAnonID
	}
	if c.PingTimeout == 0 {
		c.PingTimeout = 2 * time.Second
	}
	if c.RecallTimeout == 0 {
		c.RecallTimeout = DefaultRecallTimeout
	}
	if c.CallbackTimeout == 0 {
		c.CallbackTimeout = DefaultCallbackTimeout
	}
	if c.MaxCallbacks == 0 {
		c.MaxCallbacks = DefaultMaxCallbacks
	}
	c.Limits.setDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = obs.NewMetrics()
	}
	if c.Security == nil {
		c.Security = wire.MustSecurity(wire.SecurityConfig{Secret: c.Secret, Insecure: len(c.Secret) == 0})
	}
	c.Conns.SetDefaults()
}

func (c *Config) validate() error {
	if c.BlockSize < 4096 || c.BlockSize > MaxBlockSize || c.BlockSize&(c.BlockSize-1) != 0 {
		return fmt.Errorf("block size %d: want a power of two from 4KiB to 8MiB", c.BlockSize)
	}
	if !slices.Contains(Policies, c.Policy) {
		return fmt.Errorf("unknown policy %q: use none, directory, hints or wholefile", c.Policy)
	}
	if c.Squash != SquashRoot && c.Squash != SquashAll && c.Squash != SquashNone {
		return fmt.Errorf("unknown squash mode %q: use root, all or none", c.Squash)
	}
	if c.RecallTimeoutPolicy != "" && c.RecallTimeoutPolicy != RecallEIO && c.RecallTimeoutPolicy != RecallStale {
		return fmt.Errorf("unknown recall timeout policy %q: use eio or stale", c.RecallTimeoutPolicy)
	}
	if c.RecallTimeout < 0 {
		return fmt.Errorf("recall timeout %s is negative", c.RecallTimeout)
	}
	if c.CallbackTimeout < 0 || c.MaxCallbacks < 0 {
		return fmt.Errorf("callback timeout %s / max callbacks %d: want positive values", c.CallbackTimeout, c.MaxCallbacks)
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	st, err := os.Stat(c.Export)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("export directory %s does not exist: create it, or export an existing directory (%w)", c.Export, err)
	case err != nil:
		return fmt.Errorf("export directory: %w", err)
	case !st.IsDir():
		return fmt.Errorf("export %s is not a directory", c.Export)
	}
	if f, err := os.Open(c.Export); err != nil {
		return fmt.Errorf("export directory is not readable: %w", err)
	} else if _, err := f.Readdirnames(1); err != nil && err.Error() != "EOF" {
		f.Close()
		return fmt.Errorf("export directory is not readable: %w", err)
	} else {
		f.Close()
	}
	return nil
}

// Server is a running file server.
type Server struct {
	cfg         Config
	log         *slog.Logger
	root        *os.Root
	exportAbs   string   // the export's absolute path
	exportDir   *os.File // the export directory, for statx relative to it
	exportFd    int      // exportDir's descriptor
	openat2     bool     // the kernel resolves beneath the export (resolve.go)
	bootID      uint64
	caps        *capabilities // the read capabilities it issues (capability.go)
	inflight    *inflight     // in-flight budgets per address and in total (quota.go)
	versions    *versions
	cache       *mem.Cache
	handles     *handles
	pol         policy       // the coordination policy (policy.go)
	coop        *coop        // the directory policy's state (pdirectory.go); nil under the others
	cbs         *callbacks   // callbacks granted to clients (callbacks.go)
	ddelegs     *dirDelegs   // directory delegations (dirdeleg.go)
	recalls     *recalls     // write delegations of write-back clients (recall.go)
	watch       *watcher     // inotify on the directories handed out (watch.go); nil: no callbacks
	stuck       atomic.Int64 // requests answered ETIMEDOUT (the export did not finish them)
	locks       *lockTable
	warm        warmJobs     // cluster warm-ups under way (warmup.go)
	pins        *pins        // recently looked-up files (pins.go)
	dirs        *dirCursors  // directories being listed (readdir.go)
	pinnedOpens atomic.Int64 // opens served from a pin (pins.go)
	// switchCreds: requests are performed as their (squashed) caller
	// (identity.go); ownGID and ownGroups are the server's own group and
	// groups to return to.
	switchCreds          bool
	ownGID               uint32
	ownGroups            []uint32
	permitted            [2]unix.CapUserData // the process's capabilities (identity.go)
	digests              *digests            // block digests peers' blocks are checked against (directory and hints)
	drc                  *replyCache         // outcomes of the last writes (drc.go)
	drcHits              atomic.Int64        // writes answered without applying them again
	xattrWarn            sync.Once
	testCrashAfterAppend bool // drc.go's test hook
	crashOnce            atomic.Bool

	// fileLocks: changes through the server to one file, one at a time (ops.go mutate).
	fileLocks [fileLockStripes]sync.Mutex

	mu       sync.Mutex
	conns    map[*wire.Conn]struct{}
	nextID   uint32
	closed   bool
	listener net.Listener
}

// New opens the export and returns a server ready to Serve.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(cfg.Export)
	if err != nil {
		return nil, fmt.Errorf("open export: %w", err)
	}
	abs, err := filepath.Abs(cfg.Export)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("export path: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, root: root, handles: newHandles(), exportAbs: abs, locks: newLockTable(cfg.Limits.MaxLockWaiters), pins: newPins(), dirs: newDirCursors(cfg.Limits.DirCursors),
		drc: newReplyCache(cfg.Limits.ReplyCache), testCrashAfterAppend: os.Getenv(testCrashEnv) == "1",
		bootID: uint64(time.Now().UnixNano()), conns: make(map[*wire.Conn]struct{}),
		cbs: newCallbacks(cfg.Logger, cfg.CallbackTimeout, cfg.MaxCallbacks)}
	s.recalls = newRecalls(s.cbs, cfg.Logger, cfg.RecallTimeout, cfg.RecallTimeoutPolicy)
	s.cbs.beforeDrop = s.recalls.orphanLocked
	s.ddelegs = newDirDelegs()
	if s.caps, err = newCapabilities(); err != nil {
		root.Close()
		return nil, err
	}
	s.inflight = newInflight(cfg.Limits)
	s.locks.maxHeld, s.locks.maxTotal = cfg.Limits.MaxLocks, cfg.Limits.MaxLocksTotal
	s.handles.maxPerAddr, s.handles.maxTotal = cfg.Limits.MaxHandlesPerAddr, cfg.Limits.MaxHandlesTotal
	s.cbs.elsewhere = s.ddelegs.heldElsewhere
	if err := s.initCreds(); err != nil {
		root.Close()
		return nil, err
	}
	if s.exportDir, err = root.Open("."); err != nil {
		root.Close()
		return nil, fmt.Errorf("open export: %w", err)
	}
	s.exportFd = int(s.exportDir.Fd())
	s.initResolve()
	if s.pol, err = newPolicy(s); err != nil {
		root.Close()
		return nil, err
	}
	memCfg := mem.Config{Capacity: cfg.CacheSize, OnEvict: func(id block.ID, _ block.Version) { s.pol.memEvicted(id) }}
	s.versions = newVersions(s.bootID, s.pol.fileChanged)
	if s.watch, err = newWatcher(s); err != nil {
		s.log.Warn("cannot watch the export for direct changes: clients get no callbacks and revalidate every open", "err", err)
	}
	s.versions.max = cfg.Limits.MaxFiles
	if s.cache, err = mem.New(memCfg); err != nil {
		root.Close()
		return nil, err
	}
	s.cfg.Metrics.Register(obs.NewTierCollector("server_memory", s.cache.Stats))
	if err := s.cfg.Metrics.Register(append(s.limitMetrics(), s.callbackMetrics()...)...); err != nil {
		root.Close()
		return nil, fmt.Errorf("register server metrics: %w", err)
	}
	return s, nil
}

// Listen opens the server's TCP listener with a clear error when the
// address is taken.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen on %s: the port is in use; stop the other process or pick another --listen address", addr)
		}
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// IsLoopback reports whether a listen address only accepts local connections.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve accepts clients on ln until ctx is canceled, then closes every
// connection and returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	s.listener = ln
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	return s.acceptLoop(ctx, ln)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops the server: the listener, every connection, every open handle.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := s.conns
	s.conns = nil
	ln := s.listener
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for c := range conns {
		c.Close()
	}
	s.watch.close()
	s.handles.closeAll()
	s.pins.closeAll()
	s.dirs.closeAll()
	s.exportDir.Close()
	return s.root.Close()
}

// client is what the server knows of one connection's dialer.
type client struct {
	id     uint32
	name   string
	listen string
	bootID uint64
	// session names its exactly-once state (drc.go): the key of the
	// session id the server issued to it (wire.Security.Session), not its
	// boot id, which any member may claim.
	session uint64
	cert    string // the name in its certificate (certificate mode), else ""
	key     []byte // the identity key it proved in the handshake; capabilities name it
	// parents: replies to entry changes carry the parent's attributes
	// (wire.ParentAttrs, entry.go).
	parents atomic.Bool
}

// handshake authenticates a dialer; admitted is called once its handshake
// is over (it no longer counts as unauthenticated).
func (s *Server) handshake(nc net.Conn, admitted func()) {
	reply := wire.HelloReply{BlockSize: uint32(s.cfg.BlockSize), Policy: s.cfg.Policy, BootID: s.bootID}
	var cl client
	hs, err := wire.ServerHandshake(nc, s.cfg.Security, reply, func(hs *wire.Handshake) (wire.Welcome, error) {
		h := hs.Hello
		s.mu.Lock()
		s.nextID++
		cl = client{id: s.nextID, name: h.Name, listen: h.Listen, bootID: h.BootID, cert: hs.PeerCert, key: hs.PeerKey}
		s.mu.Unlock()
		sid, _ := s.cfg.Security.Session(h.Session, hs.PeerCert)
		cl.session = wire.SessionKey(sid)
		return wire.Welcome{ClientID: cl.id, Session: sid, CapKey: s.caps.public()}, nil
	})
	admitted()
	if err != nil {
		name := ""
		if hs != nil && hs.Hello != nil {
			name = hs.Hello.Name
		}
		s.log.Warn("rejected a connection", "remote", nc.RemoteAddr().String(), "name", name, "err", err)
		nc.Close()
		return
	}
	pools, leave := s.inflight.join(remoteIP(nc))
	defer leave()
	c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{
		Handler:          wire.HandlerFunc(s.serveClient),
		MaxInFlightBytes: s.cfg.Limits.MaxInFlightBytes,
		InFlightPools:    pools,
		IdleTimeout:      s.cfg.Limits.IdleTimeout,
		HandlerTimeout:   s.cfg.Limits.HandlerTimeout,
		Inline:           inline,
		InlineQuick:      quick,
		OnTimeout:        s.timedOut,
		Observer:         obs.WireObserver{M: s.cfg.Metrics, Kind: obs.KindClient},
		Name:             fmt.Sprintf("client %d (%s, %s)", cl.id, cl.name, nc.RemoteAddr()),
		Value:            &cl, // before the first request is read: it names the client
	})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.pol.joined(&cl, c)
	s.log.Info("client connected", "client", cl.id, "name", cl.name, "certificate", cl.cert, "remote", nc.RemoteAddr().String(), "peer_listener", cl.listen)
	<-c.Done()
	s.cbs.left(cl.id)
	s.ddelegs.left(cl.id)
	s.pol.left(&cl)
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	n := s.handles.releaseOwner(c)
	s.dirs.dropConn(c)
	nl := s.locks.releaseClient(cl.id)
	s.log.Info("client disconnected", "client", cl.id, "name", cl.name, "reason", c.Err(), "handles_closed", n, "locks_dropped", nl)
}
