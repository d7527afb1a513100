package fusefs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/vfs"
)

// groupsTTL is how long the supplementary groups read for one (thread, uid,
// gid) are reused. A process may change its groups without changing uid or
// gid (setgroups); a request the server then denies is retried once with
// freshly read groups (see adapter.run), so a stale entry never makes an
// operation fail that a local file system would allow.
const groupsTTL = 2 * time.Second

// maxGroupsCache bounds the cache; it is emptied when full.
const maxGroupsCache = 4096

type groupsKey struct{ pid, uid, gid uint32 }

type groupsEntry struct {
	groups []uint32
	at     time.Time
}

// identities reads the callers' supplementary groups from /proc and caches
// them briefly.
type identities struct {
	mu    sync.Mutex
	cache map[groupsKey]groupsEntry
}

func newIdentities() *identities {
	return &identities{cache: make(map[groupsKey]groupsEntry)}
}

// caller is the identity of the FUSE request behind ctx; cached reports
// whether its groups came from the cache. fresh forces a new read.
func (ids *identities) caller(ctx context.Context, fresh bool) (c vfs.Caller, cached bool) {
	fc, ok := fuse.FromContext(ctx)
	if !ok {
		return vfs.Caller{}, false
	}
	c = vfs.Caller{UID: fc.Uid, GID: fc.Gid, PID: fc.Pid}
	if fc.Pid == 0 {
		return c, false // a request the kernel makes on its own (no process)
	}
	k := groupsKey{fc.Pid, fc.Uid, fc.Gid}
	now := time.Now()
	ids.mu.Lock()
	e, hit := ids.cache[k]
	ids.mu.Unlock()
	if hit && !fresh && now.Sub(e.at) < groupsTTL {
		c.Groups = e.groups
		return c, true
	}
	g, umask, err := readStatus(fc.Pid)
	if err != nil {
		return c, false // the process is gone: no supplementary groups
	}
	c.Groups, c.Umask, c.HasUmask = g, umask, true
	ids.mu.Lock()
	if len(ids.cache) >= maxGroupsCache {
		clear(ids.cache)
	}
	ids.cache[k] = groupsEntry{groups: g, at: now}
	ids.mu.Unlock()
	return c, false
}

// readStatus reads the "Groups:" and "Umask:" lines of /proc/PID/status
// (PID may be a thread id: the file exists for every thread and shows its
// credentials and umask).
func readStatus(pid uint32) (groups []uint32, umask uint32, err error) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil, 0, err
	}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() && found < 2 {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Umask:")); ok {
			u, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32)
			if err != nil {
				return nil, 0, fmt.Errorf("umask in /proc status: %w", err)
			}
			umask, found = uint32(u), found+1
			continue
		}
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("Groups:"))
		if !ok {
			continue
		}
		for _, f := range bytes.Fields(line) {
			g, err := strconv.ParseUint(string(f), 10, 32)
			if err != nil {
				return nil, 0, fmt.Errorf("groups in /proc status: %w", err)
			}
			groups = append(groups, uint32(g))
		}
		found++
	}
	if found < 2 {
		return nil, 0, errors.New("no Groups or Umask line in /proc status")
	}
	return groups, umask, nil
}

// run calls op with a context carrying the caller's identity. When the
// backend denies the operation (EACCES, EPERM) and the groups came from the
// cache, it reads them again and, if they changed since, retries once.
func (a *adapter) run(ctx context.Context, op func(ctx context.Context) error) error {
	ctx = keep(ctx)
	c, cached := a.ids.caller(ctx, false)
	err := op(vfs.WithCaller(ctx, c))
	if cached && (errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)) {
		if fresh, _ := a.ids.caller(ctx, true); !slices.Equal(fresh.Groups, c.Groups) {
			err = op(vfs.WithCaller(ctx, fresh))
		}
	}
	return err
}

// defaultUmask is applied to a create whose caller's umask could not be
// read (the mount asks the kernel not to apply it: see Config's DONT_MASK).
const defaultUmask = 0o022

// runCreate is run for the calls that create a file. The umask is the
// request's (umask.go), or else read afresh with the groups (a process may
// change its umask at any time); the groups come from the cache, read
// again when the backend denies the create, as in run.
func (a *adapter) runCreate(ctx context.Context, op func(ctx context.Context) error) error {
	ctx = keep(ctx)
	var um uint32
	var known bool
	if fc, ok := fuse.FromContext(ctx); ok {
		um, known = a.umasks.get(fc.Pid)
	}
	if !known {
		c, _ := a.ids.caller(ctx, true)
		if !c.HasUmask {
			c.Umask, c.HasUmask = defaultUmask, true
		}
		return op(vfs.WithCaller(ctx, c))
	}
	c, cached := a.ids.caller(ctx, false)
	c.Umask, c.HasUmask = um, true
	err := op(vfs.WithCaller(ctx, c))
	if cached && (errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)) {
		if fresh, _ := a.ids.caller(ctx, true); !slices.Equal(fresh.Groups, c.Groups) {
			fresh.Umask, fresh.HasUmask = um, true
			err = op(vfs.WithCaller(ctx, fresh))
		}
	}
	return err
}

// ctxOf is ctx with the caller, for reads: they stay interruptible (no
// keep) and go through an open handle, so there is no denial to retry.
func (a *adapter) ctxOf(ctx context.Context) context.Context {
	c, _ := a.ids.caller(ctx, false)
	return vfs.WithCaller(ctx, c)
}
