package proxy

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// CheckWritePolicy refuses the write policies the proxy does not offer.
func CheckWritePolicy(p cache.WritePolicy) error {
	switch p {
	case cache.ReadOnly, cache.WriteThrough, cache.WriteBack:
		return nil
	}
	return fmt.Errorf("unknown write policy %v: use read-only, write-through or write-back", p)
}

// DiskConfig configures the proxy's persistent disk tier (cache/disk).
type DiskConfig struct {
	Dir   string // cache directory; "" means memory only
	Size  int64  // bytes of block data; 0 means disk.DefaultSize
	Banks int    // bank files; 0 means disk.DefaultBanks
	Assoc int    // ways per set; 0 means disk.DefaultAssoc
}

// Config configures a proxy.
type Config struct {
	Upstream      string         // the server or proxy above this one (HOST:PORT)
	Security      *wire.Security // both sides: the listener's and the upstream dialer's
	TLSServerName string         // the name the upstream's certificate must carry; "": its host
	Name          string         // this proxy's name in the upstream's logs; default "proxy"
	CacheSize     int64          // memory block cache; default mem.DefaultCapacity
	Disk          DiskConfig
	// WritePolicy: cache.ReadOnly refuses every change with EROFS;
	// cache.WriteThrough (the zero value) relays writes and keeps the whole
	// blocks written; cache.WriteBack completes writes in the disk tier and
	// writes them back later (writeback.go; needs Disk.Dir).
	WritePolicy cache.WritePolicy
	WriteBack   WriteBackConfig
	// ConnectTimeout bounds how long New retries an unreachable upstream.
	// Default 10s.
	ConnectTimeout time.Duration
	// RequestTimeout bounds one relayed request's wait for the upstream's
	// reply (a blocking lock waits as long as the upstream lets it). The
	// client then gets ETIMEDOUT. Default 2m.
	RequestTimeout time.Duration
	Conns          wire.ConnLimits // caps on client connections and handshakes
	Logger         *slog.Logger
	Metrics        *obs.Metrics
}

func (c *Config) setDefaults() {
	if c.Name == "" {
		c.Name = "proxy"
	}
	if c.CacheSize == 0 {
		c.CacheSize = mem.DefaultCapacity
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = obs.NewMetrics()
	}
	if c.Security == nil {
		c.Security = wire.MustSecurity(wire.SecurityConfig{Insecure: true})
	}
	c.Conns.SetDefaults()
	c.WriteBack.SetDefaults()
}

func (c *Config) validate() error {
	if c.Upstream == "" {
		return fmt.Errorf("no upstream: give --upstream HOST:PORT (a coopfs server or another proxy)")
	}
	if err := CheckWritePolicy(c.WritePolicy); err != nil {
		return err
	}
	if c.WritePolicy == cache.WriteBack {
		if c.Disk.Dir == "" {
			return fmt.Errorf("--write-policy write-back needs a disk cache: add --disk-cache DIR")
		}
		if err := c.WriteBack.Validate(); err != nil {
			return err
		}
	}
	if c.CacheSize < 0 || c.Disk.Size < 0 {
		return fmt.Errorf("cache sizes must not be negative")
	}
	return nil
}
