package agent

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"syscall"

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
	todo := chunks(items, bs)
	var (
		mu     sync.Mutex
		errs   []error
		failed = make(map[int]bool)
		next   int
		wg     sync.WaitGroup
	)
	for range warmWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= len(todo) || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				c := todo[next]
				next++
				mu.Unlock()
				n, err := a.warmChunk(ctx, items[c.item], c, bs)
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
		}()
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
		src.warmFrom(f, it.From, c.first, end)
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
