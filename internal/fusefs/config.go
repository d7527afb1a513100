package fusefs

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Defaults of Config.
const (
	DefaultAttrTimeout  = time.Second
	DefaultEntryTimeout = time.Second
	DefaultMaxWrite     = 1 << 20 // largest FUSE request the kernel sends
	DefaultReadAhead    = 1 << 20 // written to the mount's read_ahead_kb
	DefaultFsName       = "coopfs"
	DefaultUnmountGrace = 2 * time.Second

	// goFuseMaxReadAhead is the most go-fuse passes to the kernel in INIT;
	// more read-ahead only comes from sysfs (see Config.ReadAhead).
	goFuseMaxReadAhead = 128 << 10
)

// Config is how a file system is mounted. The zero value means the defaults.
type Config struct {
	// AttrTimeout is how long the kernel caches attributes between
	// getattr calls. Zero means DefaultAttrTimeout (1s); negative means no
	// caching.
	AttrTimeout time.Duration
	// EntryTimeout is how long the kernel caches a name → inode lookup.
	// Zero means DefaultEntryTimeout (1s); negative means no caching.
	EntryTimeout time.Duration
	// NegativeTimeout is how long the kernel caches a failed lookup
	// (ENOENT). Zero (the default) or negative means not at all, so a file
	// created by another client appears at once.
	NegativeTimeout time.Duration
	// MaxWrite is the largest read or write request, in bytes. Zero means
	// DefaultMaxWrite (1 MiB).
	MaxWrite int
	// ReadAhead is the kernel read-ahead of the mount, in bytes. go-fuse
	// cannot ask for more than 128 KiB in INIT, so Mount writes the value to
	// /sys/class/bdi/<dev>/read_ahead_kb after mounting (best effort). Zero
	// means DefaultReadAhead (1 MiB); negative leaves the kernel default.
	ReadAhead int
	// FsName is the source shown by mount and df. Zero means "coopfs".
	FsName string
	// AllowOther lets users other than the mounting one use the mount. It is
	// always on when the mounting process runs as root (so that permission
	// checks for other users can be exercised); for other users it needs
	// user_allow_other in /etc/fuse.conf.
	AllowOther bool
	// UnmountGrace is how long Unmount of a busy mount (files still open)
	// waits, after detaching it lazily, for the last user to let go before
	// it aborts the FUSE connection (remaining users get ENOTCONN) so that
	// the process can exit. Zero means DefaultUnmountGrace.
	UnmountGrace time.Duration
	// Debug logs every FUSE request (go-fuse debug output).
	Debug bool
	// ReadOnly mounts read-only: the kernel refuses every change with
	// EROFS (the read-only write policy).
	ReadOnly bool
	// CoveredTimeout is how long the kernel caches attributes and entries
	// that a server callback covers (the backend invalidates them when
	// the callback breaks). Zero means DefaultCoveredTimeout (1h).
	CoveredTimeout time.Duration
	// NoCallbacks ignores the backend's callbacks: every answer gets the
	// attribute and entry timeouts.
	NoCallbacks bool
}

// withDefaults returns c with zero fields replaced by their defaults and
// negative timeouts by zero.
func (c Config) withDefaults() Config {
	c.AttrTimeout = durationDefault(c.AttrTimeout, DefaultAttrTimeout)
	c.EntryTimeout = durationDefault(c.EntryTimeout, DefaultEntryTimeout)
	c.NegativeTimeout = durationDefault(c.NegativeTimeout, 0)
	c.CoveredTimeout = durationDefault(c.CoveredTimeout, DefaultCoveredTimeout)
	if c.MaxWrite == 0 {
		c.MaxWrite = DefaultMaxWrite
	}
	if c.ReadAhead == 0 {
		c.ReadAhead = DefaultReadAhead
	}
	if c.UnmountGrace <= 0 {
		c.UnmountGrace = DefaultUnmountGrace
	}
	if c.FsName == "" {
		c.FsName = DefaultFsName
	}
	if os.Geteuid() == 0 {
		c.AllowOther = true
	}
	return c
}

func durationDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

func (c Config) validate() error {
	if c.MaxWrite < 4096 || c.MaxWrite > 1<<20 {
		return fmt.Errorf("fusefs: max write %d out of range [4096, 1MiB]", c.MaxWrite)
	}
	if c.ReadAhead > 0 && c.ReadAhead < 4096 {
		return fmt.Errorf("fusefs: read-ahead %d below 4 KiB", c.ReadAhead)
	}
	if c.ReadAhead > 64<<20 {
		return errors.New("fusefs: read-ahead above 64 MiB makes no sense")
	}
	return nil
}

// MountOptions builds the go-fuse options for cfg (defaults applied). The
// coopfs adapter and the do-nothing benchmark file system both mount with
// exactly these options.
func MountOptions(cfg Config) *fs.Options {
	cfg = cfg.withDefaults()
	attr, entry, neg := cfg.AttrTimeout, cfg.EntryTimeout, cfg.NegativeTimeout
	readAhead := cfg.ReadAhead
	if readAhead < 0 || readAhead > goFuseMaxReadAhead {
		readAhead = goFuseMaxReadAhead
	}
	return &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther: cfg.AllowOther,
			// The kernel checks permissions against mode, uid and gid
			// like a local file system does, so EACCES comes from it.
			Options: mountFlags(cfg),
			// POSIX ACLs: the kernel reads system.posix_acl_access and
			// _default through getxattr, caches them and enforces them
			// in its permission checks, as for a local file system.
			EnableAcl: true,
			// The kernel leaves the mode of a create unmasked and the
			// server applies the caller's umask only where the parent
			// has no default ACL, as a local file system does.
			ExtraCapabilities: extraCapabilities,
			MaxWrite:          cfg.MaxWrite,
			MaxReadAhead:      readAhead,
			// The kernel's read-ahead requests are background requests:
			// go-fuse's default of 12 in flight (congested at 9) caps
			// concurrent sequential readers at about one 1 MiB request each.
			MaxBackground: maxBackground,
			FsName:        cfg.FsName,
			Name:          "coopfs",
			// As root, mount(2) directly: no dependence on the setuid
			// fusermount3 helper (it is the fallback).
			DirectMount: os.Geteuid() == 0,
			Debug:       cfg.Debug,
		},
		AttrTimeout:     &attr,
		EntryTimeout:    &entry,
		NegativeTimeout: &neg,
		// Mode 000 is a real mode (chmod 0): do not replace it with 0644.
		NullPermissions: true,
	}
}

// maxBackground is the FUSE background requests (read-ahead, async
// reads) the kernel keeps in flight; congestion starts at 3/4 of it.
const maxBackground = 64

// extraCapabilities are the FUSE capabilities a mount asks for beyond
// go-fuse's own. CAP_DONT_MASK: see MountOptions. CAP_DIRECT_IO_ALLOW_MMAP:
// a direct-I/O handle (O_APPEND, node.go's openFlags) can be mmapped
// shared too, and its writes drop the cached pages they cover.
const extraCapabilities = fuse.CAP_DONT_MASK | fuse.CAP_DIRECT_IO_ALLOW_MMAP

// mountFlags are the -o options of a mount.
func mountFlags(cfg Config) []string {
	if cfg.ReadOnly {
		return []string{"default_permissions", "ro"}
	}
	return []string{"default_permissions"}
}
