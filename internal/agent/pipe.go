package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Creation-heavy work pipelined (issue 9). A file this mount creates (a
// FUSE CREATE, under write-through) holds back its writes and the
// attribute changes whose outcome the agent knows for certain (chmod,
// chown, utimens by the file's owner, e.g. tar's after the data): they
// are answered at once with the attributes they leave, and sent together
// in one Commit (wire type 120) when the file is closed — so that close(2)
// still returns only after the server holds the data (close-to-open) —
// or earlier when an operation needs them on the server: fsync, a read
// through the same handle, a truncation, an attribute change that cannot
// be held, a lock, an open of the same file, a rename, link, unlink or
// xattr change in the mount, or when the file holds holdFileMax bytes (all
// held files together holdAllMax). A held operation that fails on the
// server fails the operation that sent it: close (the usual case), fsync,
// or the one that needed it first; nothing held is lost without an error.
//
// What is certain: writes through a handle open for writing succeed unless
// the disk is full or broken (reported at close, as NFS does); an
// attribute change by the caller that created the file, who is its owner
// on the server (the created file's uid is the caller's: no squashing),
// of permission bits without set-id or sticky bits (no kernel rule clears
// them behind our back), of the group to one of the caller's groups (or
// anything for root), and of the times. Anything else is sent at once,
// after what the file holds.

const (
	holdFileMax = 1 << 20  // held bytes per file before it sends them
	holdAllMax  = 64 << 20 // held bytes of all files before one sends
)

// holding is what an open file holds back; under file.mu.
type holding struct {
	on   bool
	root bool // created by root as root (not squashed): the caller may chown and chmod it whoever owns it
	ops  []wire.CommitOp
	data []byte
	attr wire.Attr // the file's attributes as the held operations leave them
}

// holds is the agent's list of files holding operations back.
type holds struct {
	n     atomic.Int32 // files in byIno (a quick "none" for the hot paths)
	bytes atomic.Int64 // held bytes of all files
	// noCommit: the server does not know Commit (ENOSYS); nothing is held.
	noCommit atomic.Bool

	mu    sync.Mutex
	byIno map[uint64][]*file
}

// startHold makes f, just created, hold its writes back.
func (a *Agent) startHold(f *file) {
	if a.writePolicy() != cache.WriteThrough || a.holds.noCommit.Load() ||
		f.flags&syscall.O_APPEND != 0 || f.flags&syscall.O_ACCMODE == syscall.O_RDONLY ||
		f.attr.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	f.mu.Lock()
	f.hold = holding{on: true, attr: f.attr, root: f.caller.UID == 0 && f.attr.UID == 0}
	f.mu.Unlock()
	f.holdOn.Store(true)
	h := &a.holds
	h.mu.Lock()
	if h.byIno == nil {
		h.byIno = make(map[uint64][]*file)
	}
	h.byIno[f.attr.Ino] = append(h.byIno[f.attr.Ino], f)
	h.n.Add(1)
	h.mu.Unlock()
}

// unlist takes f off the list of holding files.
func (h *holds) unlist(f *file, ino uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fs := h.byIno[ino]
	if i := slices.Index(fs, f); i >= 0 {
		fs = slices.Delete(fs, i, i+1)
		h.n.Add(-1)
	}
	if len(fs) == 0 {
		delete(h.byIno, ino)
	} else {
		h.byIno[ino] = fs
	}
}

// files returns the holding files of ino, or all of them when all is set.
func (h *holds) files(ino uint64, all bool) []*file {
	if h.n.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !all {
		return slices.Clone(h.byIno[ino])
	}
	var out []*file
	for _, fs := range h.byIno {
		out = append(out, fs...)
	}
	return out
}

// overlay gives attributes of a file that holds operations back the values
// they will have once they are sent (a lookup or listing reply carries the
// server's, which do not show them yet).
func (h *holds) overlay(at *wire.Attr) {
	if h.n.Load() == 0 || at.Ino == 0 {
		return
	}
	for _, f := range h.files(at.Ino, false) {
		f.mu.Lock()
		if f.hold.on && len(f.hold.ops) > 0 {
			p := f.hold.attr
			at.Size, at.Blocks, at.Mode, at.UID, at.GID = p.Size, p.Blocks, p.Mode, p.UID, p.GID
			at.Atime, at.Mtime, at.Ctime = p.Atime, p.Mtime, p.Ctime
		}
		f.mu.Unlock()
	}
}

// commitIno sends what the files of ino hold and ends their holding (an
// open of the file must find its data on the server, and from then on two
// open files share it); it returns the last file's attributes. A failure
// is the holding file's (its close reports it).
func (a *Agent) commitIno(ctx context.Context, ino uint64) (wire.Attr, bool) {
	var at wire.Attr
	var any bool
	for _, f := range a.holds.files(ino, false) {
		sent, err := f.commit(ctx)
		f.mu.Lock()
		if err != nil {
			f.holdErr = err
		} else if sent {
			at, any = f.attr, true
		}
		f.mu.Unlock()
		f.endHold(ctx, true)
	}
	return at, any
}

// endAllHolds sends what every file holds and ends their holding: before a
// rename, link, unlink or xattr change, whose effect the held operations
// must not cross. An error is the sending file's: it fails that file's
// next operation and close, not this one.
func (a *Agent) endAllHolds(ctx context.Context) {
	for _, f := range a.holds.files(0, true) {
		f.endHold(ctx, true)
	}
}

// Holding implements vfs.Holder.
func (f *file) Holding() bool { return f.holdOn.Load() }

// holdWrite holds a write back; held is false when the file does not hold.
func (f *file) holdWrite(ctx context.Context, p []byte, off int64) (held bool, err error) {
	if !f.holdOn.Load() || off < 0 {
		return false, nil
	}
	f.mu.Lock()
	if !f.hold.on {
		f.mu.Unlock()
		return false, nil
	}
	h := &f.hold
	end := uint64(off) + uint64(len(p))
	if n := len(h.ops); n > 0 && h.ops[n-1].Attr == nil && h.ops[n-1].Offset+uint64(h.ops[n-1].Len) == uint64(off) &&
		uint64(h.ops[n-1].Len)+uint64(len(p)) < 1<<32 {
		h.ops[n-1].Len += uint32(len(p))
	} else {
		h.ops = append(h.ops, wire.CommitOp{Offset: uint64(off), Len: uint32(len(p))})
	}
	h.data = append(h.data, p...)
	now := time.Now().UnixNano()
	h.attr.Size = max(h.attr.Size, end)
	h.attr.Blocks = (h.attr.Size + 511) / 512
	h.attr.Mtime, h.attr.Ctime = now, now
	mine := len(h.data)
	f.mu.Unlock()
	all := f.a.holds.bytes.Add(int64(len(p)))
	if mine >= holdFileMax || all >= holdAllMax {
		if _, err := f.commit(ctx); err != nil {
			return true, err
		}
	}
	return true, nil
}

// SetAttrHeld implements vfs.Holder.
func (f *file) SetAttrHeld(ctx context.Context, in vfs.SetAttrIn) (wire.Attr, bool, error) {
	if at, ok := f.holdSetAttr(ctx, in); ok {
		return at, true, nil
	}
	// The change made by the caller leaves attributes that the held ones
	// would not know: the file holds nothing back from now on.
	return wire.Attr{}, false, f.endHold(ctx, false)
}

// holdSetAttr holds an attribute change back when its outcome is certain.
func (f *file) holdSetAttr(ctx context.Context, in vfs.SetAttrIn) (wire.Attr, bool) {
	if !f.holdOn.Load() {
		return wire.Attr{}, false
	}
	c, ok := vfs.CallerOf(ctx)
	if !ok {
		return wire.Attr{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	h := &f.hold
	if !h.on || !sameCaller(c, f.caller) || !certain(c, h.attr, h.root, in) {
		return wire.Attr{}, false
	}
	sa := &wire.SetAttr{Valid: in.Valid, Mode: in.Mode, UID: in.UID, GID: in.GID, Atime: in.Atime, Mtime: in.Mtime}
	h.ops = append(h.ops, wire.CommitOp{Attr: sa})
	applyHeld(&h.attr, sa, time.Now().UnixNano())
	return h.attr, true
}

func sameCaller(a, b vfs.Caller) bool {
	return a.UID == b.UID && a.GID == b.GID && slices.Equal(a.Groups, b.Groups)
}

// certain reports whether attribute change in, by caller c, of a file with
// attributes at succeeds on the server with exactly the requested effect;
// root says that c is root and acts as root on the server.
func certain(c vfs.Caller, at wire.Attr, root bool, in vfs.SetAttrIn) bool {
	const held = wire.SetMode | wire.SetUID | wire.SetGID | wire.SetAtime | wire.SetMtime | wire.SetAtimeNow | wire.SetMtimeNow
	const special = syscall.S_ISUID | syscall.S_ISGID | syscall.S_ISVTX
	switch {
	case in.Valid&^held != 0 || in.Valid == 0:
		return false // a truncation, or something new
	case c.UID != at.UID && !root:
		return false // only the owner, or root when the server let it create as root
	case at.Mode&special != 0:
		return false // chown and chmod clear set-id bits by rules of their own
	case in.Valid&wire.SetMode != 0 && in.Mode&special != 0:
		return false
	case in.Valid&wire.SetUID != 0 && in.UID != at.UID && !root:
		return false
	case in.Valid&wire.SetGID != 0 && in.GID != at.GID && !root && c.GID != in.GID && !slices.Contains(c.Groups, in.GID):
		return false
	}
	return true
}

// applyHeld applies a held attribute change to the predicted attributes.
func applyHeld(at *wire.Attr, sa *wire.SetAttr, now int64) {
	if sa.Valid&wire.SetMode != 0 {
		at.Mode = at.Mode&syscall.S_IFMT | sa.Mode&0o7777
	}
	if sa.Valid&wire.SetUID != 0 {
		at.UID = sa.UID
	}
	if sa.Valid&wire.SetGID != 0 {
		at.GID = sa.GID
	}
	switch {
	case sa.Valid&wire.SetAtimeNow != 0:
		at.Atime = now
	case sa.Valid&wire.SetAtime != 0:
		at.Atime = sa.Atime
	}
	switch {
	case sa.Valid&wire.SetMtimeNow != 0:
		at.Mtime = now
	case sa.Valid&wire.SetMtime != 0:
		at.Mtime = sa.Mtime
	}
	at.Ctime = now
}

// heldAttr returns the predicted attributes while the file holds
// operations back.
func (f *file) heldAttr() (wire.Attr, bool) {
	if !f.holdOn.Load() {
		return wire.Attr{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hold.attr, f.hold.on
}

// commit sends what the file holds in one Commit and waits for the server
// to have applied it; sent is false when it held nothing.
func (f *file) commit(ctx context.Context) (sent bool, err error) {
	if !f.holdOn.Load() {
		return false, nil
	}
	if seq, err := f.pendingNew(); err != nil || seq != 0 {
		// Created here (newfile.go): its name and what it holds go in one
		// CommitNew, with the changes queued before it.
		if err == nil {
			err = f.sendNew(ctx)
		}
		if err != nil {
			return true, err
		}
		sent = true
	}
	f.commitMu.Lock()
	defer f.commitMu.Unlock()
	f.mu.Lock()
	ops, data := f.hold.ops, f.hold.data
	f.hold.ops, f.hold.data = nil, nil
	f.mu.Unlock()
	if len(ops) == 0 {
		return sent, nil
	}
	defer f.a.holds.bytes.Add(-int64(len(data)))
	seq := f.a.writeSeq.Add(1)
	cctx := vfs.WithCaller(ctx, f.caller)
	var rel []uint64
	var relGen uint64
	r, err := f.call(ctx, func(h uint64) wire.Msg {
		// Releases of files closed before ride along (release.go); on a
		// broken connection the server closed them with it.
		f.mu.Lock()
		relGen = f.gen
		f.mu.Unlock()
		rel = f.a.releases.take(relGen)
		return as(cctx, &wire.Commit{Seq: seq, Handle: h, Ops: ops, Release: rel, Data: data})
	}, true)
	if errors.Is(err, syscall.ENOSYS) {
		f.a.holds.noCommit.Store(true)
		for _, h := range rel {
			if !f.a.releases.add(relGen, h) {
				f.a.sess.call(ctx, &wire.Release{Handle: h}, false)
			}
		}
		r, err = f.replay(ctx, ops, data)
	}
	if err != nil {
		var re *wire.RemoteError
		if !errors.As(err, &re) {
			// Not the server's answer (it could not be reached, the
			// connection broke, the file could not be reopened): nothing
			// is lost; the operations go again, first, with the next
			// commit (each is idempotent: positional writes, absolute
			// attributes), and this one's caller gets the error.
			f.mu.Lock()
			f.hold.ops = append(ops, f.hold.ops...)
			f.hold.data = append(data, f.hold.data...)
			f.mu.Unlock()
			f.a.holds.bytes.Add(int64(len(data)))
			return true, err
		}
		// The server applied the operations up to the one that failed:
		// the rest are dropped, and every later close and fsync of the
		// file reports it (a close in another process sharing the open
		// file — a child's close-on-exec — must not be the only one).
		f.mu.Lock()
		f.holdLost = err
		f.mu.Unlock()
		return true, err
	}
	ar, ok := r.(*wire.AttrReply)
	if !ok {
		return true, fmt.Errorf("commit: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	f.a.noteVersion(ar.Attr.Ino, ar.Attr.Version)
	f.mu.Lock()
	f.attr = ar.Attr
	if len(f.hold.ops) == 0 {
		f.hold.attr = ar.Attr // nothing held since: the server's are the true ones
	}
	f.mu.Unlock()
	return true, nil
}

// replay sends held operations one by one, to a server without Commit.
func (f *file) replay(ctx context.Context, ops []wire.CommitOp, data []byte) (wire.Msg, error) {
	var r wire.Msg
	var err error
	cctx := vfs.WithCaller(ctx, f.caller)
	for _, op := range ops {
		if op.Attr == nil {
			seq := f.a.writeSeq.Add(1)
			p := data[:op.Len]
			data = data[op.Len:]
			r, err = f.call(ctx, func(h uint64) wire.Msg {
				return &wire.WriteSeq{Seq: seq, Handle: h, Offset: op.Offset, Data: p}
			}, true)
		} else {
			sa := *op.Attr
			sa.Path = f.path
			r, err = f.call(ctx, func(h uint64) wire.Msg { sa.Handle = h; return as(cctx, &sa) }, true)
		}
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// endHold sends what the file holds and ends its holding. With quiet, a
// failure is kept for the file's next operation (Flush reports it).
func (f *file) endHold(ctx context.Context, quiet bool) error {
	if !f.holdOn.Load() {
		return f.takeHoldErr()
	}
	_, err := f.commit(ctx)
	f.mu.Lock()
	if len(f.hold.ops) > 0 {
		// Put back (commit): the file goes on holding them, and the next
		// close, fsync or release sends them again.
		if quiet {
			f.holdErr, err = err, nil
		}
		f.mu.Unlock()
		return err
	}
	wasOn := f.hold.on
	f.hold.on = false
	ino := f.attr.Ino
	if err != nil && quiet {
		f.holdErr = err
		err = nil
	}
	f.mu.Unlock()
	f.holdOn.Store(false)
	if wasOn {
		f.a.holds.unlist(f, ino)
	}
	if err != nil {
		return err
	}
	return f.takeHoldErr()
}

// takeHoldErr returns the failure of held operations: once, when they
// were sent on another operation's behalf; at every call, when the server
// refused one (holdLost).
func (f *file) takeHoldErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.holdErr
	f.holdErr = nil
	if err == nil {
		err = f.holdLost
	}
	return err
}
