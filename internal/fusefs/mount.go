package fusefs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/vfs"
)

// Mounted is a live mount. It is unmounted by Unmount, by cancelling the
// context given to Mount, or from outside (fusermount3 -u / umount); Wait
// returns in every case.
type Mounted struct {
	dir    string
	server *fuse.Server
	log    *slog.Logger
	done   chan struct{} // closed when the serve loop has exited

	dev   string        // major:minor of the mount, for sysfs
	grace time.Duration // see Config.UnmountGrace

	mu sync.Mutex // serializes Unmount

	a *adapter // coopfs's adapter (nil for MountNode), for tests
}

// Mount mounts b at mountpoint and serves it until ctx is cancelled, Unmount
// is called, or the file system is unmounted from outside.
func Mount(ctx context.Context, mountpoint string, b Backend, cfg Config, log *slog.Logger) (*Mounted, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rootAttr, err := b.GetAttr(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("fusefs: stat of the export root failed: %w", err)
	}
	dc := cfg.withDefaults()
	root := &node{a: &adapter{b: b, log: log, ids: newIdentities(), listingTTL: min(dc.AttrTimeout, dc.EntryTimeout)}}
	root.a.inodes = newKernelInodes()
	if lb, ok := b.(LockBackend); ok && lb.SupportsLocks() {
		root.a.locks = true
	}
	if cb, ok := b.(vfs.Callbacks); ok && !dc.NoCallbacks {
		root.a.cbs, root.a.covered, root.a.root = cb, dc.CoveredTimeout, &root.Inode
		root.a.rootIno = rootAttr.Ino
		cb.SetInvalidator(root.a)
	}
	opts := MountOptions(cfg)
	if rootAttr.Ino != 0 {
		opts.RootStableAttr = &fs.StableAttr{Ino: rootAttr.Ino}
	}
	m, err := mountRoot(ctx, mountpoint, root, cfg, opts, log)
	if m != nil {
		m.a = root.a
	}
	return m, err
}

// MountNode mounts an arbitrary go-fuse node tree with the options and
// handling of Mount (validation, read-ahead, unmount on ctx). It exists so
// that benchmark file systems (internal/bench/nullfs) mount exactly like
// coopfs does.
func MountNode(ctx context.Context, mountpoint string, root fs.InodeEmbedder, cfg Config, log *slog.Logger) (*Mounted, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return mountRoot(ctx, mountpoint, root, cfg, MountOptions(cfg), log)
}

func mountRoot(ctx context.Context, mountpoint string, root fs.InodeEmbedder, cfg Config, opts *fs.Options, log *slog.Logger) (*Mounted, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := CheckMountpoint(mountpoint)
	if err != nil {
		return nil, err
	}
	if err := checkFuse(); err != nil {
		return nil, err
	}
	opts.Logger = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	opts.MountOptions.Logger = opts.Logger
	server, err := mountFS(dir, root, opts)
	if err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", dir, err)
	}
	m := &Mounted{dir: dir, server: server, log: log, grace: cfg.UnmountGrace, done: make(chan struct{})}
	go func() {
		server.Wait()
		close(m.done)
	}()
	dev, ok, err := mountInfo(dir)
	switch {
	case err != nil || !ok:
		log.Warn("mounted, but not found in /proc/self/mountinfo", "mountpoint", dir, "err", err)
	default:
		m.dev = dev
		if cfg.ReadAhead > 0 {
			if err := setReadAhead(dev, cfg.ReadAhead); err != nil {
				log.Warn("could not raise the mount's read-ahead; sequential reads will be slower",
					"mountpoint", dir, "err", err)
			}
		}
	}
	go func() {
		select {
		case <-ctx.Done():
			if err := m.Unmount(); err != nil {
				log.Error("unmount failed", "mountpoint", dir, "err", err)
			}
		case <-m.done:
		}
	}()
	log.Info("mounted", "mountpoint", dir, "device", dev)
	return m, nil
}

// Dir is the absolute mount point.
func (m *Mounted) Dir() string { return m.dir }

// Wait blocks until the file system is unmounted and its serve loop exited.
func (m *Mounted) Wait() { <-m.done }

// Done is closed when the file system is unmounted.
func (m *Mounted) Done() <-chan struct{} { return m.done }

// Unmount unmounts the file system and waits for its serve loop to exit.
// When the mount is busy (a process has its working directory or a file
// open in it), it detaches it lazily: the mount leaves the namespace at once
// and keeps serving the open files for the grace period (Config.UnmountGrace);
// then it aborts the FUSE connection, so that the serve loop always ends.
// Calling it again, or after an unmount from outside, is harmless.
func (m *Mounted) Unmount() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.done:
		return m.removeDeadMount()
	default:
	}
	if err := m.server.Unmount(); err != nil { // retries a few times on EBUSY
		m.log.Warn("mount busy, detaching lazily", "mountpoint", m.dir, "err", err)
		if lerr := lazyUnmount(m.dir); lerr != nil && !errors.Is(lerr, syscall.EINVAL) {
			return fmt.Errorf("fusefs: unmount %s: %w (lazy unmount: %v)", m.dir, err, lerr)
		}
		select {
		case <-m.done:
		case <-time.After(m.grace):
			m.log.Warn("files still open after lazy unmount, aborting the FUSE connection", "mountpoint", m.dir)
			if err := abortConnection(m.dev); err != nil {
				return fmt.Errorf("fusefs: abort FUSE connection of %s: %w", m.dir, err)
			}
		}
	}
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("fusefs: %s unmounted but the serve loop did not exit within 10s", m.dir)
	}
	m.log.Info("unmounted", "mountpoint", m.dir)
	return nil
}

// removeDeadMount unmounts our mount if it is still there after the serve
// loop ended (the FUSE connection was aborted, or the kernel ended it): a
// dead mount would make every access to the mount point fail with ENOTCONN.
func (m *Mounted) removeDeadMount() error {
	dev, ok, err := mountInfo(m.dir)
	if err != nil || !ok || dev != m.dev || m.dev == "" {
		return nil // gone, or someone else's mount now
	}
	if err := lazyUnmount(m.dir); err != nil {
		return fmt.Errorf("fusefs: remove dead mount %s: %w", m.dir, err)
	}
	return nil
}

func lazyUnmount(dir string) error {
	err := syscall.Unmount(dir, syscall.MNT_DETACH)
	if err == nil {
		return nil
	}
	bin, lerr := exec.LookPath("fusermount3")
	if lerr != nil {
		return err
	}
	if out, err := exec.Command(bin, "-u", "-z", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("%s -u -z: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// abortConnection aborts the FUSE connection of the mount with device dev
// ("0:minor") through fusectl, mounting fusectl first if needed.
func abortConnection(dev string) error {
	_, minor, ok := strings.Cut(dev, ":")
	if !ok {
		return fmt.Errorf("no device id for the mount (%q)", dev)
	}
	const conns = "/sys/fs/fuse/connections"
	abort := filepath.Join(conns, minor, "abort")
	if _, err := os.Stat(filepath.Dir(abort)); err != nil {
		if merr := syscall.Mount("fusectl", conns, "fusectl", 0, ""); merr != nil {
			return fmt.Errorf("fusectl is not mounted on %s and mounting it failed: %w", conns, merr)
		}
	}
	return os.WriteFile(abort, []byte("1"), 0)
}

// CheckMountpoint returns the absolute, symlink-free path of mountpoint, or
// a one-line error saying why it cannot be mounted on: missing, not a
// directory, or already a mount point.
func CheckMountpoint(mountpoint string) (string, error) {
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return "", fmt.Errorf("mountpoint %q: %w", mountpoint, err)
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("mountpoint %s does not exist: create it with mkdir -p %s", abs, abs)
	case errors.Is(err, syscall.ENOTCONN):
		return "", fmt.Errorf("mountpoint %s is a dead FUSE mount: run fusermount3 -u %s", abs, abs)
	case err != nil:
		return "", fmt.Errorf("mountpoint %s: %w", abs, err)
	case !st.IsDir():
		return "", fmt.Errorf("mountpoint %s is not a directory", abs)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	mounted, err := IsMountPoint(abs)
	if err != nil {
		return "", fmt.Errorf("mountpoint %s: reading /proc/self/mountinfo: %w", abs, err)
	}
	if mounted {
		if _, err := os.ReadDir(abs); errors.Is(err, syscall.ENOTCONN) {
			return "", fmt.Errorf("mountpoint %s is a dead FUSE mount: run fusermount3 -u %s", abs, abs)
		}
		return "", fmt.Errorf("mountpoint %s is already a mount point: unmount it first (umount %s)", abs, abs)
	}
	return abs, nil
}

// checkFuse says in one line what to install when FUSE cannot work here.
func checkFuse() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("FUSE is not available: /dev/fuse is missing (%v): load the fuse module (modprobe fuse) and apt-get install fuse3", err)
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			return errors.New("FUSE mount needs fusermount3, which is not installed: apt-get install fuse3")
		}
	}
	return nil
}

// setReadAhead writes the read_ahead_kb in sysfs of the mount with device
// dev ("major:minor"): go-fuse cannot ask the kernel for more than 128 KiB.
func setReadAhead(dev string, bytes int) error {
	path := "/sys/class/bdi/" + dev + "/read_ahead_kb"
	return os.WriteFile(path, []byte(strconv.Itoa(bytes/1024)), 0)
}

// ReadAheadKB reads back the read_ahead_kb of the mount at dir.
func ReadAheadKB(dir string) (int, error) {
	dev, ok, err := mountInfo(dir)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%s is not a mount point", dir)
	}
	b, err := os.ReadFile("/sys/class/bdi/" + dev + "/read_ahead_kb")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
