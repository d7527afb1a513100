package wire

// Message types 141–149: a writer keeps its own cached blocks across its
// own write-through (issue 10). See docs/protocol.md, "Writes that keep
// the writer's cache".
const (
	TWriteBase  Type = 141 // client → server: WriteSeq, naming the version the client's cached blocks belong to
	TWriteReply Type = 142 // server → client: the file's attributes after the write, and its version just before
)

// WriteBase is WriteSeq (applied once per client boot id and Seq) with
// Base, the version of the file the writer's cached blocks belong to. The
// server answers WriteReply.
type WriteBase struct {
	Seq    uint64
	Handle uint64
	Offset uint64
	Base   uint64
	Data   []byte
}

// WriteReply answers WriteBase: Attr is the file after the write (its new
// version), Prev the version the file had right before this write, taken
// with no other change through the server in between. Prev == Base tells
// the writer that nobody changed the file since its cached blocks were
// read: they hold the new version too, except the bytes it just wrote.
type WriteReply struct {
	Attr Attr
	Prev uint64
}

func newWriteBaseMsg(t Type) Msg {
	switch t {
	case TWriteBase:
		return &WriteBase{}
	case TWriteReply:
		return &WriteReply{}
	}
	return nil
}

func (*WriteBase) Type() Type { return TWriteBase }
func (m *WriteBase) encode(e *encoder) {
	e.u64(m.Seq)
	e.u64(m.Handle)
	e.u64(m.Offset)
	e.u64(m.Base)
}
func (m *WriteBase) decode(d *decoder) {
	m.Seq = d.u64()
	m.Handle = d.u64()
	m.Offset = d.u64()
	m.Base = d.u64()
}
func (m *WriteBase) payload() []byte     { return m.Data }
func (m *WriteBase) setPayload(p []byte) { m.Data = p }

func (*WriteReply) Type() Type { return TWriteReply }
func (m *WriteReply) encode(e *encoder) {
	encodeAttr(e, &m.Attr)
	e.u64(m.Prev)
}
func (m *WriteReply) decode(d *decoder) {
	decodeAttr(d, &m.Attr)
	m.Prev = d.u64()
}
