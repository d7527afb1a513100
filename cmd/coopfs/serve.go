package main

import (
	"context"
	"fmt"
	"io"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/server"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "--export DIR [flags]", stderr)
	export := fs.String("export", "", "directory to export (required)")
	listen := fs.String("listen", "127.0.0.1:7070", "address to accept clients on (HOST:PORT)")
	secFlags := addSecurityFlags(fs)
	connF := addConnFlags(fs, "connections")
	blockSize := block.Size(server.DefaultBlockSize)
	fs.Var(&blockSize, "block-size", "block size, a power of two from 4KiB to 8MiB")
	cacheSize := block.Size(server.DefaultCacheSize)
	fs.Var(&cacheSize, "cache-size", "server memory block cache")
	readOnly := fs.Bool("read-only", false, "refuse every change to the export")
	policy := fs.String("policy", "none", "coordination policy: none (every miss to the server), directory (the server forwards misses to a client that holds the block) hints (clients find blocks through location hints, without the server) or wholefile (clients cache whole files on disk and fetch a changed one from the clients holding its current version, in parallel segments)")
	discardCacheSize := block.Size(server.DefaultDiscardCacheSize)
	fs.Var(&discardCacheSize, "discard-cache-size", "hints policy: the discard cache in server memory, for young master copies clients evicted by mistake (e.g. 64MiB; 0: none)")
	dirEntries := fs.Int("directory-entries", directory.DefaultEntries, "directory policy: blocks the cache directory tracks (LRU recycled)")
	missThreshold := fs.Int("miss-threshold", directory.DefaultMissThreshold, "directory policy: forward misses in a row before the server pings a client")
	serverRotation := fs.Bool("server-rotation", true, "directory policy: the server takes its turn in the round robin while it holds a block in memory (the seed's rule); false serves from the server only blocks no client holds, which spares a bottleneck server link")
	forwardChoice := fs.String("forward-choice", "round-robin", "directory policy: how the server picks the holder a miss is forwarded to: round-robin (the seed's) or balanced (the holder with the fewest copies still to send plus waits ahead, waits at most three deep; the server serves only blocks no client holds)")
	pingTimeout := fs.Duration("ping-timeout", directory.DefaultPingTimeout, "directory policy: how long a pinged client has to answer before it is marked failed")
	squash := fs.String("squash", server.SquashRoot, "map client users as NFS does: root (a client's root acts as the anonymous user), all (every user does) or none (client users are trusted as they are)")
	anonUID := fs.Uint("anon-uid", server.DefaultAnonID, "uid of the anonymous user that squashed requests act as")
	anonGID := fs.Uint("anon-gid", server.DefaultAnonID, "gid of the anonymous user that squashed requests act as")
	maxHandles := fs.Int("max-handles", server.DefaultLimits.MaxHandles, "open files one client connection may hold; past it opens fail with EMFILE")
	maxInflight := block.Size(server.DefaultLimits.MaxInFlightBytes)
	fs.Var(&maxInflight, "max-inflight", "request bytes one client connection may have being served at once; past it the server stops reading from it")
	lim := addLimitFlags(fs)
	handlerTimeout := fs.Duration("handler-timeout", server.DefaultLimits.HandlerTimeout, "deadline of one request (a hung export is answered ETIMEDOUT); below the clients' request timeout")
	recallTimeout := fs.Duration("recall-timeout", server.DefaultRecallTimeout, "how long an open waits for a write-back client to write back the file it holds unflushed writes to")
	recallPolicy := fs.String("recall-timeout-policy", server.RecallEIO, "what such an open gets when the holder does not answer in time: eio, or stale (the last version written back)")
	callbackTimeout := fs.Duration("callback-timeout", server.DefaultCallbackTimeout, "how long a change waits for a client to acknowledge the break of its callback; a client silent past it is disconnected")
	metrics := fs.String("metrics", "", "serve Prometheus /metrics on HOST:PORT")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *export == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "coopfs serve: --export DIR is required and no other arguments are taken")
		fs.Usage()
		return errUsage
	}
	if *forwardChoice != "round-robin" && *forwardChoice != "balanced" {
		return fmt.Errorf("--forward-choice %q: want round-robin or balanced", *forwardChoice)
	}
	if *squash != server.SquashRoot && *squash != server.SquashAll && *squash != server.SquashNone {
		return fmt.Errorf("--squash %q: want root, all or none", *squash)
	}
	if *anonUID == 0 || *anonUID > 1<<32-2 || *anonGID == 0 || *anonGID > 1<<32-2 {
		return fmt.Errorf("--anon-uid %d / --anon-gid %d: want a non-root id below 4294967295 (to trust client root, use --squash none)", *anonUID, *anonGID)
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
	srv, err := server.New(server.Config{Export: *export, BlockSize: int(blockSize), CacheSize: int64(cacheSize),
		ReadOnly: *readOnly, Security: sec, Policy: *policy, Logger: log, Metrics: m, DiscardCacheSize: discardConfig(discardCacheSize),
		Directory:   directory.Config{Entries: *dirEntries, MissThreshold: *missThreshold, PingTimeout: *pingTimeout, ServerLast: !*serverRotation, Balanced: *forwardChoice == "balanced", Swarm: *forwardChoice == "balanced"},
		PingTimeout: *pingTimeout, CallbackTimeout: *callbackTimeout, Squash: *squash, AnonUID: uint32(*anonUID), AnonGID: uint32(*anonGID),
		Conns:         connF.limits(),
		Limits:        lim.limits(server.Limits{MaxHandles: *maxHandles, MaxInFlightBytes: int64(maxInflight), HandlerTimeout: *handlerTimeout}),
		RecallTimeout: *recallTimeout, RecallTimeoutPolicy: *recallPolicy})
	if err != nil {
		return err
	}
	defer srv.Close()
	m.Register(connectionsGauge(srv)) // statusserver.go
	if !sec.Authenticates() {
		log.Warn("NO CLUSTER SECRET: anyone on this machine can use this server; accepting loopback clients only. Give --secret-file to authenticate clients.")
	}
	ln, err := server.Listen(*listen)
	if err != nil {
		return err
	}
	if err := serveMetrics(ctx, m, *metrics, log); err != nil {
		ln.Close()
		return err
	}
	log.Info("serving", "export", *export, "listen", ln.Addr().String(), "block_size", blockSize.String(), "policy", *policy, "read_only", *readOnly, "squash", *squash, "security", sec.Mode())
	notifyReady(log)
	if err := srv.Serve(ctx, ln); err != nil {
		return err
	}
	log.Info("server stopped")
	return nil
}

// discardConfig maps --discard-cache-size to server.Config: 0 on the
// command line means no discard cache (the Config's 0 is the default).
func discardConfig(size block.Size) int64 {
	if size == 0 {
		return -1
	}
	return int64(size)
}
