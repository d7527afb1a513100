package main

import (
	"flag"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/server"
)

// limitFlags are serve's caps across connections (per client address and
// in total) and its idle timeout.
type limitFlags struct {
	handlesPerAddr, handlesTotal, locks, locksTotal *int
	inflightPerAddr, inflightTotal                  *block.Size
	idle                                            *time.Duration
}

func addLimitFlags(fs *flag.FlagSet) limitFlags {
	d := server.DefaultLimits
	l := limitFlags{
		handlesPerAddr:  fs.Int("max-handles-per-addr", d.MaxHandlesPerAddr, "open files the connections from one client address may hold together; past it opens fail with EMFILE"),
		handlesTotal:    fs.Int("max-handles-total", d.MaxHandlesTotal, "open files all clients may hold together"),
		locks:           fs.Int("max-locks", d.MaxLocks, "byte-range and flock locks one client connection may hold; past it locking fails with ENOLCK"),
		locksTotal:      fs.Int("max-locks-total", d.MaxLocksTotal, "locks all clients may hold together"),
		inflightPerAddr: new(block.Size),
		inflightTotal:   new(block.Size),
		idle:            fs.Duration("idle-timeout", d.IdleTimeout, "a client connection silent this long is pinged, and closed when it stays silent as long again (idle mounts answer)"),
	}
	*l.inflightPerAddr, *l.inflightTotal = block.Size(d.MaxInFlightPerAddr), block.Size(d.MaxInFlightTotal)
	fs.Var(l.inflightPerAddr, "max-inflight-per-addr", "request bytes the connections from one client address may have being served at once")
	fs.Var(l.inflightTotal, "max-inflight-total", "request bytes all clients may have being served at once")
	return l
}

func (l limitFlags) limits(base server.Limits) server.Limits {
	base.MaxHandlesPerAddr, base.MaxHandlesTotal = *l.handlesPerAddr, *l.handlesTotal
	base.MaxLocks, base.MaxLocksTotal = *l.locks, *l.locksTotal
	base.MaxInFlightPerAddr, base.MaxInFlightTotal = int64(*l.inflightPerAddr), int64(*l.inflightTotal)
	base.IdleTimeout = *l.idle
	return base
}
