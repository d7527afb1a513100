package wire

// Message types 160–169: metadata and small files in fewer round trips
// (issue 9). See docs/protocol.md, "Opens that bring the data".
const (
	TOpenRead Type = 160 // client → server: open for reading; the reply may carry the file's data
	TOpenData Type = 161 // server → client: OpenRead's reply (data: the whole file, when it carries it)
)

// OpenRead is an Open for reading (Flags: O_RDONLY, no O_CREAT, O_TRUNC)
// whose reply brings, for a regular file of at most Max bytes that fits
// one block, the file's data at the version the reply's attributes name:
// a cold read of a small file costs one round trip instead of an open, a
// getattr and a block read. Lazy says the client needs no handle when the
// reply carries the whole file (it holds a callback on it and reads it
// from its cache; it reopens by path if it ever needs a handle).
type OpenRead struct {
	Path  string
	Flags uint32
	Max   uint32
	Lazy  bool
}

// OpenData is the reply of OpenRead: the handle (0 when the server kept
// none: Lazy and the data came whole), the file's attributes and, when
// HasData, the whole file in the data section (Attr.Size bytes), at
// Attr.Version. Layer says where the server found the data (LayerMemory,
// LayerDisk), as a BlockReply's does.
type OpenData struct {
	Handle  uint64
	Attr    Attr
	HasData bool
	Layer   uint8
	Data    []byte
}

func newMetaMsg(t Type) Msg {
	switch t {
	case TOpenRead:
		return &OpenRead{}
	case TOpenData:
		return &OpenData{}
	}
	return nil
}

func (*OpenRead) Type() Type { return TOpenRead }
func (m *OpenRead) encode(e *encoder) {
	e.str(m.Path)
	e.u32(m.Flags)
	e.u32(m.Max)
	e.boolean(m.Lazy)
}
func (m *OpenRead) decode(d *decoder) {
	m.Path = d.str()
	m.Flags = d.u32()
	m.Max = d.u32()
	m.Lazy = d.boolean()
}

func (*OpenData) Type() Type { return TOpenData }
func (m *OpenData) encode(e *encoder) {
	e.u64(m.Handle)
	encodeAttr(e, &m.Attr)
	e.boolean(m.HasData)
	e.u32(uint32(m.Layer))
}
func (m *OpenData) decode(d *decoder) {
	m.Handle = d.u64()
	decodeAttr(d, &m.Attr)
	m.HasData = d.boolean()
	m.Layer = uint8(d.u32())
}
func (m *OpenData) payload() []byte     { return m.Data }
func (m *OpenData) setPayload(p []byte) { m.Data = p }
