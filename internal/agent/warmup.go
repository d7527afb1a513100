package agent

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/wire"
)

// Warm-up (`coopfs warmup`): the agent walks files or trees of the export
// and fetches their blocks into its tiers (memory and disk) the way a read
// would, through the running policy, so that under directory and hints the
// blocks then serve peers. The cluster warm-up (warmup_cluster.go) drives
// the same fetcher with the shares the server hands out.

// WarmItem is a byte range of one file to warm. Len 0 means to the end of
// the file; Path is relative to the export root.
type WarmItem struct {
	Path     string
	Off, Len uint64
	Size     uint64 // the file's size when it was listed
	From     string // a cluster warm-up's phase 2: the peer listener of the member holding it ("" none)
}

// WarmProgress counts a warm-up: files and bytes done and in all.
type WarmProgress struct {
	Files, TotalFiles int
	Bytes, TotalBytes int64
	Failed            int // files that could not be warmed (their errors are returned)
}

// Warm-up tuning: how many chunks are fetched at once and how many blocks
// one chunk holds (a chunk is one open of the file and its blocks in turn).
const (
	warmWorkers     = 8
	warmChunkBlocks = 8
)

// WarmList walks paths (files or directories, relative to the export root)
// as the caller in ctx and returns one item per regular file, whole.
// Symbolic links are not followed.
func (a *Agent) WarmList(ctx context.Context, paths []string) ([]WarmItem, error) {
	var items []WarmItem
	for _, p := range paths {
		p = cleanRel(p)
		at, err := a.Lookup(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", orRoot(p), err)
		}
		switch at.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			items = append(items, WarmItem{Path: p, Size: at.Size})
		case syscall.S_IFDIR:
			if items, err = a.warmWalk(ctx, p, items); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s is neither a regular file nor a directory: nothing to warm up", orRoot(p))
		}
	}
	return items, nil
}

func (a *Agent) warmWalk(ctx context.Context, dir string, items []WarmItem) ([]WarmItem, error) {
	ents, err := a.ReadDirPlus(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", orRoot(dir), err)
	}
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue
		}
		p := join(dir, e.Name)
		switch e.Attr.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			items = append(items, WarmItem{Path: p, Size: e.Attr.Size})
		case syscall.S_IFDIR:
			if items, err = a.warmWalk(ctx, p, items); err != nil {
				return nil, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// cleanRel turns a path relative to the export root into the form the
// server takes ("" for the root).
func cleanRel(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return ""
	}
	return p[1:]
}

func orRoot(p string) string {
	if p == "" {
		return "the export's root"
	}
	return p
}

// warmChunk is a run of blocks of one item, fetched through one open.
type warmChunk struct {
	item       int
	first, end uint64 // block range [first, end); end 0: to the end of the file
	last       bool   // the item's last chunk
}

// chunks splits items into runs of at most warmChunkBlocks blocks (by the
// sizes the items were listed with; the file's size at open decides).
func chunks(items []WarmItem, bs uint64) []warmChunk {
	var out []warmChunk
	for i, it := range items {
		size := it.Size
		if it.Len != 0 {
			size = it.Off + it.Len
		}
		first := it.Off / bs
		end := (size + bs - 1) / bs
		if end <= first {
			out = append(out, warmChunk{item: i, first: first, end: first + 1, last: true})
			continue
		}
		for b := first; b < end; b += warmChunkBlocks {
			c := warmChunk{item: i, first: b, end: min(b+warmChunkBlocks, end)}
			c.last = c.end == end
			if c.last && it.Len == 0 {
				c.end = 0 // up to the size seen at open: the file may have grown
			}
			out = append(out, c)
		}
	}
	return out
}

// Warm fetches the items' blocks into the caches, warmWorkers chunks at a
// time, calling progress after each chunk (from several goroutines, never
// at once). A file that fails is counted and the warm-up goes on; the
// errors of the failed files come back joined (the first few).
func (a *Agent) Warm(ctx context.Context, items []WarmItem, progress func(WarmProgress)) (WarmProgress, error) {
	bs := uint64(a.BlockSize())
	var p WarmProgress
	p.TotalFiles = len(items)
	for _, it := range items {
		if it.Len != 0 {
			p.TotalBytes += int64(it.Len)
		} else {
			p.TotalBytes += int64(it.Size - min(it.Off, it.Size))
		}
	}
	q := newWarmQueue(ctx, chunks(items, bs), func(c warmChunk) string { return items[c.item].From })
	var (
		mu     sync.Mutex
		errs   []error
		failed = make(map[int]bool)
		wg     sync.WaitGroup
	)
	for range warmWorkers {
		wg.Go(func() {
			for {
				c, ok := q.take(ctx)
				if !ok {
					return
				}
				n, err := a.warmChunk(patient(ctx), items[c.item], c, bs)
				q.done(c)
				mu.Lock()
				p.Bytes += n
				if err != nil && !failed[c.item] {
					failed[c.item] = true
					p.Failed++
					if len(errs) < 5 {
						errs = append(errs, fmt.Errorf("%s: %w", items[c.item].Path, err))
					}
				}
				if c.last {
					p.Files++
				}
				if progress != nil {
					progress(p)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return p, err
	}
	if p.Failed > 0 {
		return p, fmt.Errorf("%d of %d files could not be warmed up: %w", p.Failed, p.TotalFiles, errors.Join(errs...))
	}
	return p, nil
}

// warmPerSource bounds the chunks read at once from one peer (a cluster
// warm-up's phase 2 names each item's peer, WarmItem.From): at the end of
// a job every member may read from the same few peers, and requests queued
// on a peer's link behind so many others that their timeouts run out go
// to the server instead.
const warmPerSource = 3

// warmPatience multiplies the time a peer has to answer a warm-up's read
// (patient, peerTimeout): nobody waits for the block, and a block a busy
// peer sends late spares the server's link, which a cluster warm-up is
// there to spare. At the end of a 1 GiB warm-up to 8 clients under hints,
// on a loaded machine, ~100 reads from peers ran out of the 5-s forward
// timeout and went to the server (1.12x the tree through its link).
const warmPatience = 6

type patientKey struct{}

// patient marks ctx as a warm-up's (peerTimeout).
func patient(ctx context.Context) context.Context { return context.WithValue(ctx, patientKey{}, true) }

// peerTimeout is how long a peer has to answer a read made in ctx: d, or
// warmPatience times d for a warm-up's.
func peerTimeout(ctx context.Context, d time.Duration) time.Duration {
	if ctx.Value(patientKey{}) != nil {
		return warmPatience * d
	}
	return d
}

// warmQueue hands the chunks out to the workers: in order for each peer
// they are read from, the peers in the order they first appear, a peer
// with warmPerSource chunks being read skipped (chunks with no peer named
// are never held back).
type warmQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	sources []string               // in first-appearance order
	queues  map[string][]warmChunk // by source
	busy    map[string]int         // chunks being read, by source
	from    func(warmChunk) string
}

func newWarmQueue(ctx context.Context, todo []warmChunk, from func(warmChunk) string) *warmQueue {
	q := &warmQueue{queues: make(map[string][]warmChunk), busy: make(map[string]int), from: from}
	q.cond = sync.NewCond(&q.mu)
	for _, c := range todo {
		src := from(c)
		if _, ok := q.queues[src]; !ok {
			q.sources = append(q.sources, src)
		}
		q.queues[src] = append(q.queues[src], c)
	}
	context.AfterFunc(ctx, func() { // wake the waiting workers: they return
		q.mu.Lock()
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	return q
}

// take returns the next chunk to read, waiting while every peer with
// chunks left is busy; false when none is left or ctx ended.
func (q *warmQueue) take(ctx context.Context) (warmChunk, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ctx.Err() == nil {
		left := false
		for _, src := range q.sources {
			cs := q.queues[src]
			if len(cs) == 0 {
				continue
			}
			left = true
			if src != "" && q.busy[src] >= warmPerSource {
				continue
			}
			q.queues[src] = cs[1:]
			q.busy[src]++
			return cs[0], true
		}
		if !left {
			return warmChunk{}, false
		}
		q.cond.Wait()
	}
	return warmChunk{}, false
}

// done: chunk c was read; its peer has a free slot.
func (q *warmQueue) done(c warmChunk) {
	q.mu.Lock()
	q.busy[q.from(c)]--
	q.cond.Broadcast()
	q.mu.Unlock()
}

// warmChunk opens the item's file for reading and fetches blocks
// [c.first, c.end) of it into the tiers; it returns the bytes it holds.
func (a *Agent) warmChunk(ctx context.Context, it WarmItem, c warmChunk, bs uint64) (int64, error) {
	f, at, err := a.open(ctx, &wire.Open{Path: it.Path, Flags: syscall.O_RDONLY}, it.Path, syscall.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer func() {
		// A close as a reader's: the policy's closing hook runs (wholefile:
		// a client that now holds the file whole joins its map).
		f.Flush(context.WithoutCancel(ctx))
		f.Release(context.WithoutCancel(ctx))
	}()
	if at.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, fmt.Errorf("no longer a regular file: %w", syscall.EISDIR)
	}
	end := c.end
	if eof := (at.Size + bs - 1) / bs; end == 0 || end > eof {
		end = eof
	}
	if src, ok := a.policy().(warmSource); ok && it.From != "" {
		src.warmFrom(ctx, f, it.From, c.first, end)
	}
	var n int64
	for idx := c.first; idx < end; idx++ {
		data, err := f.block(ctx, idx, false)
		if err != nil {
			return n, err
		}
		a.fresh.Delete(block.ID{File: at.Ino, Index: idx}) // a warm-up is not a read: later reads count as local hits
		n += int64(len(data))
	}
	return n, nil
}
