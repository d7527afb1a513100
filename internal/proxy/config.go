package proxy

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// WritePolicy says what the proxy does with its clients' writes (seed 003).
type WritePolicy string

// The write policies the proxy offers.
const (
	ReadOnly     WritePolicy = "read-only"     // every change fails with EROFS
	WriteThrough WritePolicy = "write-through" // relayed; whole written blocks are kept
	WriteBack    WritePolicy = "write-back"    // not offered by the proxy yet
)

// ParseWritePolicy checks a --write-policy value: read-only or
// write-through.
func ParseWritePolicy(s string) (WritePolicy, error) {
	switch p := WritePolicy(s); p {
	case ReadOnly, WriteThrough:
		return p, nil
	case WriteBack:
		return "", fmt.Errorf("--write-policy write-back is not available on the proxy yet: use write-through (or write-back on the mounts)")
	}
	return "", fmt.Errorf("unknown --write-policy %q: use read-only or write-through", s)
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
	WritePolicy   WritePolicy // default write-through
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
	if c.WritePolicy == "" {
		c.WritePolicy = WriteThrough
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
}

func (c *Config) validate() error {
	if c.Upstream == "" {
		return fmt.Errorf("no upstream: give --upstream HOST:PORT (a coopfs server or another proxy)")
	}
	if _, err := ParseWritePolicy(string(c.WritePolicy)); err != nil {
		return err
	}
	if c.CacheSize < 0 || c.Disk.Size < 0 {
		return fmt.Errorf("cache sizes must not be negative")
	}
	return nil
}
