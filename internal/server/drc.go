package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// Exactly-once writes (issue 7 point 6), as NFS's duplicate request cache.
//
// A client sends every write as WriteSeq with a sequence number of its own;
// the pair (client session, sequence) names the write, whatever connection
// or handle it arrives on. The session is the one the server issued to the
// client's authenticated connection and that the client presents again
// when it reconnects (wire.Security.Session): a member cannot name another
// client's writes (a boot id, which clients chose and hints broadcast,
// let one answer a victim's next writes with replies of its own). A client resends a write whose reply it lost
// (the connection broke), after reconnecting and reopening the file:
//
//   - Same server process: the reply cache below remembers the outcome of
//     the last writes (ReplyCache entries, all clients together) and
//     answers a resent write from it; a resend that arrives while the
//     original still runs waits for it.
//   - Server restarted: its memory is gone. A positional write applied
//     twice leaves the same bytes (only a write by someone else in between
//     could tell, as with NFS). An append applied twice appends twice, so
//     the server records the names of the last appends to a file in an
//     extended attribute of the file itself (appendsXattr, the last
//     maxAppendIDs appends from any client), written right after the data:
//     a resent append it finds there is answered without applying it
//     again. Only a crash in the instant between the data and the record
//     can still double an append; an export without xattrs (EOPNOTSUPP)
//     has the in-memory cache only, which the server logs once.

// testCrashEnv, set to 1 in a server's environment, makes it kill itself
// right after its first append is applied and recorded, before the reply:
// the end-to-end test of an append retried across a restart uses it.
const testCrashEnv = "COOPFS_TEST_CRASH_AFTER_APPEND"

// appendsXattr holds the ids of the last appends to a file. Clients never
// see it: it is the server's (see docs/protocol.md).
const appendsXattr = "user.coopfs.appends"

// maxAppendIDs is how many appends a file remembers (16 bytes each).
const maxAppendIDs = 32

type writeID struct{ session, seq uint64 }

// drcEntry is a write in the cache: done is closed when its outcome is in.
type drcEntry struct {
	done  chan struct{}
	reply *wire.WriteReply
	err   error
	// the outcome of an EntryBatch or a CommitNew (entrybatch.go)
	batch *wire.EntryDone
	open  *wire.OpenReply
}

// replyCache is the outcome of the last writes, oldest evicted first.
//
// INVARIANT: len(order) == len(m).
type replyCache struct {
	mu    sync.Mutex
	max   int
	m     map[writeID]*drcEntry
	order []writeID
}

func newReplyCache(max int) *replyCache {
	return &replyCache{max: max, m: make(map[writeID]*drcEntry)}
}

// begin returns the entry of id and whether it was there already; a new
// entry must be finished with finish or abort.
func (rc *replyCache) begin(id writeID) (*drcEntry, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if e, ok := rc.m[id]; ok {
		return e, true
	}
	e := &drcEntry{done: make(chan struct{})}
	rc.m[id] = e
	rc.order = append(rc.order, id)
	for len(rc.order) > rc.max {
		old := rc.order[0]
		rc.order = rc.order[1:]
		if oe := rc.m[old]; oe != nil {
			select {
			case <-oe.done:
				delete(rc.m, old)
			default:
				rc.order = append(rc.order, old) // still running: keep it
				if len(rc.order) > 2*rc.max {
					delete(rc.m, old)
					rc.order = rc.order[:len(rc.order)-1]
				}
			}
		}
	}
	return e, false
}

func (rc *replyCache) finish(e *drcEntry, r *wire.WriteReply, err error) {
	e.reply, e.err = r, err
	close(e.done)
}

// abort drops an entry whose write was not attempted (unknown handle: the
// client reopens and sends it again).
func (rc *replyCache) abort(id writeID, e *drcEntry) {
	rc.mu.Lock()
	delete(rc.m, id)
	for i, o := range rc.order {
		if o == id {
			rc.order = append(rc.order[:i], rc.order[i+1:]...)
			break
		}
	}
	rc.mu.Unlock()
	e.err = syscall.EBADF
	close(e.done)
}

// writeSeq applies a write once per (client session, sequence).
func (s *Server) writeSeq(c *wire.Conn, m *wire.WriteSeq) (*wire.AttrReply, error) {
	r, err := s.writeExactlyOnce(c, &wire.WriteBase{Seq: m.Seq, Handle: m.Handle, Offset: m.Offset, Data: m.Data})
	if err != nil {
		return nil, err
	}
	return &wire.AttrReply{Attr: r.Attr}, nil
}

// writeBase is writeSeq, answered with the version before the write too:
// the writer keeps its cached blocks when it is its Base.
func (s *Server) writeBase(c *wire.Conn, m *wire.WriteBase) (*wire.WriteReply, error) {
	return s.writeExactlyOnce(c, m)
}

// writeExactlyOnce applies a write once per (client session, sequence).
func (s *Server) writeExactlyOnce(c *wire.Conn, m *wire.WriteBase) (*wire.WriteReply, error) {
	cl, _ := c.Value.Load().(*client)
	if cl == nil {
		return nil, syscall.EPROTO
	}
	id := writeID{cl.session, m.Seq}
	e, dup := s.drc.begin(id)
	if dup {
		<-e.done
		if errors.Is(e.err, syscall.EBADF) {
			return s.writeExactlyOnce(c, m) // the first try never ran
		}
		s.drcHits.Add(1)
		return e.reply, e.err
	}
	of := s.handles.get(m.Handle, c)
	if of == nil {
		s.drc.abort(id, e)
		return nil, fmt.Errorf("write to unknown handle %d: %w", m.Handle, syscall.EBADF)
	}
	r, err := s.writeOnce(of, id, m)
	s.drc.finish(e, r, err)
	return r, err
}

// writeOnce applies a write that the reply cache did not know; an append
// is first looked up in (and then recorded in) the file's own record.
func (s *Server) writeOnce(of *openFile, id writeID, m *wire.WriteBase) (*wire.WriteReply, error) {
	appending := of.appending
	var ids []byte
	if appending {
		ids = s.appendIDs(of.f)
		if hasAppendID(ids, id) {
			s.drcHits.Add(1)
			r, err := s.fstat(of.f)
			if err != nil {
				return nil, err
			}
			return &wire.WriteReply{Attr: r.Attr}, nil // Prev unknown: 0
		}
	}
	// The append's record is written within the change (it moves the
	// file's ctime): the version after the write covers it.
	r, prev, err := s.mutate(of.f, of.ino, func() error {
		if err := s.killPrivOnWrite(of); err != nil {
			return err
		}
		if err := s.pwrite(of.f, m.Data, m.Offset); err != nil {
			return err
		}
		if appending {
			s.recordAppend(of.f, ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &wire.WriteReply{Attr: r.Attr, Prev: prev}, nil
}

// appendIDs reads a file's record of its last appends.
func (s *Server) appendIDs(f *os.File) []byte {
	buf := make([]byte, 16*maxAppendIDs)
	n, err := unix.Fgetxattr(int(f.Fd()), appendsXattr, buf)
	if err != nil {
		s.noXattrs(err)
		return nil
	}
	return buf[:n-n%16]
}

func hasAppendID(ids []byte, id writeID) bool {
	for i := 0; i+16 <= len(ids); i += 16 {
		if binary.LittleEndian.Uint64(ids[i:]) == id.session && binary.LittleEndian.Uint64(ids[i+8:]) == id.seq {
			return true
		}
	}
	return false
}

// recordAppend adds id to the file's record, dropping the oldest past
// maxAppendIDs. Concurrent appends to one file may lose each other's
// record (read-modify-write); only a crash right then would notice.
func (s *Server) recordAppend(f *os.File, ids []byte, id writeID) {
	var rec [16]byte
	binary.LittleEndian.PutUint64(rec[:], id.session)
	binary.LittleEndian.PutUint64(rec[8:], id.seq)
	ids = append(ids, rec[:]...)
	if len(ids) > 16*maxAppendIDs {
		ids = ids[len(ids)-16*maxAppendIDs:]
	}
	if err := unix.Fsetxattr(int(f.Fd()), appendsXattr, ids, 0); err != nil {
		s.noXattrs(err)
	}
	if s.testCrashAfterAppend && s.crashOnce.CompareAndSwap(false, true) {
		s.log.Error("test hook: crashing right after an append, before its reply")
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
}

// noXattrs logs, once, that appends are exactly-once only within one server
// process on this export.
func (s *Server) noXattrs(err error) {
	if errors.Is(err, unix.ENODATA) {
		return
	}
	s.xattrWarn.Do(func() {
		s.log.Warn("the export cannot store extended attributes: an append retried across a server restart may be applied twice", "err", err)
	})
}
