package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/fusefs"
)

// netnsDir is where `ip netns` keeps the bind mounts that name namespaces.
const netnsDir = "/run/netns"

// Cleanup removes everything a testbed with this prefix made, whether or not
// the run that made it is still alive: it SIGKILLs every process inside the
// prefix's namespaces or whose environment carries the prefix's marker, waits
// for them to go, detaches every mount whose path has a component starting
// with the prefix (FUSE mounts under Host.Dir), and deletes the namespaces
// (which removes the bridge and veths in them). Use it for the leftovers of a
// crashed run; a live testbed's Close does the same after stopping its
// processes gently.
func Cleanup(prefix string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	names, err := listNamespaces(prefix)
	if err != nil {
		return err
	}
	var errs []error
	// A process in the middle of an exec shows neither its namespace nor
	// its environment for a moment: between the kernel's switch to the new
	// program's memory and the setting up of its environment there, when
	// the caller's Start has already returned (nsenter's own exec), and
	// before nsenter enters the namespace. One scan that finds nothing is
	// not enough: scan until cleanupQuietScans in a row, cleanupScanGap
	// apart, find nothing.
	for pass, quiet := 0, 0; pass < cleanupPasses && quiet < cleanupQuietScans; pass++ {
		pids, err := testbedPids(prefix, names)
		if err != nil {
			errs = append(errs, err)
		}
		if len(pids) == 0 {
			quiet++
			time.Sleep(cleanupScanGap)
			continue
		}
		quiet = 0
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("testbed: kill %d: %w", pid, err))
			}
		}
		if left := waitGone(pids, 5*time.Second); len(left) > 0 {
			errs = append(errs, fmt.Errorf("testbed: processes %v still alive 5s after SIGKILL", left))
			break
		}
	}
	if err := unmountPrefix(prefix); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range names {
		if err := run([]string{"ip", "netns", "delete", ns}); err != nil {
			errs = append(errs, fmt.Errorf("testbed: cleanup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Cleanup's scans for processes: it stops after cleanupQuietScans scans in
// a row, cleanupScanGap apart, found none, or after cleanupPasses scans.
const (
	cleanupQuietScans = 3
	cleanupScanGap    = 20 * time.Millisecond
	cleanupPasses     = 20
)

// CleanupStale runs Cleanup for every default-form prefix (see DefaultPrefix)
// found in `ip netns list` whose process no longer exists. It never touches a
// live run's namespaces nor namespaces with custom prefixes.
func CleanupStale() error {
	names, err := listNamespaces("cfs")
	if err != nil {
		return err
	}
	stale := map[string]bool{}
	for _, n := range names {
		m := defaultPrefixRE.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			stale[m[0]] = true
		}
	}
	var errs []error
	for p := range stale {
		errs = append(errs, Cleanup(p))
	}
	return errors.Join(errs...)
}

// listNamespaces returns the named network namespaces starting with prefix.
func listNamespaces(prefix string) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("testbed: list namespaces: %w", err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// testbedPids returns the processes in the given namespaces or with the
// prefix's marker in their environment (never this process).
func testbedPids(prefix string, names []string) ([]int, error) {
	inodes := map[string]bool{}
	for _, n := range names {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(netnsDir, n), &st); err == nil {
			inodes["net:["+strconv.FormatUint(st.Ino, 10)+"]"] = true
		}
	}
	marker := []byte("\x00" + envMarker + "=" + prefix + "\x00")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("testbed: list processes: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		if l, err := os.Readlink(dir + "/ns/net"); err == nil && inodes[l] {
			pids = append(pids, pid)
			continue
		}
		if env, err := os.ReadFile(dir + "/environ"); err == nil && bytes.Contains(append(append([]byte{0}, env...), 0), marker) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// waitGone waits until every pid has exited (zombies count as gone) and
// returns those still alive at the deadline.
func waitGone(pids []int, timeout time.Duration) []int {
	deadline := time.Now().Add(timeout)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		pids = left
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')') // the command name may contain spaces
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// unmountPrefix lazily detaches every mount with a path component starting
// with prefix, deepest first, except the namespace bind mounts themselves.
func unmountPrefix(prefix string) error {
	mounts, err := fusefs.Mounts()
	if err != nil {
		return fmt.Errorf("testbed: read mounts: %w", err)
	}
	var mps []string
	for _, m := range mounts {
		mp := m.Dir
		if strings.HasPrefix(mp, netnsDir+"/") || !strings.Contains(mp, "/"+prefix) {
			continue
		}
		mps = append(mps, mp)
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	var errs []error
	for _, mp := range mps {
		err := syscall.Unmount(mp, syscall.MNT_DETACH)
		if err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			// EINVAL: already gone (a parent's detach took it along).
			if out, ferr := exec.Command("fusermount", "-uz", mp).CombinedOutput(); ferr != nil {
				errs = append(errs, fmt.Errorf("testbed: unmount %s: %w (fusermount: %s)", mp, err, bytes.TrimSpace(out)))
			}
		}
	}
	return errors.Join(errs...)
}
