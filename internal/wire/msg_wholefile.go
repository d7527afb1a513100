package wire

// Message types 170–179: the `wholefile` policy (issue 12, seed 001). See
// docs/protocol.md, "The wholefile policy".
const (
	TWholeOpen       Type = 170 // client → server: an open's commit counter and valid-cache map; answered by WholeOpenReply
	TWholeOpenReply  Type = 171 // the counter, the holders and fetchers of the current version and the first digests to check them
	TWholeHave       Type = 172 // client → server: I now hold this version of the file whole; answered by OK once the map has it
	TWholeCommit     Type = 173 // client → server: close after writes; answered by WholeCommitReply
	TWholeCommitRep  Type = 174 // the new counter, and whether the closer's copy is the valid one
	TWholeDrop       Type = 175 // client → server, one-way: I no longer hold (or fetch) the file whole
	TWholeRead       Type = 176 // requester → holder: a run of blocks of the file at a version; answered by WholeData
	TWholeData       Type = 177 // the blocks, back to back
	TWholeDigests    Type = 178 // client → server: the digests of a run of blocks of the version it fetches; answered by WholeDigestsRep
	TWholeDigestsRep Type = 179 // the digests
)

// WholeOpen follows an open of a large file under the wholefile policy
// (Handle names it). Version is the data version the open saw; Have says
// the client holds that version whole (its copy is current: it becomes a
// holder and fetches nothing). NoData asks for the counter only (an open
// for writing), without holders or digests.
type WholeOpen struct {
	Handle, File, Version uint64
	Have, NoData          bool
}

// WholeHolder is a client in a file's valid-cache map: its id and peer
// listener.
type WholeHolder struct {
	ID     uint32
	Listen string
}

// WholeOpenReply answers WholeOpen: the file's commit counter (handed back
// on commit), the data version the map is for, the holders of that version
// (the opener excluded), the fetchers (clients reading that version whose
// copy is still arriving, in file order) and, when there are holders or
// fetchers, the SHA-256 of the first blocks of that version (what the
// holders must send; WholeDigests asks for the others).
type WholeOpenReply struct {
	Version  uint64
	Commit   uint64
	Holders  []WholeHolder
	Digests  []BlockDigestMsg
	Fetchers []WholeHolder
}

// WholeHave tells the server the client now holds Version of File whole:
// it joins the map if Version is still current. Handle is the client's
// open of the file, if it still has one (0: none): the server hashes the
// file's blocks through it ahead of the next opener. The server answers
// once the map has the client (OK), so that an opener after it finds it.
type WholeHave struct {
	Handle, File, Version uint64
}

// WholeDigests asks for the SHA-256 of Count blocks of File from Index, at
// Version, through the client's open Handle of the file (a fetch's digests
// past those of WholeOpenReply).
type WholeDigests HintsDigest

// WholeDigestsRep answers WholeDigests: the file's data version now (a
// version other than the one asked carries no digests: the file changed)
// and the digests, in block order.
type WholeDigestsRep HintsDigestRep

// WholeCommit is sent on close after writes: Opened is the counter the
// client's open was handed, Version the data version its last write left,
// Whole whether it holds that version whole.
type WholeCommit struct {
	Handle, File, Opened, Version uint64
	Whole                         bool
}

// WholeCommitRep answers WholeCommit: the new counter and whether the
// closer is now the (only) holder.
type WholeCommitRep struct {
	Commit uint64
	Valid  bool
}

// WholeDrop tells the server the client no longer holds File whole.
type WholeDrop struct {
	File uint64
}

// WholeRead asks a holder for Count blocks of File from Index, at
// Version (a holder serves only that version). Wait is how long, in
// milliseconds, a holder whose copy is still arriving may wait for the
// first block to arrive (0: answer at once).
type WholeRead struct {
	File, Version, Index uint64
	Count, Wait          uint32
	Cap                  Capability // the requester's, for this file and version
}

// WholeData answers WholeRead: the blocks back to back in Data, Lens
// giving each one's length. A holder whose copy is still arriving sends
// the blocks it has from Index on, which may be fewer than asked.
type WholeData struct {
	Version uint64
	Lens    []uint32
	Data    []byte
}

func newWholeFileMsg(t Type) Msg {
	switch t {
	case TWholeOpen:
		return &WholeOpen{}
	case TWholeOpenReply:
		return &WholeOpenReply{}
	case TWholeHave:
		return &WholeHave{}
	case TWholeCommit:
		return &WholeCommit{}
	case TWholeCommitRep:
		return &WholeCommitRep{}
	case TWholeDrop:
		return &WholeDrop{}
	case TWholeRead:
		return &WholeRead{}
	case TWholeData:
		return &WholeData{}
	case TWholeDigests:
		return &WholeDigests{}
	case TWholeDigestsRep:
		return &WholeDigestsRep{}
	}
	return nil
}

func (*WholeOpen) Type() Type { return TWholeOpen }
func (m *WholeOpen) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.File)
	e.u64(m.Version)
	e.boolean(m.Have)
	e.boolean(m.NoData)
}
func (m *WholeOpen) decode(d *decoder) {
	m.Handle = d.u64()
	m.File = d.u64()
	m.Version = d.u64()
	m.Have = d.boolean()
	m.NoData = d.boolean()
}

func (*WholeOpenReply) Type() Type { return TWholeOpenReply }
func (m *WholeOpenReply) encode(e *encoder) {
	e.u64(m.Version)
	e.u64(m.Commit)
	encodeList(e, m.Holders, putHolder)
	encodeDigests(e, m.Digests)
	encodeList(e, m.Fetchers, putHolder)
}
func (m *WholeOpenReply) decode(d *decoder) {
	m.Version = d.u64()
	m.Commit = d.u64()
	m.Holders = decodeList(d, 2, getHolder)
	m.Digests = decodeDigests(d)
	m.Fetchers = decodeList(d, 2, getHolder)
}

func putHolder(e *encoder, h WholeHolder) {
	e.u32(h.ID)
	e.str(h.Listen)
}

func getHolder(d *decoder) WholeHolder { return WholeHolder{ID: d.u32(), Listen: d.str()} }

func (*WholeHave) Type() Type { return TWholeHave }
func (m *WholeHave) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.File)
	e.u64(m.Version)
}
func (m *WholeHave) decode(d *decoder) {
	m.Handle = d.u64()
	m.File = d.u64()
	m.Version = d.u64()
}

func (*WholeCommit) Type() Type { return TWholeCommit }
func (m *WholeCommit) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.File)
	e.u64(m.Opened)
	e.u64(m.Version)
	e.boolean(m.Whole)
}
func (m *WholeCommit) decode(d *decoder) {
	m.Handle = d.u64()
	m.File = d.u64()
	m.Opened = d.u64()
	m.Version = d.u64()
	m.Whole = d.boolean()
}

func (*WholeCommitRep) Type() Type { return TWholeCommitRep }
func (m *WholeCommitRep) encode(e *encoder) {
	e.u64(m.Commit)
	e.boolean(m.Valid)
}
func (m *WholeCommitRep) decode(d *decoder) {
	m.Commit = d.u64()
	m.Valid = d.boolean()
}

func (*WholeDrop) Type() Type          { return TWholeDrop }
func (m *WholeDrop) encode(e *encoder) { e.u64(m.File) }
func (m *WholeDrop) decode(d *decoder) { m.File = d.u64() }

func (*WholeRead) Type() Type { return TWholeRead }
func (m *WholeRead) encode(e *encoder) {
	e.u64(m.File)
	e.u64(m.Version)
	e.u64(m.Index)
	e.u32(m.Count)
	e.u32(m.Wait)
	encodeCap(e, &m.Cap)
}
func (m *WholeRead) decode(d *decoder) {
	m.File = d.u64()
	m.Version = d.u64()
	m.Index = d.u64()
	m.Count = d.u32()
	m.Wait = d.u32()
	decodeCap(d, &m.Cap)
}

func (*WholeDigests) Type() Type          { return TWholeDigests }
func (m *WholeDigests) encode(e *encoder) { (*HintsDigest)(m).encode(e) }
func (m *WholeDigests) decode(d *decoder) { (*HintsDigest)(m).decode(d) }

func (*WholeDigestsRep) Type() Type          { return TWholeDigestsRep }
func (m *WholeDigestsRep) encode(e *encoder) { (*HintsDigestRep)(m).encode(e) }
func (m *WholeDigestsRep) decode(d *decoder) { (*HintsDigestRep)(m).decode(d) }

func (*WholeData) Type() Type { return TWholeData }
func (m *WholeData) encode(e *encoder) {
	e.u64(m.Version)
	e.u64(uint64(len(m.Lens)))
	for _, l := range m.Lens {
		e.u32(l)
	}
}
func (m *WholeData) decode(d *decoder) {
	m.Version = d.u64()
	if n := d.count(1); n > 0 {
		m.Lens = make([]uint32, n)
		for i := range m.Lens {
			m.Lens[i] = d.u32()
		}
	}
}
func (m *WholeData) payload() []byte     { return m.Data }
func (m *WholeData) setPayload(p []byte) { m.Data = p }
