package agent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/wholefile"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// wholeClient is the client's side of the `wholefile` policy (seed 001,
// C2Cfs). Files are cached whole in the tiers (the disk tier when the
// mount has one, so copies survive restarts; memory otherwise), tagged
// with the file's data version:
//
//   - on open of a file of at least Config.WholeFileMinSize, the client
//     asks the server for the file's commit counter and valid-cache map
//     (WholeOpen), saying whether it holds the version the open saw whole
//     (its counter matches: it reads locally, no data moves, and it is a
//     holder from then on);
//   - otherwise, when the map names holders, it fetches the whole file
//     from them at once, split into equal segments, one per holder, in
//     chunks (WholeRead); a holder that finishes takes half of the largest
//     segment left (a slow holder's work moves to the fast ones), a holder
//     that fails or sends a block that fails the server's SHA-256 gives its
//     segment back to the others, and what no holder delivered is read
//     from the server. Then it tells the server it holds the file
//     (WholeHave);
//   - with no holders it reads from the server as it goes (read-ahead
//     included), and joins the map when it closes a file it then holds
//     whole;
//   - on close after writes it commits (WholeCommit); the server decides
//     whether its copy is the valid one (coord/wholefile);
//   - it serves holders' requests only at the version asked, from its
//     tiers, and leaves a map (WholeDrop) when its tiers evict part of a
//     file it holds.
//
// Smaller files are read from the server directly, block by block: the
// coordination would cost more than the data (docs/benchmarks-wholefile.md,
// "crossover").
type wholeClient struct {
	a *Agent
	*peerNet
	timeout time.Duration

	mu      sync.Mutex
	holding map[uint64]uint64 // files this client told the server it holds whole → version

	stats wholeStats
}

// wholeStats are the client's wholefile counters (exported by
// wholeCollector).
type wholeStats struct {
	hits, fetches, peerSegments, serverSegments, resplits  atomic.Uint64
	peerFailures, badBlocks, served, commits, validCommits atomic.Uint64
	haves, drops                                           atomic.Uint64
}

// wholeMaxSources bounds the holders one fetch reads from at once.
const wholeMaxSources = 8

// wholeChunkBytes is the most one WholeRead asks for (at least a block).
const wholeChunkBytes = 1 << 20

// wholePipeline is the chunks asked of one holder at once: the next
// request is on its way while a chunk crosses the link, which stays busy.
const wholePipeline = 3

// wholeServerReads bounds the parallel reads from the server of the
// blocks no holder delivered.
const wholeServerReads = 4

func newWholeClient(a *Agent, ln net.Listener) *wholeClient {
	w := &wholeClient{a: a, timeout: a.cfg.ForwardTimeout, holding: make(map[uint64]uint64)}
	w.peerNet = newPeerNet(a, ln, "wholefile", wire.HandlerFunc(w.servePeer), a.cfg.ForwardTimeout)
	return w
}

func (w *wholeClient) close() { w.peerNet.close() }

// blocks is the number of blocks of a file of size bytes.
func (w *wholeClient) blocks(size uint64) uint64 {
	bs := uint64(w.a.BlockSize())
	return (size + bs - 1) / bs
}

// whole reports whether the tiers hold every block of ino at version v.
func (w *wholeClient) whole(ino, v, size uint64) bool {
	n := w.blocks(size)
	for idx := uint64(0); idx < n; idx++ {
		id := block.ID{File: ino, Index: idx}
		if mv, ok := w.a.cache.Peek(id); ok && uint64(mv) == v {
			continue
		}
		if dv, ok := w.a.diskPeek(id); ok && uint64(dv) == v {
			continue
		}
		return false
	}
	return true
}

// opened revalidates a large file: a current copy is used as it is, a
// stale or missing one is fetched from the holders of the current version.
func (w *wholeClient) opened(ctx context.Context, f *file) {
	f.mu.Lock()
	ino, v, size := f.attr.Ino, f.attr.Version, f.attr.Size
	f.mu.Unlock()
	if size < uint64(w.a.cfg.WholeFileMinSize) {
		return // the server serves it directly
	}
	reading := f.flags&syscall.O_ACCMODE != syscall.O_WRONLY
	have := reading && w.whole(ino, v, size)
	r, err := f.call(ctx, func(h uint64) wire.Msg {
		return &wire.WholeOpen{Handle: h, File: ino, Version: v, Have: have, NoData: !reading}
	}, true)
	or, ok := r.(*wire.WholeOpenReply)
	if err != nil || !ok {
		w.a.log.Debug("no commit counter for an open", "file", ino, "err", err)
		return
	}
	f.wholeOpened.Store(or.Commit)
	if !reading || or.Version != v {
		return // changed since the open: read block by block at the open's version
	}
	if have {
		w.stats.hits.Add(1)
		w.hold(ino, v)
		return
	}
	if len(or.Holders) == 0 {
		return // from the server as it goes; joins the map on close (closing)
	}
	key := "whole:" + strconv.FormatUint(ino, 10) + ":" + strconv.FormatUint(v, 10)
	w.a.flights.Do(key, func() (any, error) {
		if w.whole(ino, v, size) {
			return nil, nil
		}
		w.stats.fetches.Add(1)
		w.fetchWhole(ctx, f, ino, v, size, or)
		if w.whole(ino, v, size) {
			w.have(f, ino, v)
		}
		return nil, nil
	})
}

// hold records that this client is a holder of ino at v.
func (w *wholeClient) hold(ino, v uint64) {
	w.mu.Lock()
	w.holding[ino] = v
	w.mu.Unlock()
}

// have tells the server this client holds ino at v whole (f is its open
// of the file, through which the server may hash it).
func (w *wholeClient) have(f *file, ino, v uint64) {
	w.hold(ino, v)
	w.stats.haves.Add(1)
	h, err := f.handle(context.Background())
	if err != nil {
		h = 0
	}
	w.send(&wire.WholeHave{Handle: h, File: ino, Version: v})
}

// send sends a one-way message to the server; lost, it costs cooperation
// only (the map is rebuilt as clients open files).
func (w *wholeClient) send(m wire.Msg) {
	conn, _, err := w.a.sess.current(context.Background())
	if err == nil {
		err = conn.Send(m)
	}
	if err != nil {
		w.a.log.Debug("wholefile note not sent", "msg", m.Type(), "err", err)
	}
}

// fetchWhole reads the file from the holders in parallel segments (the
// plan is coord/wholefile.Fetch), then what they did not deliver from the
// server.
func (w *wholeClient) fetchWhole(ctx context.Context, f *file, ino, v, size uint64, or *wire.WholeOpenReply) {
	n := w.blocks(size)
	sums := make([][]byte, n)
	for _, d := range or.Digests {
		if d.Index < n {
			sums[d.Index] = d.Digest
		}
	}
	for _, s := range sums {
		if s == nil {
			return // not every block can be checked: read from the server
		}
	}
	holders := append([]wire.WholeHolder(nil), or.Holders...)
	rand.Shuffle(len(holders), func(i, j int) { holders[i], holders[j] = holders[j], holders[i] })
	holders = holders[:min(len(holders), wholeMaxSources)]
	plan := wholefile.NewFetch(n, len(holders), w.chunk(n, len(holders)))
	ft := &fetchRun{plan: plan}
	ft.cond = sync.NewCond(&ft.mu)
	var wg sync.WaitGroup
	for i, h := range holders {
		for range wholePipeline {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.fetchFrom(ctx, ft, i, h, ino, v, size, sums)
			}()
		}
	}
	wg.Wait()
	w.stats.resplits.Add(uint64(plan.Resplits()))
	w.fromServer(ctx, f, plan.Remaining())
}

// fetchRun is one whole-file fetch in progress: its plan, under mu, and
// the chunks in flight (a holder with no work left waits for them: one
// that fails hands its work back).
type fetchRun struct {
	mu       sync.Mutex
	cond     *sync.Cond
	plan     *wholefile.Fetch
	inflight int
}

// chunk is the blocks one WholeRead asks for: at most wholeChunkBytes,
// and small enough that each holder's segment takes several (a segment
// left to a slow holder can then be split).
func (w *wholeClient) chunk(blocks uint64, holders int) uint64 {
	per := (blocks + uint64(holders) - 1) / uint64(max(1, holders))
	return max(1, min(uint64(wholeChunkBytes/w.a.BlockSize()), (per+3)/4))
}

// fetchFrom is one of holder i's wholePipeline workers: chunk after chunk
// of the plan until no work is left; a failure hands its chunk and the
// holder's segment back and ends the holder's workers.
func (w *wholeClient) fetchFrom(ctx context.Context, ft *fetchRun, i int, h wire.WholeHolder, ino, v, size uint64, sums [][]byte) {
	for {
		ft.mu.Lock()
		r, ok := ft.plan.Next(i)
		for !ok && ft.inflight > 0 && ctx.Err() == nil {
			ft.cond.Wait() // another holder may fail and hand work back
			r, ok = ft.plan.Next(i)
		}
		if !ok {
			ft.mu.Unlock()
			return
		}
		ft.inflight++
		ft.mu.Unlock()
		err := w.readChunk(ctx, h, ino, v, size, r, sums)
		ft.mu.Lock()
		ft.inflight--
		if err != nil {
			ft.plan.Failed(i, r)
		}
		ft.cond.Broadcast()
		ft.mu.Unlock()
		if err != nil {
			w.stats.peerFailures.Add(1)
			w.a.log.Info("a holder failed a whole-file segment; the others (or the server) take it over",
				"holder", h.ID, "addr", h.Listen, "file", ino, "first", r.First, "count", r.Count, "err", err)
			return
		}
		w.stats.peerSegments.Add(1)
	}
}

// fromServer reads the ranges no holder delivered through the ordinary
// read path (the server, into both tiers), a few blocks at a time.
func (w *wholeClient) fromServer(ctx context.Context, f *file, rem []wholefile.Range) {
	sem := make(chan struct{}, wholeServerReads)
	var wg sync.WaitGroup
	for _, r := range rem {
		w.stats.serverSegments.Add(1)
		for idx := r.First; idx < r.First+r.Count; idx++ {
			if ctx.Err() != nil {
				break
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				f.block(ctx, idx, false)
			}()
		}
	}
	wg.Wait()
}

// readChunk reads blocks r of ino at v from holder h, checks every one
// against the server's digest, and stores them in both tiers. Any bad or
// missing block fails the whole chunk (the holder is dropped from this
// fetch).
func (w *wholeClient) readChunk(ctx context.Context, h wire.WholeHolder, ino, v, size uint64, r wholefile.Range, sums [][]byte) error {
	conn, err := w.peer(h.Listen)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	m, err := conn.Call(cctx, &wire.WholeRead{File: ino, Version: v, Index: r.First, Count: uint32(r.Count)})
	if err != nil {
		return err
	}
	wd, ok := m.(*wire.WholeData)
	if !ok {
		return fmt.Errorf("holder answered WholeRead with %v: %w", m.Type(), syscall.EPROTO)
	}
	if wd.Version != v || uint64(len(wd.Lens)) != r.Count {
		return fmt.Errorf("holder sent %d blocks of version %d for %d of version %d", len(wd.Lens), wd.Version, r.Count, v)
	}
	bs := uint64(w.a.BlockSize())
	off := 0
	blocks := make([][]byte, r.Count)
	for i, l := range wd.Lens {
		idx := r.First + uint64(i)
		want := min(bs, size-idx*bs)
		if uint64(l) != want || off+int(l) > len(wd.Data) {
			w.stats.badBlocks.Add(1)
			return fmt.Errorf("block %d: %d bytes, want %d", idx, l, want)
		}
		data := wd.Data[off : off+int(l) : off+int(l)]
		off += int(l)
		if !wire.DigestMatches(data, sums[idx]) {
			w.stats.badBlocks.Add(1)
			return fmt.Errorf("block %d: its SHA-256 differs from the server's", idx)
		}
		blocks[i] = data
	}
	for i, data := range blocks {
		id := block.ID{File: ino, Index: r.First + uint64(i)}
		w.a.toDiskNow(id, block.Version(v), data)
		w.a.cache.Put(id, block.Version(v), data)
		w.a.metrics.CountRead(obs.LayerPeer, len(data))
	}
	return nil
}

// servePeer answers holders' requests: blocks at exactly the version
// asked, from memory or disk; a block not here fails the request (the
// requester moves the segment to another holder).
func (w *wholeClient) servePeer(_ context.Context, _ *wire.Conn, m wire.Msg) (wire.Msg, error) {
	switch m := m.(type) {
	case *wire.WholeRead:
		bs := w.a.BlockSize()
		count := min(uint64(m.Count), uint64(max(1, int(wire.DefaultLimits.MaxData)/bs)))
		out := &wire.WholeData{Version: m.Version, Lens: make([]uint32, 0, count)}
		for i := uint64(0); i < count; i++ {
			data, ok := w.a.forPeer(block.ID{File: m.File, Index: m.Index + i}, block.Version(m.Version))
			if !ok {
				return nil, fmt.Errorf("block %d of file %d at version %d is not here: %w", m.Index+i, m.File, m.Version, syscall.ENOENT)
			}
			out.Lens = append(out.Lens, uint32(len(data)))
			out.Data = append(out.Data, data...)
		}
		w.stats.served.Add(count)
		return out, nil
	case *wire.Ping:
		return &wire.OK{}, nil
	}
	return nil, fmt.Errorf("a wholefile peer does not serve %v: %w", m.Type(), syscall.ENOSYS)
}

// closing commits after writes, or, after reading a file through from the
// server, joins its map.
func (w *wholeClient) closing(ctx context.Context, f *file) {
	opened := f.wholeOpened.Load()
	f.mu.Lock()
	ino, v, size := f.attr.Ino, f.attr.Version, f.attr.Size
	f.mu.Unlock()
	if f.wrote.Swap(false) {
		if opened == 0 {
			return // opened small, or without a counter: the version change is enough
		}
		whole := w.whole(ino, v, size)
		r, err := f.call(ctx, func(h uint64) wire.Msg {
			return &wire.WholeCommit{Handle: h, File: ino, Opened: opened, Version: v, Whole: whole}
		}, true)
		cr, ok := r.(*wire.WholeCommitRep)
		if err != nil || !ok {
			w.a.log.Debug("commit not acknowledged", "file", ino, "err", err)
			return
		}
		w.stats.commits.Add(1)
		f.wholeOpened.Store(cr.Commit)
		if cr.Valid {
			w.stats.validCommits.Add(1)
			w.hold(ino, v)
		}
		return
	}
	if opened == 0 || f.flags&syscall.O_ACCMODE == syscall.O_WRONLY || size < uint64(w.a.cfg.WholeFileMinSize) {
		return
	}
	w.mu.Lock()
	held, ok := w.holding[ino]
	w.mu.Unlock()
	if ok && held == v {
		return
	}
	w.a.diskSettled(ctx, ino) // blocks read from the server are on their way to disk
	if w.whole(ino, v, size) {
		w.have(f, ino, v)
	}
}

// fetch reads a block the tiers miss from the server.
func (w *wholeClient) fetch(ctx context.Context, f *file, id block.ID, v uint64) (*wire.BlockReply, error) {
	return f.fromServer(ctx, &wire.ReadBlock{File: id.File, Index: id.Index, Version: v})
}

func (w *wholeClient) hit(block.ID, uint64)      {}
func (w *wholeClient) promoted(block.ID, uint64) {}

// memEvicted and diskEvicted: a block of a held file left both tiers: the
// file is no longer whole here.
func (w *wholeClient) memEvicted(id block.ID) {
	if w.a.disk.c != nil {
		return // whole files live on disk: the block is there or on its way (diskEvicted)
	}
	if v, ok := w.a.diskPeek(id); !ok || !w.heldAt(id.File, uint64(v)) {
		w.lost(id.File)
	}
}

func (w *wholeClient) diskEvicted(id block.ID) {
	if v, ok := w.a.cache.Peek(id); !ok || !w.heldAt(id.File, uint64(v)) {
		w.lost(id.File)
	}
}

func (w *wholeClient) heldAt(ino, v uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	held, ok := w.holding[ino]
	return ok && held == v
}

// lost leaves the map of a held file.
func (w *wholeClient) lost(ino uint64) {
	w.mu.Lock()
	_, ok := w.holding[ino]
	delete(w.holding, ino)
	w.mu.Unlock()
	if ok {
		w.stats.drops.Add(1)
		go w.send(&wire.WholeDrop{File: ino})
	}
}

// fileDropped: the file's version changed: the server empties its map
// itself.
func (w *wholeClient) fileDropped(ino uint64) {
	w.mu.Lock()
	delete(w.holding, ino)
	w.mu.Unlock()
}

func (w *wholeClient) serveServer(context.Context, wire.Msg) (wire.Msg, error, bool) {
	return nil, nil, false
}

// DefaultWholeFileMinSize is the default Config.WholeFileMinSize: below
// it, the open's extra round trip to the server and the fetch's set-up
// cost more than the data (docs/benchmarks-wholefile.md, "crossover").
const DefaultWholeFileMinSize = 512 << 10
