package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/fusefs"
	"github.com/coopfs/coopfs/internal/obs"
)

func runMount(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mount", "--server HOST:PORT [flags] MOUNTPOINT", stderr)
	serverAddr := fs.String("server", "", "address of the coopfs server (HOST:PORT, required)")
	cacheSize := block.Size(mem.DefaultCapacity)
	fs.Var(&cacheSize, "cache-size", "memory block cache")
	policy := fs.String("policy", "", "coordination policy: none or directory; empty follows the server's")
	listen := fs.String("listen", "", "directory policy: peer listener HOST:PORT (default: the address toward the server, any port)")
	forwardTimeout := fs.Duration("forward-timeout", 5*time.Second, "directory policy: how long to wait for a block a peer should send before asking the server")
	discardQueue := fs.Int("discard-queue", 400, "directory policy: evicted blocks per batched discard notification")
	noDiscard := fs.Bool("no-discard", false, "directory policy: send no discard notifications (for comparisons)")
	secFlags := addSecurityFlags(fs)
	serverName := fs.String("tls-server-name", "", "with --tls-ca: the name the server's certificate must carry (default: the host of --server)")
	attrTimeout := fs.Duration("attr-timeout", fusefs.DefaultAttrTimeout, "how long the kernel caches attributes between opens")
	readAhead := fs.Int("read-ahead", 4, "blocks fetched ahead of a sequential reader")
	noCallbacks := fs.Bool("no-callbacks", false, "ask the server for no callbacks: every open, lookup and listing is a message (close-to-open by revalidation, attributes cached for --attr-timeout)")
	coveredTimeout := fs.Duration("covered-timeout", fusefs.DefaultCoveredTimeout, "how long the kernel caches attributes and names that a server callback covers (a break invalidates them at once)")
	reconnect := fs.Duration("reconnect-timeout", 30*time.Second, "how long to retry an unreachable server before failing (at mount and later)")
	diskDir := fs.String("disk-cache", "", "persistent disk cache directory under the memory cache (seed 003); none if empty")
	diskSize := block.Size(disk.DefaultSize)
	fs.Var(&diskSize, "disk-cache-size", "disk cache size (block data), e.g. 20GiB; rounded down to whole sets")
	diskBanks := fs.Int("disk-banks", 0, "disk cache bank files (default 64, fewer for a small cache)")
	diskAssoc := fs.Int("disk-assoc", 0, "disk cache ways per set, at least 2 (default 16, fewer for a small cache)")
	metrics := fs.String("metrics", "", "serve Prometheus /metrics on HOST:PORT")
	name := fs.String("name", "", "name of this client in the server's logs (default: host name)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *serverAddr == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "coopfs mount: want --server HOST:PORT and exactly one MOUNTPOINT")
		fs.Usage()
		return errUsage
	}
	if *diskDir == "" {
		var stray []string
		fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "disk-") {
				stray = append(stray, "--"+f.Name)
			}
		})
		if len(stray) > 0 {
			return fmt.Errorf("%s given without --disk-cache DIR: add --disk-cache DIR to use a disk cache", strings.Join(stray, ", "))
		}
	}
	mountpoint := fs.Arg(0)
	if _, err := fusefs.CheckMountpoint(mountpoint); err != nil {
		return err
	}
	log := obs.NewLogger(stderr, *logLevel)
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
		Policy: *policy, Listen: *listen, ForwardTimeout: *forwardTimeout, DiscardQueue: *discardQueue, NoDiscard: *noDiscard, NoCallbacks: *noCallbacks,
		Disk: agent.DiskConfig{Dir: *diskDir, Size: int64(diskSize), Banks: *diskBanks, Assoc: *diskAssoc}})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted while connecting")
		}
		return err
	}
	defer a.Close()
	mnt, err := fusefs.Mount(ctx, mountpoint, a, fusefs.Config{AttrTimeout: *attrTimeout, EntryTimeout: *attrTimeout, CoveredTimeout: *coveredTimeout, NoCallbacks: *noCallbacks}, log)
	if err != nil {
		return err
	}
	log.Info("mounted", "mountpoint", mnt.Dir(), "server", *serverAddr, "cache_size", cacheSize.String())
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
