package wire

// Message types 120–129: creation-heavy work pipelined (issue 9). See
// docs/protocol.md, "Held writes and attribute changes (Commit)".
const (
	TCommit      Type = 120 // client → server: a new file's held writes and attribute changes, in order; answered by AttrReply
	TParentAttrs Type = 121 // client → server: reply to entry changes on this connection with EntryReply; answered with OK
	TEntryReply  Type = 122 // server → client: an entry change's reply with the parent directory's attributes
)

// ParentAttrs asks the server to answer, from now on and on this
// connection only, every successful Create, Mkdir, Symlink, Mknod, Link,
// Unlink and Rmdir with an EntryReply: the usual reply plus the attributes
// of the directory the entry is in, as they are right after the change.
// The kernel drops a directory's attributes whenever an entry in it
// changes, and asks for them again at the next permission check (the next
// create or unlink in it); with them in the reply the client answers that
// itself. A server that does not know it answers ENOSYS. It also says
// that the server knows Commit: a client sends Commits only on a
// connection whose ParentAttrs was answered OK.
type ParentAttrs struct{}

// EntryReply is the reply of an entry change under ParentAttrs: what the
// request's usual reply says (an open file's handle and attributes for
// Create, the entry's attributes for Mkdir, Symlink, Mknod and Link,
// nothing for Unlink and Rmdir) and, when HasParent, the parent directory's
// attributes after the change.
type EntryReply struct {
	Open      bool   // the usual reply is an OpenReply (Handle and Attr)
	HasAttr   bool   // the usual reply carries Attr (OpenReply or AttrReply), else it is OK
	Handle    uint64 // Open: the handle
	Attr      Attr
	HasParent bool
	Parent    Attr
}

// CommitOp is one operation of a Commit: a write of Len bytes at Offset
// (its bytes are the next Len of the Commit's data section), or, when Attr
// is set, an attribute change through the handle (Attr's Path, Handle and
// Size are not used: a truncation is never held).
type CommitOp struct {
	Offset uint64
	Len    uint32
	Attr   *SetAttr
}

// Commit carries what a client held back of a file it created and has
// open through Handle: the writes and attribute changes (chmod, chown,
// utimens) made since, applied by the server in order, stopping at the
// first that fails. The close that sends it returns only after the reply:
// the server holds the data then (close-to-open). Seq names the commit
// for exactly-once, as WriteSeq's does (a resent commit is answered from
// the server's reply cache). The reply is the file's attributes after the
// last operation. Release lists handles of files closed before (never
// Handle), which the server closes first, whatever the commit's outcome,
// as a ReleaseBatch would (the client's queued releases ride along instead
// of a message of their own).
type Commit struct {
	Seq     uint64
	Handle  uint64
	Ops     []CommitOp
	Release []uint64
	Data    []byte
}

func newPipeMsg(t Type) Msg {
	switch t {
	case TCommit:
		return &Commit{}
	case TParentAttrs:
		return &ParentAttrs{}
	case TEntryReply:
		return &EntryReply{}
	}
	return nil
}

func (*ParentAttrs) Type() Type          { return TParentAttrs }
func (m *ParentAttrs) encode(e *encoder) {}
func (m *ParentAttrs) decode(d *decoder) {}

func (*EntryReply) Type() Type { return TEntryReply }
func (m *EntryReply) encode(e *encoder) {
	e.boolean(m.Open)
	e.boolean(m.HasAttr)
	e.u64(m.Handle)
	if m.HasAttr {
		encodeAttr(e, &m.Attr)
	}
	e.boolean(m.HasParent)
	if m.HasParent {
		encodeAttr(e, &m.Parent)
	}
}
func (m *EntryReply) decode(d *decoder) {
	m.Open = d.boolean()
	m.HasAttr = d.boolean()
	m.Handle = d.u64()
	if m.HasAttr {
		decodeAttr(d, &m.Attr)
	}
	if m.HasParent = d.boolean(); m.HasParent {
		decodeAttr(d, &m.Parent)
	}
}

// Usual is the reply the request would have had without ParentAttrs.
func (m *EntryReply) Usual() Msg {
	switch {
	case m.Open:
		return &OpenReply{Handle: m.Handle, Attr: m.Attr}
	case m.HasAttr:
		return &AttrReply{Attr: m.Attr}
	}
	return &OK{}
}

func (*Commit) Type() Type { return TCommit }
func (m *Commit) encode(e *encoder) {
	e.u64(m.Seq)
	e.u64(m.Handle)
	e.u64(uint64(len(m.Ops)))
	for i := range m.Ops {
		op := &m.Ops[i]
		e.boolean(op.Attr != nil)
		if op.Attr == nil {
			e.u64(op.Offset)
			e.u32(op.Len)
			continue
		}
		a := op.Attr
		e.u32(a.Valid)
		e.u32(a.Mode)
		e.u32(a.UID)
		e.u32(a.GID)
		e.i64(a.Atime)
		e.i64(a.Mtime)
	}
	e.u64(uint64(len(m.Release)))
	for _, h := range m.Release {
		e.u64(h)
	}
}
func (m *Commit) decode(d *decoder) {
	m.Seq = d.u64()
	m.Handle = d.u64()
	n := d.count(2)
	m.Ops = make([]CommitOp, n)
	for i := range m.Ops {
		op := &m.Ops[i]
		if !d.boolean() {
			op.Offset = d.u64()
			op.Len = d.u32()
			continue
		}
		op.Attr = &SetAttr{Valid: d.u32(), Mode: d.u32(), UID: d.u32(), GID: d.u32(), Atime: d.i64(), Mtime: d.i64()}
	}
	m.Release = make([]uint64, d.count(1))
	for i := range m.Release {
		m.Release[i] = d.u64()
	}
}
func (m *Commit) payload() []byte     { return m.Data }
func (m *Commit) setPayload(p []byte) { m.Data = p }
