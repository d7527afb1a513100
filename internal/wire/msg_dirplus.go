package wire

// Message types 110–119: directory listings that carry attributes (issue 9,
// READDIRPLUS). See docs/protocol.md, "Directory listings with attributes".
const (
	TReadDirPlus      Type = 110 // client → server: a page of a directory with each entry's attributes
	TReadDirPlusReply Type = 111 // server → client: the page
)

// ReadDirPlus is ReadDir whose reply also carries every entry's attributes,
// as a Lookup of the entry would return them, so that a listing needs no
// lookup per entry.
type ReadDirPlus struct {
	Path   string
	Offset uint64
}

// DirEntryPlus is a directory entry with its attributes. HasAttr is false
// when the server could not stat the entry (removed since the listing, or
// the caller may not search the directory): the client looks it up then.
type DirEntryPlus struct {
	DirEntry
	HasAttr bool
	Attr    Attr
}

// ReadDirPlusReply is one page of a directory with attributes; More says
// another page follows.
type ReadDirPlusReply struct {
	Entries []DirEntryPlus
	More    bool
}

func newDirPlusMsg(t Type) Msg {
	switch t {
	case TReadDirPlus:
		return &ReadDirPlus{}
	case TReadDirPlusReply:
		return &ReadDirPlusReply{}
	case TReleaseBatch:
		return &ReleaseBatch{}
	}
	return nil
}

func (*ReadDirPlus) Type() Type { return TReadDirPlus }
func (m *ReadDirPlus) encode(e *encoder) {
	e.str(m.Path)
	e.u64(m.Offset)
}
func (m *ReadDirPlus) decode(d *decoder) {
	m.Path = d.str()
	m.Offset = d.u64()
}

func (*ReadDirPlusReply) Type() Type { return TReadDirPlusReply }
func (m *ReadDirPlusReply) encode(e *encoder) {
	e.u64(uint64(len(m.Entries)))
	for i := range m.Entries {
		de := &m.Entries[i]
		e.str(de.Name)
		e.u64(de.Ino)
		e.u32(de.Mode)
		e.boolean(de.HasAttr)
		if de.HasAttr {
			encodeAttr(e, &de.Attr)
		}
	}
	e.boolean(m.More)
}
func (m *ReadDirPlusReply) decode(d *decoder) {
	n := d.count(4)
	m.Entries = make([]DirEntryPlus, n)
	for i := range m.Entries {
		de := &m.Entries[i]
		de.Name, de.Ino, de.Mode = d.str(), d.u64(), d.u32()
		if de.HasAttr = d.boolean(); de.HasAttr {
			decodeAttr(d, &de.Attr)
		}
	}
	m.More = d.boolean()
}

// TReleaseBatch is in the 110–119 range too (see ReleaseBatch).
const TReleaseBatch Type = 112 // client → server, one-way: handles to close

// ReleaseBatch closes several handles, as a Release of each would; it is
// one-way (nobody waits for a release: the kernel does not make close(2)
// wait for it either). Unknown handles are skipped.
type ReleaseBatch struct{ Handles []uint64 }

func (*ReleaseBatch) Type() Type { return TReleaseBatch }
func (m *ReleaseBatch) encode(e *encoder) {
	e.u64(uint64(len(m.Handles)))
	for _, h := range m.Handles {
		e.u64(h)
	}
}
func (m *ReleaseBatch) decode(d *decoder) {
	n := d.count(1)
	m.Handles = make([]uint64, n)
	for i := range m.Handles {
		m.Handles[i] = d.u64()
	}
}
