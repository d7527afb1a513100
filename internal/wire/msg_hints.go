package wire

// Message types 130–149: the `hints` policy (issue 10, seed 002). See
// docs/protocol.md, "The hints policy".
const (
	THintsPeers      Type = 130 // server → client, one-way: the clients of the cluster (id, boot id, peer listener)
	THintsOpen       Type = 131 // client → server: an open's hint hand-out; answered by HintsReply
	THintsReply      Type = 132 // the hints of the last client that opened a file
	THintsExport     Type = 133 // server → last opener: your hints for this file; answered by HintsReply
	THintsRead       Type = 134 // requester → hinted holder: this block, please; answered by HintsBlock
	THintsBlock      Type = 135 // the block, or where to look next
	THintsForward    Type = 136 // client → peer: an evicted master copy (best-guess target); answered by HintsForwardAck
	THintsForwardAck Type = 137 // the target's oldest block (the age exchange)
	THintsDiscard    Type = 138 // client → server, one-way: a young master copy for the discard cache
	THintsDigest     Type = 139 // client → server: the SHA-256s of a run of blocks at one version; answered by HintsDigestRep
	THintsDigestRep  Type = 140 // the digests
)

// HintsMember is one client of the cluster as the hints policy knows it.
// Its ID is stable per peer listener address (the seed names clients by
// host name): a client restarted on the same address keeps its id in a new
// life (boot id), and hints naming its old life are dropped.
type HintsMember struct {
	ID     uint32
	Boot   uint64
	Listen string // its peer listener
}

// HintsPeers is the server's list of connected clients (the seed's "list
// of clients in the distributed file system" that a (re)started client gets
// from the manager): the whole list to a client that joins or asks, and a
// Delta to the others when a client joins (Members) or leaves (Gone).
// Seq numbers the membership changes: a delta carries its change's number,
// a whole list the number of the last change it holds. It grows across
// server restarts (it starts from the server's boot id), so a client can
// tell a list older than what it applied, and a change it missed.
type HintsPeers struct {
	Members []HintsMember
	You     uint32 // the receiver's own id (0: not a member yet)
	Delta   bool
	Gone    []uint32
	Seq     uint64
}

// HintsOpen asks the server, right after an open, for the hints of the last
// client that opened the file (the server asks that client with
// HintsExport). Version is the file version the open saw.
type HintsOpen struct {
	Handle  uint64
	File    uint64
	Version uint64
}

// HintsExport asks a client for its hints for File.
type HintsExport struct {
	File uint64
}

// BlockHintMsg is one location hint: block Index of the file probably has
// its master copy at Holder (in life Boot), since Since (a stamp).
type BlockHintMsg struct {
	Index  uint64
	Holder uint32
	Boot   uint64
	Since  int64
}

// BlockDigestMsg is the SHA-256 of one block of a file at a version.
type BlockDigestMsg struct {
	Index  uint64
	Digest []byte
}

// HintsReply carries hints for one file: from client From (life FromBoot),
// and, in the server's answer to HintsOpen, the digests it knows of the
// hinted blocks at Version (peers' blocks are checked against them).
type HintsReply struct {
	From     uint32
	FromBoot uint64
	Version  uint64
	Hints    []BlockHintMsg
	Digests  []BlockDigestMsg
}

// HintsRead asks a client for a block its hint says it holds. Hops counts
// the clients visited so far (the bound keeps hint cycles finite).
type HintsRead struct {
	File, Index, Version uint64
	Hops                 uint32
	From                 uint32
	FromBoot             uint64
	Cap                  Capability // the requester's, for this file and version
}

// HintsBlock kinds.
const (
	HintsHere   uint8 = 0 // Data is the block
	HintsTry    uint8 = 1 // not here: the holder's own hint says To (life ToBoot, listener ToAddr)
	HintsServer uint8 = 2 // not here and no hint: ask the server
)

// HintsBlock answers a HintsRead.
type HintsBlock struct {
	Kind    uint8
	Version uint64
	Master  bool // the copy served is the holder's master copy
	Holder  uint32
	Boot    uint64 // the holder's boot id
	To      uint32
	ToBoot  uint64
	ToAddr  string
	Data    []byte
}

// HintsForward hands an evicted master copy to the peer believed to hold
// the oldest block (best-guess replacement). Stamp is the block's age;
// FromOldest the sender's oldest block (its half of the age exchange).
type HintsForward struct {
	File, Index, Version uint64
	Stamp                int64
	FromOldest           int64
	From                 uint32
	FromBoot             uint64
	Cap                  Capability // one the server issued for this file and version: the copy's provenance
	Data                 []byte
}

// HintsForwardAck is the target's half of the age exchange: the age of its
// oldest block, in its life Boot; Kept says whether it kept the block.
type HintsForwardAck struct {
	Oldest int64
	Boot   uint64
	Kept   bool
}

// HintsDiscard sends a young master copy, evicted to make room for a
// forwarded one, to the server's discard cache.
type HintsDiscard struct {
	File, Index, Version uint64
	Stamp                int64
	Cap                  Capability // one the server issued for this file and version
	Data                 []byte
}

// HintsDigest asks the server for the digests of Count blocks from Index
// at Version of the file open as Handle, to check blocks peers serve (the
// server may answer fewer: it bounds the run, and stops at the end of the
// file).
type HintsDigest struct {
	Handle, File, Index, Version uint64
	Count                        uint32
	Cap                          Capability // instead of a Handle: a forwarded copy's provenance
}

// HintsDigestRep answers HintsDigest; Version is the file's current
// version (no digests when it is not the one asked for).
type HintsDigestRep struct {
	Version uint64
	Digests []BlockDigestMsg
}

func newHintsMsg(t Type) Msg {
	switch t {
	case THintsPeers:
		return &HintsPeers{}
	case THintsOpen:
		return &HintsOpen{}
	case THintsReply:
		return &HintsReply{}
	case THintsExport:
		return &HintsExport{}
	case THintsRead:
		return &HintsRead{}
	case THintsBlock:
		return &HintsBlock{}
	case THintsForward:
		return &HintsForward{}
	case THintsForwardAck:
		return &HintsForwardAck{}
	case THintsDiscard:
		return &HintsDiscard{}
	case THintsDigest:
		return &HintsDigest{}
	case THintsDigestRep:
		return &HintsDigestRep{}
	}
	return nil
}

func (*HintsPeers) Type() Type { return THintsPeers }
func (m *HintsPeers) encode(e *encoder) {
	e.u64(uint64(len(m.Members)))
	for _, p := range m.Members {
		e.u32(p.ID)
		e.u64(p.Boot)
		e.str(p.Listen)
	}
	e.u32(m.You)
	e.boolean(m.Delta)
	e.u64(uint64(len(m.Gone)))
	for _, id := range m.Gone {
		e.u32(id)
	}
	e.u64(m.Seq)
}
func (m *HintsPeers) decode(d *decoder) {
	n := d.count(3)
	m.Members = make([]HintsMember, n)
	for i := range m.Members {
		m.Members[i] = HintsMember{ID: d.u32(), Boot: d.u64(), Listen: d.str()}
	}
	m.You = d.u32()
	m.Delta = d.boolean()
	if n := d.count(1); n > 0 {
		m.Gone = make([]uint32, n)
		for i := range m.Gone {
			m.Gone[i] = d.u32()
		}
	}
	m.Seq = d.u64()
}

func (*HintsOpen) Type() Type { return THintsOpen }
func (m *HintsOpen) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.File)
	e.u64(m.Version)
}
func (m *HintsOpen) decode(d *decoder) {
	m.Handle = d.u64()
	m.File = d.u64()
	m.Version = d.u64()
}

func (*HintsExport) Type() Type          { return THintsExport }
func (m *HintsExport) encode(e *encoder) { e.u64(m.File) }
func (m *HintsExport) decode(d *decoder) { m.File = d.u64() }

func (*HintsReply) Type() Type { return THintsReply }
func (m *HintsReply) encode(e *encoder) {
	e.u32(m.From)
	e.u64(m.FromBoot)
	e.u64(m.Version)
	e.u64(uint64(len(m.Hints)))
	for _, h := range m.Hints {
		e.u64(h.Index)
		e.u32(h.Holder)
		e.u64(h.Boot)
		e.i64(h.Since)
	}
	encodeDigests(e, m.Digests)
}
func (m *HintsReply) decode(d *decoder) {
	m.From = d.u32()
	m.FromBoot = d.u64()
	m.Version = d.u64()
	if n := d.count(4); n > 0 {
		m.Hints = make([]BlockHintMsg, n)
		for i := range m.Hints {
			m.Hints[i] = BlockHintMsg{Index: d.u64(), Holder: d.u32(), Boot: d.u64(), Since: d.i64()}
		}
	}
	m.Digests = decodeDigests(d)
}

func (*HintsRead) Type() Type { return THintsRead }
func (m *HintsRead) encode(e *encoder) {
	e.u64(m.File)
	e.u64(m.Index)
	e.u64(m.Version)
	e.u32(m.Hops)
	e.u32(m.From)
	e.u64(m.FromBoot)
	encodeCap(e, &m.Cap)
}
func (m *HintsRead) decode(d *decoder) {
	m.File = d.u64()
	m.Index = d.u64()
	m.Version = d.u64()
	m.Hops = d.u32()
	m.From = d.u32()
	m.FromBoot = d.u64()
	decodeCap(d, &m.Cap)
}

func (*HintsBlock) Type() Type { return THintsBlock }
func (m *HintsBlock) encode(e *encoder) {
	e.u32(uint32(m.Kind))
	e.u64(m.Version)
	e.boolean(m.Master)
	e.u32(m.Holder)
	e.u64(m.Boot)
	e.u32(m.To)
	e.u64(m.ToBoot)
	e.str(m.ToAddr)
}
func (m *HintsBlock) decode(d *decoder) {
	m.Kind = uint8(d.u32())
	m.Version = d.u64()
	m.Master = d.boolean()
	m.Holder = d.u32()
	m.Boot = d.u64()
	m.To = d.u32()
	m.ToBoot = d.u64()
	m.ToAddr = d.str()
}
func (m *HintsBlock) payload() []byte     { return m.Data }
func (m *HintsBlock) setPayload(p []byte) { m.Data = p }

func (*HintsForward) Type() Type { return THintsForward }
func (m *HintsForward) encode(e *encoder) {
	e.u64(m.File)
	e.u64(m.Index)
	e.u64(m.Version)
	e.i64(m.Stamp)
	e.i64(m.FromOldest)
	e.u32(m.From)
	e.u64(m.FromBoot)
	encodeCap(e, &m.Cap)
}
func (m *HintsForward) decode(d *decoder) {
	m.File = d.u64()
	m.Index = d.u64()
	m.Version = d.u64()
	m.Stamp = d.i64()
	m.FromOldest = d.i64()
	m.From = d.u32()
	m.FromBoot = d.u64()
	decodeCap(d, &m.Cap)
}
func (m *HintsForward) payload() []byte     { return m.Data }
func (m *HintsForward) setPayload(p []byte) { m.Data = p }

func (*HintsForwardAck) Type() Type { return THintsForwardAck }
func (m *HintsForwardAck) encode(e *encoder) {
	e.i64(m.Oldest)
	e.u64(m.Boot)
	e.boolean(m.Kept)
}
func (m *HintsForwardAck) decode(d *decoder) {
	m.Oldest = d.i64()
	m.Boot = d.u64()
	m.Kept = d.boolean()
}

func (*HintsDiscard) Type() Type { return THintsDiscard }
func (m *HintsDiscard) encode(e *encoder) {
	e.u64(m.File)
	e.u64(m.Index)
	e.u64(m.Version)
	e.i64(m.Stamp)
	encodeCap(e, &m.Cap)
}
func (m *HintsDiscard) decode(d *decoder) {
	m.File = d.u64()
	m.Index = d.u64()
	m.Version = d.u64()
	m.Stamp = d.i64()
	decodeCap(d, &m.Cap)
}
func (m *HintsDiscard) payload() []byte     { return m.Data }
func (m *HintsDiscard) setPayload(p []byte) { m.Data = p }

func (*HintsDigest) Type() Type { return THintsDigest }
func (m *HintsDigest) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.File)
	e.u64(m.Index)
	e.u64(m.Version)
	e.u32(m.Count)
	encodeCap(e, &m.Cap)
}
func (m *HintsDigest) decode(d *decoder) {
	m.Handle = d.u64()
	m.File = d.u64()
	m.Index = d.u64()
	m.Version = d.u64()
	m.Count = d.u32()
	decodeCap(d, &m.Cap)
}

func (*HintsDigestRep) Type() Type { return THintsDigestRep }
func (m *HintsDigestRep) encode(e *encoder) {
	e.u64(m.Version)
	encodeDigests(e, m.Digests)
}
func (m *HintsDigestRep) decode(d *decoder) {
	m.Version = d.u64()
	m.Digests = decodeDigests(d)
}

func encodeDigests(e *encoder, ds []BlockDigestMsg) {
	encodeList(e, ds, func(e *encoder, g BlockDigestMsg) {
		e.u64(g.Index)
		e.bytes(g.Digest)
	})
}

func decodeDigests(d *decoder) []BlockDigestMsg {
	return decodeList(d, 2, func(d *decoder) BlockDigestMsg {
		return BlockDigestMsg{Index: d.u64(), Digest: d.raw(DigestSize)}
	})
}
