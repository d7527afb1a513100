package wire

// Message types 160–169: metadata and small files in fewer round trips
// (issue 9). See docs/protocol.md, "Opens that bring the data".
const (
	TOpenRead     Type = 160 // client → server: open for reading; the reply may carry the file's data
	TOpenData     Type = 161 // server → client: OpenRead's reply (data: the whole file, when it carries it)
	TDirDelegate  Type = 162 // client → server: a delegation of a directory's entries (and new inodes in it)
	TDirDelegated Type = 163 // server → client: DirDelegate's reply
	TDirReturn    Type = 164 // client → server, one-way: directory delegations given back
	TEntryBatch   Type = 165 // client → server: removals made under a delegation, in order
	TEntryDone    Type = 166 // server → client: EntryBatch's reply
	TCommitNew    Type = 167 // client → server (data): a file created under a delegation, with its held writes
)

// Verdict bits of DirDelegated: what the delegation's holder may do in the
// directory, as the identity of the request, without asking.
const (
	MayCreate uint32 = 1 << iota // create files (into the reserved inodes)
	MayRemove                    // unlink or rmdir any entry it knows
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
	Cap     Capability // to read Attr.Version through peers
	Data    []byte
}

// DirDelegate asks for a delegation of directory Path's entries: until the
// server recalls it (before serving another client anything that names a
// path in or below the directory, with a CallbackBreak of kind
// CallbackWrite naming it) or the client gives it back (DirReturn), only
// the holder changes or reads the directory's entries, so it may answer
// its own creates and removals in it before the server has them, and send
// them later (EntryBatch, CommitNew); a recall is acked once they are
// sent. Reserve asks for that many new, unnamed files in the directory
// (O_TMPFILE, as the request's identity), whose inode numbers the
// client's creates hand out. Asked again for a directory the client
// holds, it only reserves more.
type DirDelegate struct {
	Path    string
	Reserve uint32
}

// Reserved is one new, unnamed file of a delegation: the token that names
// it to CommitNew and its attributes (its inode number and generation are
// those it keeps).
type Reserved struct {
	Token uint64
	Attr  Attr
}

// DirDelegated is the reply of DirDelegate: Granted is false when another
// client holds the directory's delegation; Verdict (MayCreate, MayRemove)
// says what the request's identity may do in it without asking; Attr is
// the directory's attributes at the grant; Reserved the new files.
type DirDelegated struct {
	Granted  bool
	Verdict  uint32
	Attr     Attr
	Reserved []Reserved
}

// DirReturn gives directory delegations back (by inode number), with their
// reserved files; one-way.
type DirReturn struct {
	Inos []uint64
}

// EntryOp is one removal of an EntryBatch: Path unlinked, or removed as
// a directory when Dir.
type EntryOp struct {
	Path string
	Dir  bool
}

// EntryBatch carries removals the client answered under its delegations,
// applied in order as the identity of the As that wraps it, stopping at
// the first that fails; exactly once per (client boot id, Seq). Release
// lists handles of files closed before, closed after the batch whatever
// its outcome (as Commit's).
type EntryBatch struct {
	Seq     uint64
	Ops     []EntryOp
	Release []uint64
}

// EntryDone is EntryBatch's reply: Done operations were applied; when
// Done is short of the batch, Errno and Msg are the failure of the next.
type EntryDone struct {
	Done  uint32
	Errno uint32
	Msg   string
}

// CommitNew creates Path from the reserved file Token of its directory's
// delegation — mode Mode (the umask of the As that wraps it applies), its
// times the server's now — links it, applies the held operations as a
// Commit does (Ops, Data) and answers with an OpenReply: the handle the
// client's open file uses from then on, and the attributes. It fails with
// EEXIST when the name exists (made directly in the export meanwhile: the
// delegation kept every client out), EBADF when the reservation is gone.
// Exactly once per (client boot id, Seq).
type CommitNew struct {
	Token   uint64
	Path    string
	Mode    uint32
	Seq     uint64
	Ops     []CommitOp
	Release []uint64
	Data    []byte
}

func newMetaMsg(t Type) Msg {
	switch t {
	case TOpenRead:
		return &OpenRead{}
	case TOpenData:
		return &OpenData{}
	case TDirDelegate:
		return &DirDelegate{}
	case TDirDelegated:
		return &DirDelegated{}
	case TDirReturn:
		return &DirReturn{}
	case TEntryBatch:
		return &EntryBatch{}
	case TEntryDone:
		return &EntryDone{}
	case TCommitNew:
		return &CommitNew{}
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
	encodeCap(e, &m.Cap)
}
func (m *OpenData) decode(d *decoder) {
	m.Handle = d.u64()
	decodeAttr(d, &m.Attr)
	m.HasData = d.boolean()
	m.Layer = uint8(d.u32())
	decodeCap(d, &m.Cap)
}
func (m *OpenData) payload() []byte     { return m.Data }
func (m *OpenData) setPayload(p []byte) { m.Data = p }

func (*DirDelegate) Type() Type { return TDirDelegate }
func (m *DirDelegate) encode(e *encoder) {
	e.str(m.Path)
	e.u32(m.Reserve)
}
func (m *DirDelegate) decode(d *decoder) {
	m.Path = d.str()
	m.Reserve = d.u32()
}

func (*DirDelegated) Type() Type { return TDirDelegated }
func (m *DirDelegated) encode(e *encoder) {
	e.boolean(m.Granted)
	e.u32(m.Verdict)
	encodeAttr(e, &m.Attr)
	e.u64(uint64(len(m.Reserved)))
	for i := range m.Reserved {
		e.u64(m.Reserved[i].Token)
		encodeAttr(e, &m.Reserved[i].Attr)
	}
}
func (m *DirDelegated) decode(d *decoder) {
	m.Granted = d.boolean()
	m.Verdict = d.u32()
	decodeAttr(d, &m.Attr)
	m.Reserved = make([]Reserved, d.count(2))
	for i := range m.Reserved {
		m.Reserved[i].Token = d.u64()
		decodeAttr(d, &m.Reserved[i].Attr)
	}
}

func (*DirReturn) Type() Type          { return TDirReturn }
func (m *DirReturn) encode(e *encoder) { encodeU64s(e, m.Inos) }
func (m *DirReturn) decode(d *decoder) { m.Inos = decodeU64s(d) }

func (*EntryBatch) Type() Type { return TEntryBatch }
func (m *EntryBatch) encode(e *encoder) {
	e.u64(m.Seq)
	e.u64(uint64(len(m.Ops)))
	for _, op := range m.Ops {
		e.str(op.Path)
		e.boolean(op.Dir)
	}
	encodeU64s(e, m.Release)
}
func (m *EntryBatch) decode(d *decoder) {
	m.Seq = d.u64()
	m.Ops = make([]EntryOp, d.count(2))
	for i := range m.Ops {
		m.Ops[i].Path = d.str()
		m.Ops[i].Dir = d.boolean()
	}
	m.Release = decodeU64s(d)
}

func (*EntryDone) Type() Type { return TEntryDone }
func (m *EntryDone) encode(e *encoder) {
	e.u32(m.Done)
	e.u32(m.Errno)
	e.str(m.Msg)
}
func (m *EntryDone) decode(d *decoder) {
	m.Done = d.u32()
	m.Errno = d.u32()
	m.Msg = d.str()
}

func (*CommitNew) Type() Type { return TCommitNew }
func (m *CommitNew) encode(e *encoder) {
	e.u64(m.Token)
	e.str(m.Path)
	e.u32(m.Mode)
	c := Commit{Seq: m.Seq, Ops: m.Ops, Release: m.Release}
	c.encode(e)
}
func (m *CommitNew) decode(d *decoder) {
	m.Token = d.u64()
	m.Path = d.str()
	m.Mode = d.u32()
	var c Commit
	c.decode(d)
	m.Seq, m.Ops, m.Release = c.Seq, c.Ops, c.Release
}
func (m *CommitNew) payload() []byte     { return m.Data }
func (m *CommitNew) setPayload(p []byte) { m.Data = p }

// AsCommit is the Commit of the held operations a CommitNew carries
// (Handle left 0).
func (m *CommitNew) AsCommit() *Commit {
	return &Commit{Seq: m.Seq, Ops: m.Ops, Release: m.Release, Data: m.Data}
}

func encodeU64s(e *encoder, vs []uint64) {
	e.u64(uint64(len(vs)))
	for _, v := range vs {
		e.u64(v)
	}
}

func decodeU64s(d *decoder) []uint64 {
	vs := make([]uint64, d.count(1))
	for i := range vs {
		vs[i] = d.u64()
	}
	return vs
}

// Paths lists the paths request m (or the request an As wraps) names.
func Paths(m Msg) []string {
	if as, ok := m.(*As); ok {
		m = as.Msg
	}
	switch m := m.(type) {
	case *Lookup:
		return []string{m.Path}
	case *LookupPinned:
		return []string{m.Path}
	case *GetAttr:
		return []string{m.Path}
	case *SetAttr:
		return []string{m.Path}
	case *ReadDir:
		return []string{m.Path}
	case *ReadDirPlus:
		return []string{m.Path}
	case *Mkdir:
		return []string{m.Path}
	case *Create:
		return []string{m.Path}
	case *Open:
		return []string{m.Path}
	case *OpenRead:
		return []string{m.Path}
	case *OpenPinned:
		return []string{m.Path}
	case *Unlink:
		return []string{m.Path}
	case *Rmdir:
		return []string{m.Path}
	case *Rename:
		return []string{m.Old, m.New}
	case *Link:
		return []string{m.Old, m.New}
	case *Symlink:
		return []string{m.Path}
	case *Readlink:
		return []string{m.Path}
	case *Mknod:
		return []string{m.Path}
	case *GetXattr:
		return []string{m.Path}
	case *ListXattr:
		return []string{m.Path}
	case *SetXattr:
		return []string{m.Path}
	case *RemoveXattr:
		return []string{m.Path}
	case *DirDelegate:
		return []string{m.Path}
	case *CommitNew:
		return []string{m.Path}
	case *Revalidate:
		ps := make([]string, len(m.Items))
		for i, it := range m.Items {
			ps[i] = it.Path
		}
		return ps
	case *EntryBatch:
		ps := make([]string, len(m.Ops))
		for i, op := range m.Ops {
			ps[i] = op.Path
		}
		return ps
	}
	return nil
}
