package fusefs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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
	g, err := readGroups(fc.Pid)
	if err != nil {
		return c, false // the process is gone: no supplementary groups
	}
	c.Groups = g
	ids.mu.Lock()
	if len(ids.cache) >= maxGroupsCache {
		clear(ids.cache)
	}
	ids.cache[k] = groupsEntry{groups: g, at: now}
	ids.mu.Unlock()
	return c, false
}

// readGroups reads the "Groups:" line of /proc/PID/status (PID may be a
// thread id: the file exists for every thread and shows its credentials).
func readGroups(pid uint32) ([]uint32, error) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("Groups:"))
		if !ok {
			continue
		}
		var groups []uint32
		for _, f := range bytes.Fields(line) {
			g, err := strconv.ParseUint(string(f), 10, 32)
			if err != nil {
				return nil, err
			}
			groups = append(groups, uint32(g))
		}
		return groups, nil
	}
	return nil, errors.New("no Groups line in /proc status")
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

// ctxOf is ctx with the caller, for reads: they stay interruptible (no
// keep) and go through an open handle, so there is no denial to retry.
func (a *adapter) ctxOf(ctx context.Context) context.Context {
	c, _ := a.ids.caller(ctx, false)
	return vfs.WithCaller(ctx, c)
}
