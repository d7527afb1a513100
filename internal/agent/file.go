package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// file is an open file of the agent.
type file struct {
	a    *Agent
	path string
	// links are the file's other names made through this mount since the
	// open (write-back: when path is removed, the file goes by one of
	// them); under mu, as path is once the file is open.
	links []string
	flags uint32
	keep  bool
	// caller opened the file; a reopen after reconnecting is made as them.
	caller vfs.Caller

	mu       sync.Mutex
	h        uint64 // server handle, valid in session generation gen
	gen      uint64
	attr     wire.Attr
	locked   atomic.Bool // the file took locks: its release is not queued (release.go)
	nextOff  int64       // where a sequential reader reads next
	ahead    uint64      // blocks below this index were already read ahead
	hold     holding     // writes and attribute changes held back (pipe.go)
	holdErr  error       // a held operation's failure, sent on another's behalf (pipe.go)
	holdLost error       // held operations the server refused: every close and fsync says so (pipe.go)

	holdOn   atomic.Bool // hold.on, read without mu
	commitMu sync.Mutex  // orders the file's commits (pipe.go)

	// pin is the whole file at pinVersion as the open brought it, kept
	// while the file has no server handle to read it again (openread.go).
	pin        []byte
	pinVersion uint64
	// newFile is set while a file created here (newfile.go) is not on the
	// server yet.
	newFile *newFile
	tracked uint64 // the inode counted open (defer.go), 0 once released
	// unlinked: this mount removed the name the file was opened under
	// (pending.unlinkedHere); attr counts the link it took.
	unlinked bool

	// wholefile policy (pwholefile.go): the commit counter the open was
	// handed (0: none), and whether the file was written since (a close
	// commits).
	wholeOpened atomic.Uint64
	wrote       atomic.Bool
}

var (
	_ vfs.File        = (*file)(nil)
	_ vfs.SliceReader = (*file)(nil)
	_ vfs.Allocator   = (*file)(nil)
)

// KeepCache implements vfs.File.
func (f *file) KeepCache() bool { return f.keep }

// Attr implements vfs.File: the server's fstat of the open file, so that
// an open file unlinked or changed elsewhere shows its link count and size
// as a local fstat would.
func (f *file) Attr(ctx context.Context) (wire.Attr, error) {
	if at, ok := f.heldAttr(); ok {
		return at, nil // pipe.go: what the held operations leave
	}
	if at, ok := f.coveredAttr(); ok {
		return at, nil // the callback on the file's path covers them
	}
	ask := func() (wire.Attr, error) { return f.serverAttr(ctx) }
	at, err := f.a.settledAttr(ask, nil) // a file with dirty data here (writeback_attr.go)
	f.a.holds.overlay(&at)               // another open file of ino holds writes (pipe.go)
	return at, err
}

// serverAttr asks the server for the open file's attributes.
func (f *file) serverAttr(ctx context.Context) (wire.Attr, error) {
	f.mu.Lock()
	path, h := f.path, f.h
	f.mu.Unlock()
	if h == 0 {
		return f.lazyAttr(ctx, path)
	}
	r, err := f.call(ctx, func(h uint64) wire.Msg { return as(ctx, &wire.GetAttr{Path: path, Handle: h}) }, true)
	if err != nil {
		return wire.Attr{}, err
	}
	ar, ok := r.(*wire.AttrReply)
	if !ok {
		return wire.Attr{}, fmt.Errorf("fstat: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	return ar.Attr, nil
}

// sameFile reports whether attributes a and b are of one file: the inode
// number and its generation (a file system reuses the number of a removed
// file at once, a replace by rename often gets the number just freed).
func sameFile(a, b wire.Attr) bool { return a.Ino == b.Ino && a.Gen == b.Gen }

// coveredAttr returns the file's attributes when a callback covers them:
// its path still names it (a removal or rename here, or a break, drops
// the path's) and nothing changed it since (a write here drops them too).
// The kernel asks for them right after every open whose version it did
// not know (fusefs drops the attributes it had).
func (f *file) coveredAttr() (wire.Attr, bool) {
	f.mu.Lock()
	path, opened := f.path, f.attr
	f.mu.Unlock()
	at, ok := f.a.cachedAttr(path)
	if !ok || !sameFile(at, opened) {
		return wire.Attr{}, false
	}
	f.a.holds.overlay(&at) // another open file of ino holds writes (pipe.go)
	return at, true
}

// lazyAttr is Attr of a file without a server handle (opened from the
// cache, cached.go, or with its data, openread.go) whose callback broke:
// the server's fstat of the file reopened by name; when the name no
// longer leads to it (replaced), the attributes it was opened with.
func (f *file) lazyAttr(ctx context.Context, path string) (wire.Attr, error) {
	f.mu.Lock()
	opened, unlinked := f.attr, f.unlinked
	f.mu.Unlock()
	if unlinked {
		return opened, nil // its name is gone: reopening it would find nothing, or another file
	}
	r, err := f.call(ctx, func(h uint64) wire.Msg { return as(ctx, &wire.GetAttr{Path: path, Handle: h}) }, true)
	if ar, ok := r.(*wire.AttrReply); ok && err == nil {
		return ar.Attr, nil
	}
	return opened, nil
}

func (f *file) setAttr(a wire.Attr) {
	f.mu.Lock()
	f.attr = a
	f.mu.Unlock()
}

// handle returns the file's server handle, reopening the file when the
// connection was re-established since (the server may have restarted and
// forgotten it). A file replaced in the meantime fails with EIO.
func (f *file) handle(ctx context.Context) (uint64, error) {
	if err := f.sendNew(ctx); err != nil {
		return 0, err // newfile.go: created here, refused there
	}
	_, gen, err := f.a.sess.current(ctx)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	if f.gen == gen {
		h := f.h
		f.mu.Unlock()
		return h, nil
	}
	opened, reopen := f.attr, f.gen != 0 // gen 0: opened from the cache (cached.go)
	f.mu.Unlock()
	flags := f.flags &^ (syscall.O_CREAT | syscall.O_EXCL | syscall.O_TRUNC)
	r, gen, err := f.a.pathCall(vfs.WithCaller(ctx, f.caller), &wire.Open{Path: f.path, Flags: flags}, true)
	if err != nil {
		return 0, fmt.Errorf("reopen %s after reconnecting: %v: %w", f.path, err, syscall.EIO)
	}
	or, ok := r.(*wire.OpenReply)
	if !ok {
		return 0, fmt.Errorf("reopen %s: unexpected reply %v: %w", f.path, r.Type(), syscall.EIO)
	}
	if !sameFile(or.Attr, opened) {
		f.a.sess.call(ctx, &wire.Release{Handle: or.Handle}, false)
		return 0, fmt.Errorf("reopen %s after reconnecting: the file was replaced: %w", f.path, syscall.EIO)
	}
	f.a.ownCaps.put(or.Cap)
	f.mu.Lock()
	f.h, f.gen = or.Handle, gen
	f.mu.Unlock()
	if reopen {
		f.a.log.Info("reopened file after reconnecting", "path", f.path)
	}
	return or.Handle, nil
}

// call sends a request that names the file's server handle. When the
// connection was re-established between taking the handle and sending the
// request, the handle may be unknown to the (restarted) server: the file is
// reopened and the request sent again.
func (f *file) call(ctx context.Context, build func(h uint64) wire.Msg, idempotent bool) (wire.Msg, error) {
	for attempt := 0; ; attempt++ {
		h, err := f.handle(ctx)
		if err != nil {
			return nil, err
		}
		f.mu.Lock()
		gen := f.gen
		f.mu.Unlock()
		r, callGen, err := f.a.sess.call(ctx, build(h), idempotent)
		if callGen == gen || attempt >= 2 {
			return r, err
		}
	}
}

// ReadAt implements vfs.File: it assembles the range from cached blocks,
// fetching the missing ones, and reads ahead of a sequential reader.
func (f *file) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if _, err := f.commit(ctx); err != nil {
		return 0, err // pipe.go: what this handle wrote is read back from the server
	}
	bs := f.a.BlockSize()
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		idx := uint64(pos / int64(bs))
		data, err := f.block(ctx, idx, true)
		if err != nil {
			return n, err
		}
		in := int(pos % int64(bs))
		if in >= len(data) {
			break // end of file
		}
		n += copy(p[n:], data[in:])
		if len(data) < bs {
			break
		}
	}
	f.readAhead(off, n, bs)
	return n, nil
}

// ReadSlice implements vfs.SliceReader: a read within one cached block
// is handed to the kernel without a copy (blocks are never modified).
func (f *file) ReadSlice(ctx context.Context, off int64, n int) ([]byte, bool, error) {
	bs := int64(f.a.BlockSize())
	in := off % bs
	if n <= 0 || in+int64(n) > bs {
		return nil, false, nil
	}
	if _, err := f.commit(ctx); err != nil {
		return nil, false, err
	}
	data, err := f.block(ctx, uint64(off/bs), true)
	if err != nil {
		return nil, false, err
	}
	end := min(in+int64(n), int64(len(data))) // a short block ends the file
	in = min(in, end)
	f.readAhead(off, int(end-in), int(bs))
	return data[in:end], true, nil
}

// readAhead starts fetching the blocks after a sequential read.
func (f *file) readAhead(off int64, n, bs int) {
	ra := f.a.cfg.ReadAhead
	f.mu.Lock()
	sequential := off == f.nextOff || off == 0
	f.nextOff = off + int64(n)
	size := f.attr.Size
	first := uint64((off + int64(n) + int64(bs) - 1) / int64(bs))
	last := first + uint64(ra) // exclusive
	if !sequential || ra == 0 || n == 0 {
		f.mu.Unlock()
		return
	}
	if eof := (size + uint64(bs) - 1) / uint64(bs); last > eof {
		last = eof
	}
	if first < f.ahead {
		first = f.ahead
	}
	if first >= last {
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	for idx := first; idx < last; idx++ {
		select {
		case f.a.prefetch <- struct{}{}:
		default:
			return // enough in flight already: a later read asks again
		}
		f.mu.Lock()
		f.ahead = max(f.ahead, idx+1) // only blocks actually started count as read ahead
		f.mu.Unlock()
		go func(idx uint64) {
			defer func() { <-f.a.prefetch }()
			f.block(context.Background(), idx, false)
		}(idx)
	}
}

// block returns block idx of the file at the version this open file sees,
// from the cache or from the server; concurrent misses of one block share
// one fetch. A read counts in the layer that served it: a fetch counts
// where the block came from (server or peer), a demand read of a cached
// block counts as local memory unless read-ahead fetched it for this very
// read (it was counted at the fetch).
func (f *file) block(ctx context.Context, idx uint64, demand bool) ([]byte, error) {
	for try := 1; ; try++ {
		data, err := f.blockOnce(ctx, idx, demand, try < settleTries)
		if !errors.Is(err, errUnsettled) {
			return data, err
		}
	}
}

// blockOnce is block; strict makes it fail with errUnsettled when the
// block came from the server while the file was being written back here,
// and the write-back finished since (writeback_attr.go).
func (f *file) blockOnce(ctx context.Context, idx uint64, demand, strict bool) ([]byte, error) {
	f.mu.Lock()
	ino, v := f.attr.Ino, f.attr.Version
	f.mu.Unlock()
	id := block.ID{File: ino, Index: idx}
	if data, ok := f.a.cache.Get(id, block.Version(v)); ok {
		if _, prefetched := f.a.fresh.LoadAndDelete(id); demand && !prefetched {
			f.a.metrics.CountRead(obs.LayerLocalMemory, len(data))
		}
		f.a.policy().hit(id, v)
		return data, nil
	}
	f.mu.Lock()
	pin, pinned := f.pinned(idx, v)
	f.mu.Unlock()
	if pinned {
		if demand {
			f.a.metrics.CountRead(obs.LayerLocalMemory, len(pin))
		}
		return pin, nil // openread.go: no handle to read it again with
	}
	if !demand {
		defer f.a.fresh.Store(id, struct{}{})
	}
	key := strconv.FormatUint(ino, 10) + ":" + strconv.FormatUint(idx, 10) + ":" + strconv.FormatUint(v, 10) + ":" + strconv.FormatBool(strict)
	ch := f.a.flights.DoChan(key, func() (any, error) {
		if data, ok := f.a.cache.Get(id, block.Version(v)); ok {
			return data, nil
		}
		if data, ok := f.a.fromDisk(id, block.Version(v)); ok {
			f.a.policy().promoted(id, v)
			return data, nil
		}
		return f.fetch(context.WithoutCancel(ctx), id, v, strict)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]byte), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetch reads one block after a local miss, from a peer or the server as
// the policy decides (policy.go), and stores it in both tiers.
func (f *file) fetch(ctx context.Context, id block.ID, v uint64, strict bool) ([]byte, error) {
	mark := f.a.wb.mark()
	br, err := f.a.policy().fetch(ctx, f, id, v)
	if err != nil {
		return nil, err
	}
	if f.a.wb.holds(id.File) {
		// Dirty here (writeback.go): a dirty block wins over the server's
		// (a write raced the fetch), and the server's copy of a block we
		// did not write is ours too, whatever version our partial
		// write-backs gave the file.
		if data, ok := f.a.wb.dirtyData(id); ok {
			return data, nil
		}
		br.Version = v
	}
	if strict && !f.a.wb.steady(id.File, mark) {
		// The server's copy may be from the middle of a write-back that
		// has finished since: read again, at the version it gave.
		return nil, errUnsettled
	}
	if br.Version != v {
		// The file changed since it was opened: the block belongs to the
		// new version, which this open file sees from now on.
		f.a.noteVersion(id.File, br.Version)
		f.mu.Lock()
		if f.attr.Version == v {
			f.attr.Version, f.attr.Size = br.Version, br.Size
		}
		f.mu.Unlock()
	}
	f.a.cache.Put(id, block.Version(br.Version), br.Data)
	f.a.toDisk(id, block.Version(br.Version), br.Data)
	return br.Data, nil
}

// fromServer sends one ReadBlock and counts where the server found it.
func (f *file) fromServer(ctx context.Context, req *wire.ReadBlock) (*wire.BlockReply, error) {
	r, err := f.call(ctx, func(h uint64) wire.Msg { req.Handle = h; return req }, true)
	if err != nil {
		return nil, err
	}
	br, ok := r.(*wire.BlockReply)
	if !ok {
		return nil, fmt.Errorf("read: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	if !br.Forwarded {
		layer := obs.LayerServerDisk
		switch br.Layer {
		case wire.LayerMemory:
			layer = obs.LayerServerMemory
		case wire.LayerProxy:
			layer = obs.LayerProxy // a coopfs proxy between us and the server
		}
		f.a.metrics.CountRead(layer, len(br.Data))
	}
	return br, nil
}

// fetchCoop reads a block under the directory policy: the server serves it
// or forwards the request to a holder, who sends it here directly; after a
// negative reply or a timeout the server is asked again and serves it.
func (f *file) fetchCoop(ctx context.Context, c *coop, req *wire.ReadBlock) (*wire.BlockReply, error) {
	token, ch := c.token()
	req.Token = token
	br, err := f.fromServer(ctx, req)
	if err != nil || !br.Forwarded {
		c.dropToken(token)
		return br, err
	}
	c.stats.forwarded.Add(1)
	pd, silent, err := c.await(ctx, token, ch, req.Version)
	if err != nil {
		return nil, err
	}
	if silent {
		// A holder that never answers costs every requester its timeout:
		// the server counts it as it counts a bad block (verify.go).
		c.report(req, br, fmt.Sprintf("no answer within the forward timeout %s", c.timeout))
	}
	if pd != nil && !c.verify(req, br, pd) {
		pd = nil // verify.go: dropped and reported; the server serves it
	}
	if pd != nil {
		c.stats.peerHits.Add(1)
		f.a.metrics.CountRead(obs.LayerPeer, len(pd.Data))
		return &wire.BlockReply{Version: pd.Version, Size: br.Size, Data: pd.Data}, nil
	}
	retry := *req
	retry.Retry, retry.Token = br.Holder, 0
	return f.fromServer(ctx, &retry)
}

// WriteAt implements vfs.File: under write-through the write reaches the
// server before it returns, and the file's cached blocks of the old version
// are dropped; under write-back it completes in dirty disk frames
// (writeback.go); under read-only it fails with EROFS.
func (f *file) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	switch f.a.writePolicy() {
	case cache.ReadOnly:
		return 0, errReadOnly
	case cache.WriteBack:
		f.wrote.Store(true)
		if f.flags&syscall.O_APPEND == 0 {
			return f.a.wb.write(ctx, f, p, off)
		}
		// An append lands at the end of the file as the server sees it,
		// which only the server knows: it goes there at once (after the
		// file's dirty data here, which it must follow), never journalled
		// at the end this mount saw.
		if err := f.a.wb.flushIno(ctx, f.ino()); err != nil {
			return 0, err
		}
	}
	f.wrote.Store(true)
	return f.writeThrough(ctx, p, off)
}

// writeThrough writes p at off on the server before it returns.
func (f *file) writeThrough(ctx context.Context, p []byte, off int64) (int, error) {
	if held, err := f.holdWrite(ctx, p, off); held {
		if err != nil {
			return 0, err
		}
		return len(p), nil // pipe.go: sent with the close
	}
	// One sequence number for every try: the server applies it once
	// (WriteSeq), so resending it after a lost reply is safe, appends too.
	seq := f.a.writeSeq.Add(1)
	f.mu.Lock()
	ino := f.attr.Ino
	f.mu.Unlock()
	base := f.a.writeBase(ino) // rewrite.go: the writer keeps its cached blocks
	build := func(h uint64) wire.Msg { return f.a.writeMsg(seq, h, uint64(off), base, p) }
	r, err := f.call(ctx, build, true)
	if err != nil && base != 0 && f.a.writeUnknown(err) {
		r, err = f.call(ctx, build, true) // as WriteSeq now
	}
	if err != nil {
		return 0, err
	}
	var attr wire.Attr
	var prev uint64
	switch r := r.(type) {
	case *wire.AttrReply:
		attr = r.Attr
	case *wire.WriteReply:
		attr, prev = r.Attr, r.Prev
	default:
		return 0, fmt.Errorf("write: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	landed, ok := f.landed(off, len(p), prev, &attr)
	if !ok {
		base = 0 // where it landed is not known: the file's blocks are dropped
	}
	f.a.wrote(attr.Ino, base, prev, &attr, landed, p)
	f.setAttr(attr)
	return len(p), nil
}

// landed returns where a write of n bytes that the kernel sent at off
// landed on the server. An append lands at the server's end of file,
// whatever off says (the kernel's idea of the size, stale when another
// client appended): right below the size after it, when the server saw no
// other change in between (prev, WriteReply.Prev, is not 0); ok is false
// when that is not known.
func (f *file) landed(off int64, n int, prev uint64, after *wire.Attr) (uint64, bool) {
	if f.flags&syscall.O_APPEND == 0 {
		return uint64(off), true
	}
	if prev == 0 || after.Size < uint64(n) {
		return 0, false
	}
	return after.Size - uint64(n), true
}

// Flush implements vfs.File (close). A file this mount created sends what
// it held back and returns once the server has it (pipe.go). Other writes
// are already on the server (write-through), or in the disk tier's bank
// files (write-back): they survive the death of the mount process from
// then on (the kernel keeps the files' pages). Under write-back, the close
// of a file opened for writing also syncs the disk tier (the banks written
// since the last sync), so a write acknowledged by close survives a machine
// crash too; with WriteBackConfig.NoCloseSync only fsync and the background
// flusher's sync, at most a second later, do (writeback.go).
func (f *file) Flush(ctx context.Context) error {
	if err := f.endHold(ctx, false); err != nil {
		return err
	}
	f.a.policy().closing(ctx, f)
	if f.a.writePolicy() != cache.WriteBack || f.a.cfg.WriteBack.NoCloseSync || !writeAccess(f.flags) {
		return nil
	}
	return f.a.wb.sync()
}

// Fsync implements vfs.File. Under write-back it makes the data durable
// on the local disk: it reaches the server later (writeback.go).
func (f *file) Fsync(ctx context.Context) error {
	if f.a.writePolicy() == cache.WriteBack {
		return f.a.wb.sync()
	}
	if _, err := f.commit(ctx); err != nil {
		return err
	}
	if err := f.takeHoldErr(); err != nil {
		return err
	}
	_, err := f.call(ctx, func(h uint64) wire.Msg { return &wire.Fsync{Handle: h} }, true)
	return err
}

// Release implements vfs.File.
func (f *file) Release(ctx context.Context) error {
	if err := f.endHold(ctx, false); err != nil {
		// Sent at the close normally (Flush); nobody waits for a release.
		f.a.log.Warn("held writes of a closed file failed", "path", f.path, "err", err)
	}
	f.a.wb.released(f)
	f.a.pend.untrack(f) // defer.go
	f.unpin()
	f.mu.Lock()
	h, gen := f.h, f.gen
	f.mu.Unlock()
	if h == 0 {
		return nil // opened from the cache (cached.go), never on the server
	}
	if !f.locked.Load() && f.a.releases.add(gen, h) {
		return nil
	}
	c, cur, err := f.a.sess.current(ctx)
	if err != nil || cur != gen {
		return nil // the server forgot the handle with the old connection
	}
	if _, err := c.Call(ctx, &wire.Release{Handle: h}); err != nil && !errors.Is(err, io.EOF) {
		var ce *wire.ConnError
		if !errors.As(err, &ce) {
			return err
		}
	}
	return nil
}
