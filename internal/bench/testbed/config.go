package testbed

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MaxClients bounds Config.Clients: every host needs an address in the /24
// and a few processes on a 2-CPU machine.
const MaxClients = 200

// Config describes a testbed. The zero value is a server without clients on
// unshaped links; New fills the defaults documented on each field.
type Config struct {
	// Prefix starts the name of every namespace the testbed creates and of
	// every host directory under Dir. It must be unique per run: Cleanup
	// removes everything that carries it. Default: DefaultPrefix().
	Prefix string
	// Clients is the number of client hosts, named client1..clientN.
	Clients int
	// ServerLink and ClientLink limit each host's link in both directions,
	// as a tc rate ("100mbit", "1gbit", "12.5mbps" = bytes/s). "" or "0"
	// leaves the link unshaped (a veth moves ~9 Gbit/s on this machine).
	ServerLink string
	ClientLink string
	// Subnet is the private IPv4 network of the hosts: the server gets the
	// first address after the network address, client I the (1+I)th.
	// Default 10.77.0.0/24. Only the testbed's namespaces use it.
	Subnet netip.Prefix
	// Dir holds one directory per host (logs, mountpoints). Default: a new
	// directory under os.TempDir(). The testbed never deletes it, so logs
	// survive teardown; delete it yourself when done.
	Dir string
	// StopGrace is how long a process gets between SIGTERM and SIGKILL on
	// Proc.Stop and on teardown. Default 3s.
	StopGrace time.Duration
	// HandleSignals makes New catch SIGINT and SIGTERM: the testbed is torn
	// down and the signal is then re-raised with its default action (the
	// program exits). Leave it off when the caller already cancels the
	// context given to New on those signals (signal.NotifyContext).
	HandleSignals bool
	// Logger receives one line per setup and teardown step at debug level.
	// Default: discard.
	Logger *slog.Logger
}

// DefaultPrefix returns a namespace prefix unique to this process and call:
// "cfs<pid>-<4 hex digits>-". CleanupStale recognises prefixes of this form
// whose process is gone.
func DefaultPrefix() string {
	var b [2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return fmt.Sprintf("cfs%d-%s-", os.Getpid(), hex.EncodeToString(b[:]))
}

var (
	prefixRE        = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{2,30}$`)
	defaultPrefixRE = regexp.MustCompile(`^cfs([0-9]+)-[0-9a-f]{4}-`)
)

func (c *Config) setDefaults() {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix()
	}
	if !c.Subnet.IsValid() {
		c.Subnet = netip.MustParsePrefix("10.77.0.0/24")
	}
	c.Subnet = c.Subnet.Masked()
	if c.StopGrace == 0 {
		c.StopGrace = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	if err := checkPrefix(c.Prefix); err != nil {
		return err
	}
	if c.Clients < 0 || c.Clients > MaxClients {
		return fmt.Errorf("testbed: Clients = %d, want 0..%d", c.Clients, MaxClients)
	}
	if _, err := ParseRate(c.ServerLink); err != nil {
		return fmt.Errorf("testbed: ServerLink: %w", err)
	}
	if _, err := ParseRate(c.ClientLink); err != nil {
		return fmt.Errorf("testbed: ClientLink: %w", err)
	}
	s := c.Subnet
	if !s.Addr().Is4() || !s.Addr().IsPrivate() || s.Bits() < 8 || s.Bits() > 30 {
		return fmt.Errorf("testbed: Subnet %v must be a private IPv4 network (10/8, 172.16/12, 192.168/16) of /8 to /30", s)
	}
	if hosts := 1 << (32 - s.Bits()); c.Clients+3 > hosts {
		return fmt.Errorf("testbed: Subnet %v has too few addresses for 1 server and %d clients", s, c.Clients)
	}
	if c.StopGrace < 0 {
		return fmt.Errorf("testbed: StopGrace = %v, want >= 0", c.StopGrace)
	}
	return nil
}

func checkPrefix(prefix string) error {
	if !prefixRE.MatchString(prefix) {
		return fmt.Errorf("testbed: prefix %q: want 3-31 characters of [A-Za-z0-9_.-], starting with a letter or digit", prefix)
	}
	return nil
}

// hostAddr returns the address of host i (0 = server, I = clientI).
func hostAddr(subnet netip.Prefix, i int) netip.Addr {
	a := subnet.Addr()
	for range i + 1 {
		a = a.Next()
	}
	return a
}

// ParseRate parses a tc rate and returns it in bits per second. Units follow
// tc: bit, kbit, mbit, gbit, tbit (powers of 1000), kibit, mibit, gibit
// (powers of 1024), bps, kbps, mbps, gbps (bytes per second). A bare number
// is bits per second. "", "0", "none" and "unlimited" mean unshaped (0).
func ParseRate(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "", "0", "none", "unlimited":
		return 0, nil
	}
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], t[i:]
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("rate %q: want a positive number and a tc unit such as 100mbit or 1gbit", s)
	}
	mult, ok := rateUnits[unit]
	if !ok {
		return 0, fmt.Errorf("rate %q: unknown unit %q (want bit, kbit, mbit, gbit, kibit, mibit, gibit, bps, kbps, mbps, gbps)", s, unit)
	}
	bits := v * mult
	if bits < 8000 || bits > 1e12 {
		return 0, fmt.Errorf("rate %q: want 8kbit..1tbit", s)
	}
	return uint64(bits), nil
}

var rateUnits = map[string]float64{
	"": 1, "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
	"kibit": 1 << 10, "mibit": 1 << 20, "gibit": 1 << 30,
	"bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9,
}

// tbf holds the tc tbf parameters for one link direction.
type tbf struct {
	rate  uint64 // bits/s
	burst uint64 // bytes
	limit uint64 // bytes queued before drops
}

// Shaping rules, measured on this machine (docs/testbed.md): the bucket must
// hold at least one kernel tick of data (CONFIG_HZ=250: 4 ms) or goodput at
// 1 Gbit drops to ~865 Mbit/s; the queue holds 20 ms of data past the bucket.
const (
	burstTime = 4 * time.Millisecond
	minBurst  = 32 << 10
	queueTime = 20 * time.Millisecond
	minLimit  = 64 << 10
)

func tbfFor(rateBits uint64) tbf {
	bytesPerSec := float64(rateBits) / 8
	burst := max(uint64(bytesPerSec*burstTime.Seconds()), minBurst)
	limit := max(burst+uint64(bytesPerSec*queueTime.Seconds()), minLimit)
	return tbf{rate: rateBits, burst: burst, limit: limit}
}

// args returns the tc arguments after "qdisc replace dev X".
func (t tbf) args() []string {
	return []string{"root", "tbf",
		"rate", strconv.FormatUint(t.rate, 10) + "bit",
		"burst", strconv.FormatUint(t.burst, 10),
		"limit", strconv.FormatUint(t.limit, 10)}
}

// ErrPrereq is wrapped by every error about a missing prerequisite (root,
// iproute2, util-linux).
var ErrPrereq = errors.New("testbed needs root and iproute2: run as root / apt-get install iproute2")
