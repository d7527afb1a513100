package agent

import (
	"context"
	"path"
	"sync"
	"syscall"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Read-ahead across the files of a directory (issue 9, cold `grep -r`). A
// program that opens a directory's files one after the other in the order
// of its listing — grep, cp, tar c, a checksum tool — would wait a round
// trip per file, each open after the last. Once two successive entries of
// a listing the agent holds under the directory's callback have been
// opened for reading in a row, the agent opens the next small files of the
// listing itself (OpenRead, no handle kept: their data comes with the
// reply), a few at a time, as the caller: their opens then find them whole
// in the tiers under their callbacks and send nothing (cached.go). A
// program that opens files in another order (Python's import) starts no
// read-ahead. What is read ahead costs what its open would have (one
// message and the file's bytes); a program that stops reading leaves at
// most a window's worth.

const (
	// openAheadWindow is how many entries past the one opened are read
	// ahead, and openAheadFlight how many opens are on their way at once.
	openAheadWindow = 16
	openAheadFlight = 8
	// maxScans bounds the directories whose scan is followed.
	maxScans = 64
)

// dirScan follows the opens of one directory's entries.
type dirScan struct {
	index map[string]int // entry name → position in the listing
	ents  []wire.DirEntryPlus
	last  int // position of the last entry opened
	run   int // entries opened in a row
	ahead int // entries before this one were read ahead (or opened)
}

// openAhead is the agent's read-ahead across files.
type openAhead struct {
	a     *Agent
	slots chan struct{}

	mu     sync.Mutex
	scans  map[string]*dirScan
	flying map[string]chan struct{} // paths being read ahead
}

func (o *openAhead) init(a *Agent) {
	o.a = a
	o.slots = make(chan struct{}, openAheadFlight)
	o.scans = make(map[string]*dirScan)
	o.flying = make(map[string]chan struct{})
}

// wait waits for a read-ahead of p on its way (its open then finds it in
// the cache).
func (o *openAhead) wait(ctx context.Context, p string) {
	o.mu.Lock()
	ch := o.flying[p]
	o.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// opened notes that entry p was opened for reading and starts the read
// ahead of the next entries of its directory's listing when the opens go
// along it.
func (o *openAhead) opened(ctx context.Context, p string, flags uint32) {
	if p == "" || flags&syscall.O_ACCMODE != syscall.O_RDONLY || !o.a.openReadable(flags) || o.a.inlineMax() == 0 {
		return
	}
	c, ok := vfs.CallerOf(ctx)
	if !ok {
		return
	}
	todo := o.next(parentOf(p), path.Base(p))
	for _, e := range todo {
		o.start(c, join(parentOf(p), e.Name))
	}
}

// next moves directory dir's scan to entry name and returns the entries
// to read ahead.
func (o *openAhead) next(dir, name string) []wire.DirEntryPlus {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.scans[dir]
	if s == nil {
		ents, ok := o.a.cachedList(dir)
		if !ok {
			return nil
		}
		if len(o.scans) >= maxScans {
			clear(o.scans)
		}
		s = &dirScan{index: make(map[string]int, len(ents)), ents: ents, last: -2}
		for i, e := range ents {
			s.index[e.Name] = i
		}
		o.scans[dir] = s
	}
	i, ok := s.index[name]
	if !ok {
		return nil
	}
	if i == s.last+1 {
		s.run++
	} else {
		s.run, s.ahead = 1, i+1
	}
	s.last = i
	if s.run < 2 {
		return nil
	}
	var todo []wire.DirEntryPlus
	from, to := max(s.ahead, i+1), min(i+1+openAheadWindow, len(s.ents))
	for j := from; j < to; j++ {
		if e := s.ents[j]; e.HasAttr && e.Mode&syscall.S_IFMT == syscall.S_IFREG && e.Attr.Size <= uint64(o.a.inlineMax()) {
			todo = append(todo, e)
		}
	}
	s.ahead = max(s.ahead, to)
	return todo
}

// start reads entry p ahead, as caller c, unless it is whole here or on
// its way already, or no slot is free (a later open asks itself).
func (o *openAhead) start(c vfs.Caller, p string) {
	if attr, ok := o.a.cachedAttr(p); ok && o.a.wholeLocal(attr) {
		return
	}
	o.mu.Lock()
	if _, busy := o.flying[p]; busy {
		o.mu.Unlock()
		return
	}
	select {
	case o.slots <- struct{}{}:
	default:
		o.mu.Unlock()
		return
	}
	done := make(chan struct{})
	o.flying[p] = done
	o.mu.Unlock()
	go func() {
		defer func() {
			o.mu.Lock()
			delete(o.flying, p)
			o.mu.Unlock()
			close(done)
			<-o.slots
		}()
		o.fetch(vfs.WithCaller(context.Background(), c), p)
	}()
}

// fetch opens p with OpenRead and keeps what the reply brings: the
// attributes under the file's callback and the data in the tiers.
func (o *openAhead) fetch(ctx context.Context, p string) {
	a := o.a
	tok := a.cbs.token()
	m := &wire.OpenRead{Path: p, Flags: syscall.O_RDONLY, Max: a.inlineMax(), Lazy: a.liveGen() != 0}
	r, gen, err := a.pathCall(ctx, m, true)
	od, ok := r.(*wire.OpenData)
	if err != nil || !ok {
		return
	}
	if od.Handle != 0 && !a.releases.add(gen, od.Handle) {
		a.sess.call(ctx, &wire.Release{Handle: od.Handle}, false)
	}
	if len(a.holds.files(od.Attr.Ino, false)) > 0 {
		return // this mount holds writes of it: the server's copy is older
	}
	a.noteVersion(od.Attr.Ino, od.Attr.Version)
	a.cbs.install(ctx, tok, p, od.Attr)
	if od.HasData {
		a.admitInline(od.Attr, od)
	}
}
