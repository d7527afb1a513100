package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/coopfs/coopfs/internal/fusefs"
	"github.com/coopfs/coopfs/internal/obs"
)

// IsMounted reports whether a file system is mounted at dir (an absolute,
// symlink-free path).
func IsMounted(dir string) (bool, error) { return fusefs.IsMountPoint(dir) }

// MountsUnder lists the mount points at or below dir.
func MountsUnder(dir string) ([]string, error) { return fusefs.MountsUnder(dir) }

// LazyUnmount detaches the mount at dir: fusermount3 -u -z, or umount2
// with MNT_DETACH when that is missing or fails (as root).
func LazyUnmount(dir string) error {
	var ferr error
	if bin, err := exec.LookPath("fusermount3"); err == nil {
		out, err := exec.Command(bin, "-u", "-z", dir).CombinedOutput()
		if err == nil {
			return nil
		}
		ferr = fmt.Errorf("fusermount3 -u -z: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
		return errors.Join(ferr, fmt.Errorf("umount -l: %w", err))
	}
	return nil
}

// FUSEUnavailable returns why FUSE mounts cannot be made here, or nil.
func FUSEUnavailable() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no /dev/fuse (%v)", err)
	}
	if os.Geteuid() == 0 {
		return nil // mounts with mount(2) directly
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		return errors.New("no fusermount3 and not root (apt-get install -y fuse3 needs root)")
	}
	return nil
}

// Counters is one process's metrics.
type Counters struct {
	Name    string
	Role    string
	Samples obs.Samples
}

// Counters scrapes every process with a metrics address, server first, then
// the clients in order. A process that cannot be scraped is an error.
func (c *Cluster) Counters(ctx context.Context) ([]Counters, error) {
	procs := []*Proc{}
	if c.Server != nil {
		procs = append(procs, c.Server)
	}
	procs = append(procs, c.Clients...)
	out := make([]Counters, len(procs))
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		out[i] = Counters{Name: p.Name, Role: p.Role}
		if p.MetricsAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss, err := obs.Fetch(ctx, p.MetricsAddr)
			if err != nil {
				errs[i] = fmt.Errorf("cluster: counters of %s: %w", p.Name, err)
			}
			out[i].Samples = ss
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) []string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return []string{fmt.Sprintf("(cannot read %s: %v)", p.Log, err)}
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// TailText is Tail formatted for an error message.
func (p *Proc) TailText(n int) string {
	return fmt.Sprintf("last lines of %s (pid %s):\n    %s", filepath.Base(p.Log), p.pidString(),
		strings.Join(p.Tail(n), "\n    "))
}
