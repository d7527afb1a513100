package agent

import (
	"context"
	"errors"
	"fmt"
	"path"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Files created here (issue 9, `tar x`). Under a directory's delegation
// with the server's verdict for the caller (deleg.go), a create of a name
// the agent knows is absent (its listing of the directory: nobody else can
// add one meanwhile, so O_EXCL holds) is answered at once, into one of the
// new, unnamed files the server reserved for that caller in that
// directory: the inode number and generation the kernel is given are the
// file's for good, its owner and group those a create by the caller there
// gives (the server made it as the caller), its mode the one asked less
// the caller's umask (the verdict excludes directories with default ACLs).
// The file holds its writes and its owner's attribute changes (pipe.go),
// and its close sends them in one CommitNew with the name: close still
// returns only after the server holds the data (close-to-open), and a
// refusal (the name was made directly in the export, a full disk) fails
// the close and every later close and fsync. Anything that needs the file
// on the server earlier (an fsync, a lock, an open elsewhere in the mount,
// a rename, a listing of the directory, a recall) sends it first.

// newFile is what a file created here still owes the server.
type newFile struct {
	token uint64 // its reserved file
	mode  uint32 // the mode asked; the server applies the umask
	gen   uint64 // the session generation of the reservation
	op    *pendOp
	err   error // its CommitNew was refused: every later operation fails with it
}

// createHere answers a create of p here when its outcome is certain; ok
// is false when it must go to the server.
func (a *Agent) createHere(ctx context.Context, p string, flags, mode uint32) (*file, wire.Attr, bool) {
	if !a.pend.enabled() || !plainCreate(flags, mode) || len(path.Base(p)) > nameMax || p == "" {
		return nil, wire.Attr{}, false
	}
	a.delegs.use.RLock() // deleg.go: the delegation stays until the create is queued
	defer a.delegs.use.RUnlock()
	dir := parentOf(p)
	dl, c, may := a.delegs.may(ctx, dir, wire.MayCreate)
	if !may || !c.HasUmask || !a.knownMissing(p) {
		return nil, wire.Attr{}, false
	}
	a.delegs.ask(ctx, dir, reserveFirst) // more, when half are used
	r, ok := a.delegs.takeReserved(dl, c)
	if !ok {
		return nil, wire.Attr{}, false
	}
	now := time.Now().UnixNano()
	at := r.Attr
	at.Mode = syscall.S_IFREG | mode&^c.Umask&0o777
	at.Nlink, at.Size, at.Blocks = 1, 0, 0
	at.Atime, at.Mtime, at.Ctime = now, now, now
	f := &file{a: a, path: p, flags: flags, attr: at, caller: c,
		newFile: &newFile{token: r.Token, mode: mode & 0o777, gen: dl.gen}}
	tok := a.cbs.token()
	a.pend.creates.Add(1)
	f.newFile.op = a.pend.push(&pendOp{kind: pendCreate, path: p, caller: c, f: f})
	a.entryChanged(tok, p, true, nil, &at) // names.go: p is in the listing now, with at
	a.delegs.changed(dl, 0)
	a.startHold(f)
	return f, at, true
}

// plainCreate reports whether a create with flags and mode is one a
// reserved file can stand for: for writing, not appending (held writes),
// no set-id or sticky bits (the kernel's own rules clear them).
func plainCreate(flags, mode uint32) bool {
	const special = syscall.S_ISUID | syscall.S_ISGID | syscall.S_ISVTX
	acc := flags & syscall.O_ACCMODE
	return flags&syscall.O_CREAT != 0 && (acc == syscall.O_WRONLY || acc == syscall.O_RDWR) &&
		flags&(syscall.O_APPEND|syscall.O_DIRECTORY) == 0 && mode&special == 0
}

// knownMissing reports whether p is known not to exist.
func (a *Agent) knownMissing(p string) bool {
	_, ok, missing := a.cachedAttrOrMissing(p)
	return !ok && missing
}

// pendingNew returns the queue position of f's create while f is not on
// the server yet (0: it is), and the refusal of its CommitNew if any.
func (f *file) pendingNew() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.newFile == nil {
		return 0, nil
	}
	if f.newFile.err != nil {
		return 0, f.newFile.err
	}
	return f.newFile.op.seq, nil
}

// sendNew sends f to the server (with what the queue holds before it) if
// it is not there yet.
func (f *file) sendNew(ctx context.Context) error {
	seq, err := f.pendingNew()
	if err != nil || seq == 0 {
		return err
	}
	f.a.pend.flushThrough(ctx, seq)
	_, err = f.pendingNew()
	return err
}

// materialize gives file f, created here, its name on the server with its
// held operations (CommitNew) and a handle; from then on it is a file
// holding writes as any other. A refusal is kept (every later close and
// fsync reports it); a reservation lost with its connection is replaced
// by a plain create. Called by the queue's flush, in order.
func (a *Agent) materialize(ctx context.Context, f *file) {
	f.commitMu.Lock()
	defer f.commitMu.Unlock()
	f.mu.Lock()
	nf := f.newFile
	if nf == nil || nf.err != nil {
		f.mu.Unlock()
		return
	}
	ops, data, p := f.hold.ops, f.hold.data, f.path
	f.hold.ops, f.hold.data = nil, nil
	f.mu.Unlock()
	defer a.holds.bytes.Add(-int64(len(data)))
	cctx := vfs.WithCaller(context.WithoutCancel(ctx), f.caller)
	var r wire.Msg
	var gen uint64
	err := errReservationGone
	if _, cur, ok := a.sess.live(); ok && cur == nf.gen {
		m := &wire.CommitNew{Token: nf.token, Path: p, Mode: nf.mode, Seq: a.writeSeq.Add(1), Ops: ops, Data: data,
			Release: a.releases.take(cur)}
		r, gen, err = a.entrySend(cctx, m, p, true)
	}
	var re *wire.RemoteError
	if err != nil && (!errors.As(err, &re) || re.Errno == syscall.EBADF) {
		// The connection (and the reserved file with it) is gone, or the
		// delegation ended before the file was sent: a plain create,
		// exclusive — nobody could make the name meanwhile but by changing
		// the export directly — and the operations held again.
		r, gen, err = a.entrySend(cctx, &wire.Create{Path: p, Flags: syscall.O_WRONLY | syscall.O_CREAT | syscall.O_EXCL,
			Mode: nf.mode, UID: f.caller.UID, GID: f.caller.GID}, p, false)
		if err == nil {
			f.mu.Lock()
			f.hold.ops, f.hold.data = append(ops, f.hold.ops...), append(data, f.hold.data...)
			f.mu.Unlock()
			a.holds.bytes.Add(int64(len(data)))
		}
	}
	a.newFileDone(f, r, gen, err)
}

// errReservationGone: a file created here outlived its connection.
var errReservationGone = errors.New("the reserved file went with its connection")

// newFileDone settles f's materialization: its handle and attributes, or
// its refusal.
func (a *Agent) newFileDone(f *file, r wire.Msg, gen uint64, err error) {
	or, ok := r.(*wire.OpenReply)
	if err == nil && !ok {
		err = fmt.Errorf("create: unexpected reply %v: %w", r.Type(), syscall.EIO)
	}
	f.mu.Lock()
	if err != nil {
		f.newFile.err = err
		f.holdLost = err // every later close and fsync reports it
		f.mu.Unlock()
		a.pend.fails.Add(1)
		a.log.Warn("a file created before the server had it could not be created there", "path", f.path, "err", err)
		return
	}
	f.newFile = nil
	f.h, f.gen = or.Handle, gen
	f.attr = or.Attr
	if len(f.hold.ops) == 0 {
		f.hold.attr = or.Attr
	}
	f.mu.Unlock()
	a.noteVersion(or.Attr.Ino, or.Attr.Version)
	// The attributes cached at the create were the agent's: a file made
	// through the server is not cached either (its next stat asks).
	a.changedIno(or.Attr.Ino)
}
