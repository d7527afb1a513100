package replay

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/coopfs/coopfs/internal/sim"
	"github.com/coopfs/coopfs/internal/sim/dirsim"
)

// Policies a replay can run, in report order.
var knownPolicies = []string{"none", "directory", "hints"}

// Defaults of Config.
const (
	DefaultBlockSize   = 8 << 10
	DefaultClientCache = 1 << 20
	DefaultServerCache = 4 << 20
	DefaultLink        = "100mbit"
	DefaultMaxAccesses = 20000
	MaxClients         = 32
)

// Config is one replay.
type Config struct {
	// Workload is the trace (a sim.File, a generated workload, a Slice).
	Workload sim.Workload
	// MaxAccesses keeps the first accesses of the workload (0: default;
	// negative: all).
	MaxAccesses int
	// Policies to run live and simulated (default none, directory, hints).
	Policies []string
	// BlockSize is the server's block size and the simulator's (a power
	// of two from 4 KiB); ClientCache and ServerCache are bytes per client
	// and of the server's memory.
	BlockSize, ClientCache, ServerCache int64
	// WarmUp accesses are played but not counted (as sim.Params.WarmUp;
	// ignored when the trace is no longer).
	WarmUp int
	// Parallel plays the counted accesses with one goroutine per client
	// (each in its trace order, as fast as the cluster answers) instead of
	// one access at a time in trace order: the server link then carries
	// every client's misses at once, as in an office at its busiest. Hit
	// ratios may drift from the simulator's (the interleaving differs).
	Parallel bool
	// Seed seeds the simulated algorithms.
	Seed int64
	// ServerLink and ClientLink are the testbed's tc rates.
	ServerLink, ClientLink string
	// DiskLatency, when positive, puts the live server's export on a
	// slow disk: a slowfs mount (internal/bench/slowfs) whose every read
	// costs DiskLatency and bypasses the page cache. 0: the export is a
	// plain directory (its "disk" is the page cache).
	DiskLatency time.Duration
	// Binary is the coopfs executable ("" = this program).
	Binary string
	// Keep leaves the run directory (export, logs).
	Keep     bool
	Progress io.Writer
	Logger   *slog.Logger
}

func (c *Config) setDefaults() {
	if c.MaxAccesses == 0 {
		c.MaxAccesses = DefaultMaxAccesses
	}
	if len(c.Policies) == 0 {
		c.Policies = append([]string(nil), knownPolicies...)
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.ClientCache == 0 {
		c.ClientCache = DefaultClientCache
	}
	if c.ServerCache == 0 {
		c.ServerCache = DefaultServerCache
	}
	if c.ServerLink == "" {
		c.ServerLink = DefaultLink
	}
	if c.ClientLink == "" {
		c.ClientLink = DefaultLink
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	if c.Workload == nil {
		return fmt.Errorf("replay: no workload: give --trace FILE or --gen PATTERN")
	}
	for _, p := range c.Policies {
		if !isKnown(p) {
			return fmt.Errorf("replay: policy %q: want %s", p, strings.Join(knownPolicies, ", "))
		}
	}
	switch {
	case c.BlockSize < 4096 || c.BlockSize&(c.BlockSize-1) != 0:
		return fmt.Errorf("replay: --block-size %d: want a power of two of at least 4 KiB", c.BlockSize)
	case c.ClientCache < c.BlockSize || c.ServerCache < c.BlockSize:
		return fmt.Errorf("replay: cache sizes must hold at least one block (%d bytes)", c.BlockSize)
	case c.WarmUp < 0:
		return fmt.Errorf("replay: --warmup %d: want >= 0", c.WarmUp)
	case c.DiskLatency < 0:
		return fmt.Errorf("replay: --disk-latency %v: want >= 0", c.DiskLatency)
	}
	return nil
}

func isKnown(p string) bool {
	for _, k := range knownPolicies {
		if k == p {
			return true
		}
	}
	return false
}

// simAlgorithm is the simulator's algorithm for a live policy.
func simAlgorithm(policy string) string {
	switch policy {
	case "none":
		return "nfs"
	case "directory":
		return "directory"
	}
	return "hints"
}

// params are the simulator's parameters for this replay.
func (c *Config) params(clients int) sim.Params {
	p := sim.DefaultParams()
	p.Clients = clients
	p.BlockSize = c.BlockSize
	p.ClientCacheBlocks = int(c.ClientCache / c.BlockSize)
	p.ServerCacheBlocks = int(c.ServerCache / c.BlockSize)
	p.WarmUp = c.WarmUp
	p.Seed = c.Seed
	// The live agent keeps a writer's copies across its own writes
	// (WriteBase): so do nfs and directory here (hints always does).
	return p.WithOption(dirsim.OptKeepOwn, "on")
}
