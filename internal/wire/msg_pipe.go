package wire

// Message types 120–129: creation-heavy work pipelined (issue 9). See
// docs/protocol.md, "Held writes and attribute changes (Commit)".
const (
	TCommit Type = 120 // client → server: a new file's held writes and attribute changes, in order; answered by AttrReply
)

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
// last operation.
type Commit struct {
	Seq    uint64
	Handle uint64
	Ops    []CommitOp
	Data   []byte
}

func newPipeMsg(t Type) Msg {
	if t == TCommit {
		return &Commit{}
	}
	return nil
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
}
func (m *Commit) payload() []byte     { return m.Data }
func (m *Commit) setPayload(p []byte) { m.Data = p }
