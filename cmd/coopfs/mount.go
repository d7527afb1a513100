package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/fusefs"
	"github.com/coopfs/coopfs/internal/obs"
)

func runMount(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mount", "--server HOST:PORT [flags] MOUNTPOINT", stderr)
	serverAddr := fs.String("server", "", "address of the coopfs server (HOST:PORT, required)")
	cacheSize := block.Size(mem.DefaultCapacity)
	fs.Var(&cacheSize, "cache-size", "memory block cache")
	policy := fs.String("policy", "", "coordination policy: none, directory, hints or wholefile; empty follows the server's")
	listen := fs.String("listen", "", "cooperative policies (directory, hints, wholefile): peer listener HOST:PORT (default: the address toward the server, any port; under hints a fixed address keeps the client's identity across restarts)")
	forwardTimeout := fs.Duration("forward-timeout", 5*time.Second, "cooperative policies: how long to wait for a block or an answer a peer should send before asking the server")
	discardQueue := fs.Int("discard-queue", 400, "directory policy: evicted blocks per batched discard notification")
	noDiscard := fs.Bool("no-discard", false, "directory policy: send no discard notifications (for comparisons)")
	warmupAccept := fs.Bool("warmup-accept", false, "take part in the cluster warm-ups other mounts start (coopfs warmup --cluster): they name what this client reads; without it, only in its own")
	wholeMin := block.Size(agent.DefaultWholeFileMinSize)
	openData := block.Size(agent.DefaultOpenDataMax)
	fs.Var(&openData, "open-data-max", "an open for reading of a file of at most this size (and one block) brings its data in the reply (0: never; bench replay turns it off to compare with the simulator)")
	fs.Var(&wholeMin, "wholefile-min-size", "wholefile policy: files smaller than this are read from the server directly, without the commit counter and the peers (0: every file; default from the measured crossover, docs/benchmarks-wholefile.md)")
	secFlags := addSecurityFlags(fs)
	serverName := fs.String("tls-server-name", "", "with --tls-ca: the name the server's certificate must carry (default: the host of --server)")
	attrTimeout := fs.Duration("attr-timeout", fusefs.DefaultAttrTimeout, "how long the kernel caches attributes between opens")
	readAhead := fs.Int("read-ahead", 4, "blocks fetched ahead of a sequential reader")
	noCallbacks := fs.Bool("no-callbacks", false, "ask the server for no callbacks: every open, lookup and listing is a message (close-to-open by revalidation, attributes cached for --attr-timeout)")
	coveredTimeout := fs.Duration("covered-timeout", fusefs.DefaultCoveredTimeout, "how long the kernel caches attributes and names that a server callback covers (a break invalidates them at once)")
	reconnect := fs.Duration("reconnect-timeout", 30*time.Second, "how long to retry an unreachable server before failing (at mount and later)")
	diskF := addDiskFlags(fs)
	var writePolicy cache.WritePolicy
	fs.Var(&writePolicy, "write-policy", "read-only (writes fail with EROFS), write-through (default: a write reaches the server before it returns) or write-back (writes complete in the disk cache; needs --disk-cache)")
	wbDelay := fs.Duration("write-back-delay", 30*time.Second, "write-back: how long data may stay dirty before it is written back in the background")
	wbHigh := fs.Float64("write-back-high-water", 0.5, "write-back: the fraction of --disk-cache-size dirty data may fill before it is written back at once")
	wbCloseSync := fs.Bool("write-back-close-sync", true, "write-back: close(2) of a file opened for writing syncs the disk cache, so a write acknowledged by close survives a machine crash (false: only fsync and the once-a-second background sync do)")
	metrics := fs.String("metrics", "", "serve Prometheus /metrics on HOST:PORT")
	name := fs.String("name", "", "name of this client in the server's logs and its recalls (default: HOST:DIR, DIR the --disk-cache directory or else the mount point: unique per mount on a host and the same after a restart)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	fuseDebug := fs.Bool("fuse-debug", false, "log every FUSE request and reply (with --log-level debug)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *serverAddr == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "coopfs mount: want --server HOST:PORT and exactly one MOUNTPOINT")
		fs.Usage()
		return errUsage
	}
	if *diskF.dir == "" && writePolicy == cache.WriteBack {
		return errors.New("--write-policy write-back keeps dirty data on disk: add --disk-cache DIR")
	}
	if err := diskF.check(fs); err != nil {
		return err
	}
	mountpoint := fs.Arg(0)
	if _, err := fusefs.CheckMountpoint(mountpoint); err != nil {
		return err
	}
	if *name == "" {
		host, _ := os.Hostname()
		// A disk cache holds what a write-back mount left dirty: its
		// directory is what a restart (at any mount point) resumes.
		where := mountpoint
		if *diskF.dir != "" {
			where = *diskF.dir
		}
		*name = defaultMountName(host, where)
	}
	log := withLastError(obs.NewLogger(stderr, *logLevel)) // status.go: `coopfs status` shows the last error
	sec, err := secFlags.load()
	if err != nil {
		return err
	}
	warnInsecure(sec, log, stderr)
	m := obs.NewMetrics()
	if err := serveMetrics(ctx, m, *metrics, log); err != nil {
		return err
	}
	log.Info("connecting", "server", *serverAddr)
	a, err := agent.New(ctx, agent.Config{Server: *serverAddr, Security: sec, TLSServerName: *serverName, CacheSize: int64(cacheSize),
		ReadAhead: *readAhead, ReconnectTimeout: *reconnect, Name: *name, Logger: log, Metrics: m,
		Policy: *policy, Listen: *listen, ForwardTimeout: *forwardTimeout, DiscardQueue: *discardQueue, NoDiscard: *noDiscard, WarmupAccept: *warmupAccept, NoCallbacks: *noCallbacks,
		WholeFileMinSize: sizeOrNone(wholeMin), OpenDataMax: sizeOrNone(openData),
		Disk:        agent.DiskConfig{Dir: *diskF.dir, Size: int64(diskF.size), Banks: *diskF.banks, Assoc: *diskF.assoc},
		WritePolicy: writePolicy, WriteBack: agent.WriteBackConfig{Delay: *wbDelay, HighWater: *wbHigh, NoCloseSync: !*wbCloseSync},
		DirAttrTimeout: dirAttrTimeout(*attrTimeout)})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted while connecting")
		}
		return err
	}
	defer a.Close()
	m.Register(dirtyGauges(a)...) // status.go
	// The control socket (`coopfs flush`, `coopfs warmup`) is up before
	// the mount appears, so that whoever waits for the mount can use it at
	// once.
	stopCtl, err := serveControl(ctx, a, mountpoint, writePolicy == cache.WriteBack, log)
	if err != nil {
		return err
	}
	defer stopCtl()
	mnt, err := fusefs.Mount(ctx, mountpoint, a, fusefs.Config{AttrTimeout: *attrTimeout, EntryTimeout: *attrTimeout,
		FsName:   *serverAddr, // mount -a and findmnt match fstab's source
		ReadOnly: writePolicy == cache.ReadOnly, CoveredTimeout: *coveredTimeout, NoCallbacks: *noCallbacks, Debug: *fuseDebug}, log)
	if err != nil {
		return err
	}
	log.Info("mounted", "mountpoint", mnt.Dir(), "server", *serverAddr, "cache_size", cacheSize.String(), "write_policy", writePolicy.String())
	notifyReady(log)
	select {
	case <-ctx.Done():
		log.Info("unmounting", "mountpoint", mnt.Dir())
		if err := mnt.Unmount(); err != nil {
			return fmt.Errorf("unmount %s: %w (try: fusermount3 -u %s)", mnt.Dir(), err, mnt.Dir())
		}
	case <-mnt.Done():
		log.Info("unmounted from outside", "mountpoint", mnt.Dir())
	}
	return nil
}

// The agent provides the FUSE adapter's Backend and every optional interface
// of it (the adapter depends on the agent's behaviour, the agent not on it).
var (
	_ fusefs.Backend      = (*agent.Agent)(nil)
	_ fusefs.Mknoder      = (*agent.Agent)(nil)
	_ fusefs.Xattrer      = (*agent.Agent)(nil)
	_ fusefs.LockBackend  = (*agent.Agent)(nil)
	_ fusefs.PinnedOpener = (*agent.Agent)(nil)
)

// sizeOrNone is a size flag as the agent takes it: the flag's 0 (no data
// with opens; every file is wholefile's) is -1 there, whose 0 means the
// default.
func sizeOrNone(s block.Size) int64 {
	if s == 0 {
		return -1
	}
	return int64(s)
}

// dirAttrTimeout is how long the agent answers a directory's getattrs from
// its own last change of it (agent.Config.DirAttrTimeout): 250 ms, never
// more than the kernel's own attribute timeout, and not at all without one.
func dirAttrTimeout(attr time.Duration) time.Duration {
	if attr <= 0 {
		return -1
	}
	return min(attr, 250*time.Millisecond)
}

// maxDefaultName bounds the default mount name; a longer one keeps its
// start and ends in a hash of the whole.
const maxDefaultName = 128

// defaultMountName is a mount's name when --name is not given: the host
// name and the absolute path of its disk cache directory, or of its mount
// point without one. A write-back mount is known by its name when it
// comes back after a crash (the server's orphans of that name are its
// own): the name must differ between the mounts of one host and stay the
// same across a mount's restarts.
func defaultMountName(host, dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	name := host + ":" + filepath.Clean(dir)
	if len(name) <= maxDefaultName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:maxDefaultName-17] + "~" + hex.EncodeToString(sum[:8])
}
