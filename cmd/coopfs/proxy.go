package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/proxy"
	"github.com/coopfs/coopfs/internal/server"
)

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("proxy", "--upstream HOST:PORT --listen HOST:PORT [flags]", stderr)
	upstream := fs.String("upstream", "", "the coopfs server, or another proxy, above this one (HOST:PORT, required)")
	listen := fs.String("listen", "127.0.0.1:7071", "address to accept clients (mounts or other proxies) on (HOST:PORT)")
	cacheSize := block.Size(mem.DefaultCapacity)
	fs.Var(&cacheSize, "cache-size", "memory block cache")
	diskF := addDiskFlags(fs)
	var writePolicy cache.WritePolicy // write-through
	fs.Var(&writePolicy, "write-policy", "what the proxy does with writes: read-only (refused with EROFS), write-through (default: relayed; whole written blocks kept) or write-back (completed in the disk cache, written back later; needs --disk-cache)")
	wbDelay := fs.Duration("write-back-delay", 30*time.Second, "write-back: how long data may stay dirty before it is written back in the background")
	wbHigh := fs.Float64("write-back-high-water", 0.5, "write-back: the fraction of --disk-cache-size dirty data may fill before it is written back at once")
	secFlags := addSecurityFlags(fs)
	serverName := fs.String("tls-server-name", "", "with --tls-ca: the name the upstream's certificate must carry (default: the host of --upstream)")
	reconnect := fs.Duration("reconnect-timeout", 10*time.Second, "how long to retry an unreachable upstream at start before failing")
	requestTimeout := fs.Duration("request-timeout", 2*time.Minute, "how long a relayed request waits for the upstream's reply; the client then gets ETIMEDOUT")
	connF := addConnFlags(fs, "client connections")
	metrics := fs.String("metrics", "", "serve Prometheus /metrics on HOST:PORT")
	name := fs.String("name", "proxy", "name of this proxy in the upstream's logs")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *upstream == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "coopfs proxy: --upstream HOST:PORT is required and no other arguments are taken")
		fs.Usage()
		return errUsage
	}
	if err := diskF.check(fs); err != nil {
		return err
	}
	if err := proxy.CheckWritePolicy(writePolicy); err != nil {
		return err
	}
	if writePolicy == cache.WriteBack && *diskF.dir == "" {
		return errors.New("--write-policy write-back needs a disk cache: add --disk-cache DIR")
	}
	log := obs.NewLogger(stderr, *logLevel)
	sec, err := secFlags.load()
	if err != nil {
		return err
	}
	if err := checkListenSecurity(sec, *listen, log, stderr); err != nil {
		return err
	}
	m := obs.NewMetrics()
	log.Info("connecting", "upstream", *upstream)
	p, err := proxy.New(ctx, proxy.Config{Upstream: *upstream, Security: sec, TLSServerName: *serverName, Name: *name,
		CacheSize: int64(cacheSize), WritePolicy: writePolicy, WriteBack: proxy.WriteBackConfig{Delay: *wbDelay, HighWater: *wbHigh},
		Disk:           proxy.DiskConfig{Dir: *diskF.dir, Size: int64(diskF.size), Banks: *diskF.banks, Assoc: *diskF.assoc},
		ConnectTimeout: *reconnect, RequestTimeout: *requestTimeout,
		Conns:  connF.limits(),
		Logger: log, Metrics: m})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted while connecting to the upstream")
		}
		return err
	}
	defer p.Close()
	ln, err := server.Listen(*listen)
	if err != nil {
		return err
	}
	if writePolicy == cache.WriteBack {
		stopCtl, err := serveFlushSocket(ctx, p, controlSocket(proxyControlKey(*listen)), log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopCtl()
	}
	if err := serveMetrics(ctx, m, *metrics, log); err != nil {
		ln.Close()
		return err
	}
	log.Info("proxying", "listen", ln.Addr().String(), "upstream", *upstream, "write_policy", writePolicy.String(),
		"cache_size", cacheSize.String(), "disk_cache", *diskF.dir, "security", sec.Mode())
	notifyReady(log)
	if err := p.Serve(ctx, ln); err != nil {
		return err
	}
	log.Info("proxy stopped")
	return nil
}
