package agent

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/block"
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
//     holder from then on). An open for reading of a file held whole at a
//     version a server callback covers sends nothing at all (cached.go);
//   - otherwise it is one of the file's fetchers until it holds it, and
//     when the map names holders it fetches the whole file from them at
//     once, split into equal segments, one per holder, in chunks
//     (WholeRead); when no client holds it whole yet but some are reading
//     it (fetchers), it fetches from those in file order, each sending the
//     part it has (pwholefile_fetch.go, pwholefile_serve.go). A holder that
//     fails or sends a block that fails the server's SHA-256 gives its work
//     back to the others, and what no holder delivered is read from the
//     server. Then it tells the server it holds the file (WholeHave);
//   - with neither it reads from the server as it goes (read-ahead
//     included), and joins the map when it closes a file it then holds
//     whole (or leaves the fetchers, WholeDrop, when it does not);
//   - on close after writes it commits (WholeCommit); the server decides
//     whether its copy is the valid one (coord/wholefile). A writer keeps
//     its whole copy, on disk too, across its own writes (rewrite.go);
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

	mu       sync.Mutex
	holding  map[uint64]heldCopy      // files this client told the server it holds whole
	reading  map[uint64]*readState    // files open for reading here whose copy is not whole yet
	readers  map[any]uint64           // those opens, and the fetches running (→ their file)
	fetching map[uint64]*bgFetch      // whole-file fetches running (pwholefile_fetch.go)
	joins    map[uint64]*haveCall     // WholeHaves on their way
	slots    map[string]chan struct{} // requests in flight to each holder (pwholefile_fetch.go)

	ctx    context.Context // ends at close: the fetches stop
	cancel context.CancelFunc
	bg     sync.WaitGroup // the fetches running

	wake  arrivals // requests waiting for blocks on their way here (pwholefile_serve.go)
	stats wholeStats
}

// heldCopy is a file held whole: its version, and the connection
// generation the server learnt it in (0: unknown), whose callbacks may
// stand for its open.
type heldCopy struct{ v, gen uint64 }

// readState counts a file's opens for reading while its copy is arriving.
type readState struct {
	v     uint64
	opens int
}

// wholeStats are the client's wholefile counters (exported by
// wholeCollector).
type wholeStats struct {
	hits, fetches, peerSegments, serverSegments, resplits   atomic.Uint64
	peerFailures, badBlocks, served, commits, validCommits  atomic.Uint64
	haves, drops, partialFetches, partialWaits, cachedOpens atomic.Uint64
}

func newWholeClient(a *Agent, ln net.Listener) *wholeClient {
	w := &wholeClient{a: a, timeout: a.cfg.ForwardTimeout, holding: make(map[uint64]heldCopy),
		reading: make(map[uint64]*readState), readers: make(map[any]uint64), fetching: make(map[uint64]*bgFetch), joins: make(map[uint64]*haveCall),
		slots: make(map[string]chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.peerNet = newPeerNet(a, ln, "wholefile", wire.HandlerFunc(w.servePeer), a.cfg.ForwardTimeout)
	return w
}

// close stops the fetches running and the peer side.
func (w *wholeClient) close() {
	w.cancel()
	w.bg.Wait()
	w.peerNet.close()
}

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
// stale or missing one is fetched from the holders of the current version
// (or the clients reading it), else read from the server as it goes.
func (w *wholeClient) opened(ctx context.Context, f *file) {
	f.mu.Lock()
	ino, v, size := f.attr.Ino, f.attr.Version, f.attr.Size
	f.mu.Unlock()
	if size < uint64(w.a.cfg.WholeFileMinSize) {
		return // the server serves it directly
	}
	reading := f.flags&syscall.O_ACCMODE != syscall.O_WRONLY
	have := reading && w.whole(ino, v, size)
	if !have && reading {
		w.startReading(f, ino, v) // before the server names us a fetcher
	}
	gen := w.liveGen()
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
		w.hold(ino, v, gen)
		return
	}
	if len(or.Holders)+len(or.Fetchers) == 0 {
		return // from the server as it goes; joins the map on close (closing)
	}
	w.startFetch(ctx, f, ino, v, size, or) // in the background: reads wait for the blocks they need
}

// liveGen is the server connection's generation now (0: none).
func (w *wholeClient) liveGen() uint64 {
	_, gen, ok := w.a.sess.live()
	if !ok {
		return 0
	}
	return gen
}

// startReading records an open for reading (or a fetch, key) of ino at v
// whose copy is not whole here: blocks of it are on their way (a peer
// asking waits for them).
func (w *wholeClient) startReading(key any, ino, v uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.readers[key]; dup {
		return
	}
	rs := w.reading[ino]
	if rs == nil || rs.v != v {
		rs = &readState{v: v}
		w.reading[ino] = rs
	}
	rs.opens++
	w.readers[key] = ino
}

// stopReading ends key's reading (an open's close, a fetch's end); last
// says it was the last reading its file here.
func (w *wholeClient) stopReading(key any) (was, last bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ino, ok := w.readers[key]
	if !ok {
		return false, false
	}
	delete(w.readers, key)
	rs := w.reading[ino]
	if rs == nil {
		return true, true
	}
	if rs.opens--; rs.opens > 0 {
		return true, false
	}
	delete(w.reading, ino)
	return true, true
}

// arriving reports whether a copy of ino at v is on its way here: an open
// reads it and it is not whole yet.
func (w *wholeClient) arriving(ino, v uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rs := w.reading[ino]
	return rs != nil && rs.v == v
}

// hold records that this client is a holder of ino at v, known to the
// server in connection generation gen (0: not sure).
func (w *wholeClient) hold(ino, v, gen uint64) {
	if gen != w.liveGen() {
		gen = 0 // reconnected meanwhile: the server may not know
	}
	w.mu.Lock()
	w.holding[ino] = heldCopy{v: v, gen: gen}
	if rs := w.reading[ino]; rs != nil && rs.v == v {
		delete(w.reading, ino) // whole: nothing more on its way
	}
	w.mu.Unlock()
}

// have tells the server this client holds ino at v whole (f is its open
// of the file, through which the server may hash it), and waits for the
// server to have it in the map: an opener after this client's close finds
// it.
func (w *wholeClient) have(ctx context.Context, f *file, ino, v uint64) {
	w.mu.Lock()
	if j := w.joins[ino]; j != nil && j.v == v {
		w.mu.Unlock()
		<-j.done // a fetch's end and a close race: one says so, both wait for it
		return
	}
	if held, ok := w.holding[ino]; ok && held.v == v {
		w.mu.Unlock()
		return // said so already
	}
	j := &haveCall{v: v, done: make(chan struct{})}
	w.joins[ino] = j
	w.holding[ino] = heldCopy{v: v} // whole here; the server's word follows
	w.mu.Unlock()
	defer func() {
		deleteIfSame(&w.mu, w.joins, ino, j)
		close(j.done)
	}()
	w.stats.haves.Add(1)
	gen := w.liveGen()
	_, err := f.call(context.WithoutCancel(ctx), func(h uint64) wire.Msg {
		return &wire.WholeHave{Handle: h, File: ino, Version: v}
	}, true)
	if err != nil {
		w.a.log.Debug("wholefile: the server did not take our copy", "file", ino, "err", err)
		gen = 0
	}
	w.hold(ino, v, gen)
}

// haveCall is a WholeHave on its way to the server.
type haveCall struct {
	v    uint64
	done chan struct{}
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

// closing commits after writes, or, after reading a file, joins its map
// when it is whole here now, else leaves its fetchers.
func (w *wholeClient) closing(ctx context.Context, f *file) {
	opened := f.wholeOpened.Load()
	f.mu.Lock()
	ino, v, size := f.attr.Ino, f.attr.Version, f.attr.Size
	f.mu.Unlock()
	wasReader, last := w.stopReading(f)
	if f.wrote.Swap(false) {
		if opened != 0 { // else opened small, or without a counter: the version change is enough
			w.commit(ctx, f, opened, ino, v, size)
		}
		return
	}
	if opened == 0 || f.flags&syscall.O_ACCMODE == syscall.O_WRONLY || size < uint64(w.a.cfg.WholeFileMinSize) {
		return
	}
	w.settle(ctx, f, ino, v, size, wasReader && last)
}

// settle ends a reading of ino at v: the client joins the map if it holds
// the file whole now, else, when it was the last reading, leaves the
// fetchers.
func (w *wholeClient) settle(ctx context.Context, f *file, ino, v, size uint64, last bool) {
	if w.heldAt(ino, v) {
		return // joined already (an open's close and a fetch's end race)
	}
	w.a.diskSettled(ctx, ino) // blocks read from the server are on their way to disk
	switch {
	case w.whole(ino, v, size):
		w.have(ctx, f, ino, v)
	case last:
		w.stats.drops.Add(1)
		w.send(&wire.WholeDrop{File: ino}) // no longer a fetcher
	}
}

// commit is a close after writes: the server's counter grows, and this
// client's copy is the valid one if nobody committed since its open and it
// holds the version its writes left whole.
func (w *wholeClient) commit(ctx context.Context, f *file, opened, ino, v, size uint64) {
	w.a.diskSettled(ctx, ino) // the blocks it wrote are on their way to disk
	whole := w.whole(ino, v, size)
	gen := w.liveGen()
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
		w.hold(ino, v, gen)
	}
}

// fetch reads a block the tiers miss: from the whole-file fetch of its
// file under way, when there is one (it waits for the block), else from
// the server; peers waiting for it here hear of it.
func (w *wholeClient) fetch(ctx context.Context, f *file, id block.ID, v uint64) (*wire.BlockReply, error) {
	if data, ok := w.fromFetch(ctx, id, v); ok {
		f.mu.Lock()
		size := f.attr.Size
		f.mu.Unlock()
		return &wire.BlockReply{Version: v, Size: size, Data: data}, nil
	}
	br, err := f.fromServer(ctx, &wire.ReadBlock{File: id.File, Index: id.Index, Version: v})
	if err == nil {
		defer w.arrived()
	}
	return br, err
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
	return ok && held.v == v
}

// holdsWhole reports whether ino is held whole at v with the server
// knowing it on the live connection (gen): an open of it for reading needs
// no message while a callback covers v (cached.go).
func (w *wholeClient) holdsWhole(ino, v, gen uint64) bool {
	w.mu.Lock()
	held, ok := w.holding[ino]
	w.mu.Unlock()
	if !ok || held.v != v || held.gen == 0 || held.gen != gen {
		return false
	}
	w.stats.hits.Add(1)
	w.stats.cachedOpens.Add(1)
	return true
}

// heldWhole reports whether the wholefile policy holds the file attr
// describes whole at attr's version, with the server knowing it on the
// live connection: the open of a large file needs no message (openCached),
// as the seed's open with a matching counter moves no data.
func (a *Agent) heldWhole(attr wire.Attr) bool {
	w, ok := a.policy().(*wholeClient)
	if !ok || attr.Size < uint64(a.cfg.WholeFileMinSize) {
		return false
	}
	gen := a.liveGen()
	return gen != 0 && w.holdsWhole(attr.Ino, attr.Version, gen)
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
