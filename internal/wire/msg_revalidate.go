package wire

// Message types 152–159: attributes cached on a client's disk, revalidated
// in bulk after a restart (issue 11, seed 003). See docs/protocol.md,
// "Bulk revalidation".
const (
	TRevalidate      Type = 152 // client → server: these paths, as I last knew them; answered by RevalidateReply
	TRevalidateReply Type = 153 // server → client: which are unchanged, the new attributes of the others
)

// RevalidateItem is a path and what the client last knew of it: the
// object's inode, version (regular files), mtime and ctime (every object:
// a directory's change their entries' too), and whether it kept a
// directory's listing (List).
type RevalidateItem struct {
	Path         string
	Ino, Version uint64
	Mtime, Ctime int64
	List         bool
}

// Revalidate asks the server which of Items are unchanged. On a connection
// registered for callbacks the server grants a callback on every object it
// answers for (a directory's entries too when List and unchanged), as for
// a lookup: the client may answer from what it kept until a break.
type Revalidate struct {
	Items []RevalidateItem
}

// Revalidation outcomes, one per item.
const (
	RevalidSame    uint8 = 0 // unchanged: what the client kept holds
	RevalidChanged uint8 = 1 // changed: its attributes are in Attrs
	RevalidGone    uint8 = 2 // the path names nothing (or cannot be checked)
)

// RevalidateReply has one Status per item and, in item order, the
// attributes of the items RevalidChanged.
type RevalidateReply struct {
	Status []uint8
	Attrs  []Attr
	// Grants (not sent) are the attributes of every object the reply
	// vouches for, and whether a directory's listing is covered: the
	// server's callback grant reads them.
	Grants []RevalidGrant
}

// RevalidGrant is an object a RevalidateReply vouches for (not sent).
type RevalidGrant struct {
	Attr Attr
	List bool
}

func newRevalidateMsg(t Type) Msg {
	switch t {
	case TRevalidate:
		return &Revalidate{}
	case TRevalidateReply:
		return &RevalidateReply{}
	}
	return nil
}

func (*Revalidate) Type() Type { return TRevalidate }
func (m *Revalidate) encode(e *encoder) {
	e.u64(uint64(len(m.Items)))
	for _, it := range m.Items {
		e.str(it.Path)
		e.u64(it.Ino)
		e.u64(it.Version)
		e.i64(it.Mtime)
		e.i64(it.Ctime)
		e.boolean(it.List)
	}
}
func (m *Revalidate) decode(d *decoder) {
	n := d.count(4)
	m.Items = make([]RevalidateItem, n)
	for i := range m.Items {
		it := &m.Items[i]
		it.Path, it.Ino, it.Version = d.str(), d.u64(), d.u64()
		it.Mtime, it.Ctime, it.List = d.i64(), d.i64(), d.boolean()
	}
}

func (*RevalidateReply) Type() Type { return TRevalidateReply }
func (m *RevalidateReply) encode(e *encoder) {
	e.bytes(m.Status)
	e.u64(uint64(len(m.Attrs)))
	for i := range m.Attrs {
		encodeAttr(e, &m.Attrs[i])
	}
}
func (m *RevalidateReply) decode(d *decoder) {
	m.Status = append([]uint8(nil), d.raw(maxList)...) // the frame buffer is reused
	n := d.count(13)
	m.Attrs = make([]Attr, n)
	for i := range m.Attrs {
		decodeAttr(d, &m.Attrs[i])
	}
}
