package agent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/wholefile"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// The wholefile policy's fetch of a whole file from its holders (the plan
// is coord/wholefile.Fetch): from the clients holding the current version
// whole, in equal segments; or, when none does yet, from the clients whose
// copy of it is still arriving (fetchers: they are reading it), in file
// order, each answering with what it has and waiting a little for what is
// on its way. Every block is checked against the server's SHA-256, whose
// pages the fetch asks for as it goes (digestSet).

// wholeMaxSources bounds the holders one fetch reads from at once.
const wholeMaxSources = 8

// wholeChunkBytes is the most one WholeRead asks for (at least a block).
const wholeChunkBytes = 1 << 20

// wholePipeline is the chunks asked of one holder at once, over every
// fetch (slot): the next request is on its way while a chunk crosses the
// link, which stays busy, and the holder's link never queues so many of
// this client's chunks that the last one's timeout runs out in the queue
// (several files fetched at once from one holder, as in a warm-up).
const wholePipeline = 3

// wholeServerReads bounds the parallel reads from the server of the
// blocks no holder delivered.
const wholeServerReads = 4

// wholeDigestPage is how many blocks' digests one WholeDigests asks for
// (the server hashes them, reading the export, before it answers).
const wholeDigestPage = 64

// fetchRun is one whole-file fetch in progress: its plan, under mu, and
// the chunks in flight (a holder with no work left waits for them: one
// that fails hands its work back).
type fetchRun struct {
	ino, v, size uint64
	sums         *digestSet
	partial      bool // the sources are fetchers: their copies are still arriving

	mu       sync.Mutex
	cond     *sync.Cond
	plan     *wholefile.Fetch
	inflight int
}

// sources picks the holders of a fetch: those holding the file whole (at
// most wholeMaxSources, at random), else its fetchers; partial says which.
func sources(or *wire.WholeOpenReply) (hs []wire.WholeHolder, partial bool) {
	hs, partial = or.Holders, false
	if len(hs) == 0 {
		hs, partial = or.Fetchers, true
	}
	hs = append([]wire.WholeHolder(nil), hs...)
	rand.Shuffle(len(hs), func(i, j int) { hs[i], hs[j] = hs[j], hs[i] })
	return hs[:min(len(hs), wholeMaxSources)], partial
}

// bgFetch is a whole-file fetch running in the background: reads of the
// file at version v wait for the blocks they need (fromFetch) until done.
type bgFetch struct {
	v    uint64
	done chan struct{}
}

// startFetch starts fetching the file f opened (ino at v) whole from the
// sources or names, unless a fetch of it is running already, and returns:
// the open does not wait for the data, its reads do, each for its block.
// The fetch outlives the open (whole files are the unit of caching) but
// goes through its server handle: an open closed early ends what needs the
// server (digests past the first page, the blocks no peer delivered).
func (w *wholeClient) startFetch(ctx context.Context, f *file, ino, v, size uint64, or *wire.WholeOpenReply) {
	w.mu.Lock()
	if bf := w.fetching[ino]; bf != nil && bf.v == v {
		w.mu.Unlock()
		return
	}
	bf := &bgFetch{v: v, done: make(chan struct{})}
	w.fetching[ino] = bf
	w.mu.Unlock()
	w.stats.fetches.Add(1)
	w.startReading(bf, ino, v) // a fetcher while it runs, whatever the opens do
	bgctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(w.ctx, cancel)
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		defer cancel()
		defer stop()
		w.fetchWhole(bgctx, f, ino, v, size, or)
		deleteIfSame(&w.mu, w.fetching, ino, bf)
		close(bf.done)
		w.arrived() // reads waiting for a block the fetch did not bring ask the server
		_, last := w.stopReading(bf)
		if bgctx.Err() == nil {
			w.settle(bgctx, f, ino, v, size, last)
		}
	}()
}

// fromFetch waits for block id at v from the whole-file fetch of its file
// running, if one is; false when none is or it ended without the block. A
// fetch that ended between the reader's look at its tiers and this one
// left the block there: they are looked at again.
func (w *wholeClient) fromFetch(ctx context.Context, id block.ID, v uint64) ([]byte, bool) {
	w.mu.Lock()
	bf := w.fetching[id.File]
	w.mu.Unlock()
	if bf == nil || bf.v != v {
		return w.a.forPeer(id, block.Version(v))
	}
	return w.waitFor(ctx, id, v, bf.done, func() bool { return true })
}

// fetchWhole reads the file from its holders in parallel, then what they
// did not deliver from the server.
func (w *wholeClient) fetchWhole(ctx context.Context, f *file, ino, v, size uint64, or *wire.WholeOpenReply) {
	n := w.blocks(size)
	holders, partial := sources(or)
	ft := &fetchRun{ino: ino, v: v, size: size, partial: partial, sums: newDigestSet(f, ino, v, n, or.Digests)}
	ft.cond = sync.NewCond(&ft.mu)
	chunk := w.chunk(n, len(holders))
	if partial {
		ft.plan = wholefile.NewSequentialFetch(n, len(holders), chunk)
		w.stats.partialFetches.Add(1)
	} else {
		ft.plan = wholefile.NewFetch(n, len(holders), chunk)
	}
	var wg sync.WaitGroup
	for i, h := range holders {
		for range wholePipeline {
			wg.Go(func() { w.fetchFrom(ctx, ft, i, h) })
		}
	}
	wg.Wait()
	w.stats.resplits.Add(uint64(ft.plan.Resplits()))
	w.fromServer(ctx, f, ft, ft.plan.Remaining())
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
// holder's segment back and ends the holder's workers. A holder whose copy
// is still arriving may send part of a chunk: the rest goes back first in
// line.
func (w *wholeClient) fetchFrom(ctx context.Context, ft *fetchRun, i int, h wire.WholeHolder) {
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
		got, err := w.readChunk(ctx, ft, h, r)
		if err == nil && got == 0 {
			err = fmt.Errorf("nothing of blocks %d+%d arrived in time: %w", r.First, r.Count, syscall.ENOENT)
		}
		ft.mu.Lock()
		ft.inflight--
		switch {
		case err != nil:
			ft.plan.Failed(i, wholefile.Range{First: r.First + got, Count: r.Count - got})
		case got < r.Count:
			ft.plan.Returned(wholefile.Range{First: r.First + got, Count: r.Count - got})
		}
		ft.cond.Broadcast()
		ft.mu.Unlock()
		if got > 0 {
			w.stats.peerSegments.Add(1)
		}
		if err != nil {
			w.stats.peerFailures.Add(1)
			w.a.log.Info("a holder failed a whole-file segment; the others (or the server) take it over",
				"holder", h.ID, "addr", h.Listen, "file", ft.ino, "first", r.First, "count", r.Count, "partial", ft.partial, "err", err)
			return
		}
	}
}

// fromServer reads the ranges no holder delivered from the server (into
// both tiers), a few blocks at a time. Not through the read path: a read
// of the file waits for this very fetch.
func (w *wholeClient) fromServer(ctx context.Context, f *file, ft *fetchRun, rem []wholefile.Range) {
	sem := make(chan struct{}, wholeServerReads)
	var wg sync.WaitGroup
	for _, r := range rem {
		w.stats.serverSegments.Add(1)
		for idx := r.First; idx < r.First+r.Count; idx++ {
			if ctx.Err() != nil {
				break
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				id := block.ID{File: ft.ino, Index: idx}
				if w.a.cache.Contains(id, block.Version(ft.v)) {
					return // a read got it meanwhile
				}
				br, err := f.fromServer(ctx, &wire.ReadBlock{File: ft.ino, Index: idx, Version: ft.v})
				if err != nil || br.Version != ft.v {
					return // changed: the file's reads see the new version
				}
				w.a.toDiskNow(id, block.Version(ft.v), br.Data)
				w.a.cache.Put(id, block.Version(ft.v), br.Data)
				w.arrived()
			})
		}
	}
	wg.Wait()
}

// partialWait is how long a holder whose copy is still arriving may wait
// for the first block asked (WholeRead.Wait): half the requester's
// timeout, so that a holder that stalled is failed by its answer, not by
// the timeout.
func (w *wholeClient) partialWait() uint32 {
	return uint32(w.timeout / 2 / time.Millisecond)
}

// readChunk reads blocks r of the file from holder h, checks every one
// against the server's digest and stores them in both tiers; it returns
// how many it stored. A holder whose copy is still arriving may send fewer
// than asked (from r.First on); any bad block fails the chunk (the holder
// is dropped from this fetch), keeping the good ones before it.
func (w *wholeClient) readChunk(ctx context.Context, ft *fetchRun, h wire.WholeHolder, r wholefile.Range) (uint64, error) {
	conn, err := w.peer(h.Listen)
	if err != nil {
		return 0, err
	}
	req := &wire.WholeRead{File: ft.ino, Version: ft.v, Index: r.First, Count: uint32(r.Count), Cap: w.a.ownCaps.get(ft.ino, ft.v)}
	if ft.partial {
		req.Wait = w.partialWait()
	}
	release, err := w.slot(ctx, h.Listen)
	if err != nil {
		return 0, err
	}
	m, err := conn.CallTimeout(ctx, req, w.timeout)
	release()
	if err != nil {
		return 0, err
	}
	wd, ok := m.(*wire.WholeData)
	if !ok {
		return 0, fmt.Errorf("holder answered WholeRead with %v: %w", m.Type(), syscall.EPROTO)
	}
	if wd.Version != ft.v || uint64(len(wd.Lens)) > r.Count {
		return 0, fmt.Errorf("holder sent %d blocks of version %d for %d of version %d", len(wd.Lens), wd.Version, r.Count, ft.v)
	}
	bs := uint64(w.a.BlockSize())
	off := 0
	var got uint64
	for i, l := range wd.Lens {
		idx := r.First + uint64(i)
		want := min(bs, ft.size-idx*bs)
		if uint64(l) != want || off+int(l) > len(wd.Data) {
			w.stats.badBlocks.Add(1)
			return got, fmt.Errorf("block %d: %d bytes, want %d", idx, l, want)
		}
		data := wd.Data[off : off+int(l) : off+int(l)]
		off += int(l)
		sum, err := ft.sums.get(ctx, idx)
		if err != nil {
			return got, err
		}
		if !wire.DigestMatches(data, sum) {
			w.stats.badBlocks.Add(1)
			return got, fmt.Errorf("block %d: its SHA-256 differs from the server's", idx)
		}
		id := block.ID{File: ft.ino, Index: idx}
		w.a.toDiskNow(id, block.Version(ft.v), data)
		w.a.cache.Put(id, block.Version(ft.v), data)
		w.a.metrics.CountRead(obs.LayerPeer, len(data))
		got++
	}
	w.arrived()
	if !ft.partial && got < r.Count {
		return got, fmt.Errorf("the holder lacks block %d: %w", r.First+got, syscall.ENOENT)
	}
	return got, nil
}

// digestSet is the server's SHA-256 of every block of the version a fetch
// reads: the first ones came with the open's reply, the others are asked
// for a page at a time (WholeDigests) when a block first needs one, with
// the next page asked ahead.
type digestSet struct {
	f      *file
	ino, v uint64

	mu      sync.Mutex
	cond    *sync.Cond
	sums    [][]byte
	loading map[uint64]bool // pages asked for and not back yet
	err     error           // a page could not be had (the file changed): no more checks pass
}

func newDigestSet(f *file, ino, v, blocks uint64, first []wire.BlockDigestMsg) *digestSet {
	d := &digestSet{f: f, ino: ino, v: v, sums: make([][]byte, blocks), loading: make(map[uint64]bool)}
	d.cond = sync.NewCond(&d.mu)
	for _, g := range first {
		if g.Index < blocks {
			d.sums[g.Index] = g.Digest
		}
	}
	return d
}

// get returns block idx's digest, asking the server for its page if need
// be (and for the page after it, ahead).
func (d *digestSet) get(ctx context.Context, idx uint64) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.sums[idx] == nil && d.err == nil && ctx.Err() == nil {
		page := idx / wholeDigestPage
		if !d.loading[page] {
			d.load(ctx, page)
			if next := (page + 1) * wholeDigestPage; next < uint64(len(d.sums)) && d.sums[next] == nil && !d.loading[page+1] {
				d.loading[page+1] = true
				go func() {
					d.mu.Lock()
					defer d.mu.Unlock()
					d.fill(context.WithoutCancel(ctx), page+1)
				}()
			}
			continue
		}
		d.cond.Wait()
	}
	if d.sums[idx] != nil {
		return d.sums[idx], nil
	}
	if d.err != nil {
		return nil, d.err
	}
	return nil, ctx.Err()
}

// load asks for page (d.mu held; released during the call).
func (d *digestSet) load(ctx context.Context, page uint64) {
	d.loading[page] = true
	d.fill(ctx, page)
}

// fill asks the server for page, marked loading, and stores it (d.mu
// held; released during the call).
func (d *digestSet) fill(ctx context.Context, page uint64) {
	d.mu.Unlock()
	first := page * wholeDigestPage
	r, err := d.f.call(ctx, func(h uint64) wire.Msg {
		return &wire.WholeDigests{Handle: h, File: d.ino, Version: d.v, Index: first, Count: wholeDigestPage}
	}, true)
	d.mu.Lock()
	delete(d.loading, page)
	defer d.cond.Broadcast()
	dr, ok := r.(*wire.WholeDigestsRep)
	switch {
	case err != nil:
		d.err = fmt.Errorf("digests of blocks %d+: %w", first, err)
		return
	case !ok:
		d.err = fmt.Errorf("digests: unexpected reply %v: %w", r.Type(), syscall.EPROTO)
		return
	case dr.Version != d.v:
		d.err = fmt.Errorf("the file changed while it was fetched (version %d, fetching %d): %w", dr.Version, d.v, syscall.ESTALE)
		return
	}
	for _, g := range dr.Digests {
		if g.Index < uint64(len(d.sums)) && len(g.Digest) == wire.DigestSize {
			d.sums[g.Index] = g.Digest
		}
	}
	for idx := first; idx < min(first+wholeDigestPage, uint64(len(d.sums))); idx++ {
		if d.sums[idx] == nil {
			d.err = fmt.Errorf("the server sent no digest of block %d: %w", idx, syscall.EPROTO)
			return
		}
	}
}

// slot waits for one of the wholePipeline request slots of the holder at
// addr and returns the function that frees it.
func (w *wholeClient) slot(ctx context.Context, addr string) (func(), error) {
	w.mu.Lock()
	sem := w.slots[addr]
	if sem == nil {
		if len(w.slots) >= maxPeerSlots {
			clear(w.slots) // bounded; a holder's requests in flight keep their own channel
		}
		sem = make(chan struct{}, wholePipeline)
		w.slots[addr] = sem
	}
	w.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// maxPeerSlots bounds the holders whose request slots are remembered.
const maxPeerSlots = 1024
