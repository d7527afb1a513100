package wire

// Messages of POSIX conformance and identity (issue 7): the caller's
// identity, special files, extended attributes, fallocate. Type numbers
// 70–89 are this file's range.
const (
	TAs          Type = 70 // client → server: the wrapped request, performed as UID/GID/Groups
	TMknod       Type = 71 // a FIFO, socket or device node
	TGetXattr    Type = 72
	TListXattr   Type = 73
	TSetXattr    Type = 74
	TRemoveXattr Type = 75
	TXattrReply  Type = 76 // a value or a name list, or only its size
	TFallocate   Type = 77 // fallocate(2) through an open handle; answered with AttrReply
)

// maxXattr bounds an xattr value or name list (the Linux limit, XATTR_SIZE_MAX).
const maxXattr = 64 << 10

// maxGroups bounds the supplementary groups of an identity (NGROUPS_MAX).
const maxGroups = 65536

// As asks the server to perform Msg as the identity UID, GID, Groups (after
// the server's squashing). Msg is any request without a data section; the
// reply is Msg's reply.
type As struct {
	UID, GID uint32
	Groups   []uint32
	// HasUmask says that Umask is the caller's umask: the server applies
	// it to the mode of a Create, Mkdir or Mknod unless the parent
	// directory has a default ACL (which replaces the umask).
	HasUmask bool
	Umask    uint32
	Msg      Msg
}

// Mknod makes a special file (S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK in Mode;
// a regular file for S_IFREG) at Path. The server never opens it.
type Mknod struct {
	Path string
	Mode uint32
	Rdev uint32
}

// GetXattr reads extended attribute Name of Path (not following a final
// symbolic link). Size 0 asks for the value's size only; a non-zero Size
// smaller than the value fails with ERANGE.
type GetXattr struct {
	Path string
	Name string
	Size uint32
}

// ListXattr lists the extended attribute names of Path (NUL-terminated,
// concatenated); Size as for GetXattr.
type ListXattr struct {
	Path string
	Size uint32
}

// SetXattr sets extended attribute Name of Path; Flags are setxattr(2)'s
// XATTR_CREATE / XATTR_REPLACE.
type SetXattr struct {
	Path  string
	Name  string
	Value []byte
	Flags uint32
	// Ino and Gen, when Ino is not 0, name the file meant (as in SetAttr).
	Ino, Gen uint64
}

// RemoveXattr removes extended attribute Name of Path.
type RemoveXattr struct {
	Path     string
	Name     string
	Ino, Gen uint64 // as in SetXattr
}

// XattrReply answers GetXattr and ListXattr: the size the value needs and,
// unless only the size was asked, the value.
type XattrReply struct {
	Size  uint32
	Value []byte
}

// Fallocate is fallocate(2) on an open handle with its mode bits.
type Fallocate struct {
	Handle         uint64
	Mode           uint32
	Offset, Length uint64
}

// newPosixMsg returns an empty message of this file's range, or nil.
func newPosixMsg(t Type) Msg {
	switch t {
	case TAs:
		return &As{}
	case TMknod:
		return &Mknod{}
	case TGetXattr:
		return &GetXattr{}
	case TListXattr:
		return &ListXattr{}
	case TSetXattr:
		return &SetXattr{}
	case TRemoveXattr:
		return &RemoveXattr{}
	case TXattrReply:
		return &XattrReply{}
	case TFallocate:
		return &Fallocate{}
	}
	return nil
}

func (*As) Type() Type { return TAs }
func (m *As) encode(e *encoder) {
	e.u32(m.UID)
	e.u32(m.GID)
	e.u64(uint64(len(m.Groups)))
	for _, g := range m.Groups {
		e.u32(g)
	}
	e.boolean(m.HasUmask)
	e.u32(m.Umask)
	e.u32(uint32(m.Msg.Type()))
	m.Msg.encode(e)
}

// payload and setPayload carry the wrapped message's data (a Commit's).
func (m *As) payload() []byte {
	if p, ok := m.Msg.(payloader); ok {
		return p.payload()
	}
	return nil
}
func (m *As) setPayload(b []byte) {
	if p, ok := m.Msg.(payloader); ok {
		p.setPayload(b)
	}
}

func (m *As) decode(d *decoder) {
	m.UID = d.u32()
	m.GID = d.u32()
	n := d.u64()
	if n > maxGroups || n > uint64(len(d.b)) {
		d.fail("group count")
		return
	}
	m.Groups = make([]uint32, n)
	for i := range m.Groups {
		m.Groups[i] = d.u32()
	}
	m.HasUmask = d.boolean()
	m.Umask = d.u32()
	t := d.u32()
	if d.err != nil {
		return
	}
	inner := newMsg(Type(min(t, 255)))
	// Of the data-carrying types only a Commit and a CommitNew act as a
	// user (their attribute changes, the new file's owner); the bulk bytes
	// stay in the frame's data section.
	if _, data := inner.(payloader); inner == nil || t > 255 || (data && t != uint32(TCommit) && t != uint32(TCommitNew)) || t == uint32(TAs) {
		d.fail("wrapped message type")
		return
	}
	inner.decode(d)
	m.Msg = inner
}

func (*Mknod) Type() Type { return TMknod }
func (m *Mknod) encode(e *encoder) {
	e.str(m.Path)
	e.u32(m.Mode)
	e.u32(m.Rdev)
}
func (m *Mknod) decode(d *decoder) {
	m.Path = d.str()
	m.Mode = d.u32()
	m.Rdev = d.u32()
}

func (*GetXattr) Type() Type { return TGetXattr }
func (m *GetXattr) encode(e *encoder) {
	e.str(m.Path)
	e.str(m.Name)
	e.u32(m.Size)
}
func (m *GetXattr) decode(d *decoder) {
	m.Path = d.str()
	m.Name = d.str()
	m.Size = d.u32()
}

func (*ListXattr) Type() Type { return TListXattr }
func (m *ListXattr) encode(e *encoder) {
	e.str(m.Path)
	e.u32(m.Size)
}
func (m *ListXattr) decode(d *decoder) {
	m.Path = d.str()
	m.Size = d.u32()
}

func (*SetXattr) Type() Type { return TSetXattr }
func (m *SetXattr) encode(e *encoder) {
	e.str(m.Path)
	e.str(m.Name)
	e.bytes(m.Value)
	e.u32(m.Flags)
	e.u64(m.Ino)
	e.u64(m.Gen)
}
func (m *SetXattr) decode(d *decoder) {
	m.Path = d.str()
	m.Name = d.str()
	m.Value = d.raw(maxXattr)
	m.Flags = d.u32()
	m.Ino = d.u64()
	m.Gen = d.u64()
}

func (*RemoveXattr) Type() Type { return TRemoveXattr }
func (m *RemoveXattr) encode(e *encoder) {
	e.str(m.Path)
	e.str(m.Name)
	e.u64(m.Ino)
	e.u64(m.Gen)
}
func (m *RemoveXattr) decode(d *decoder) {
	m.Path = d.str()
	m.Name = d.str()
	m.Ino = d.u64()
	m.Gen = d.u64()
}

func (*XattrReply) Type() Type { return TXattrReply }
func (m *XattrReply) encode(e *encoder) {
	e.u32(m.Size)
	e.bytes(m.Value)
}
func (m *XattrReply) decode(d *decoder) {
	m.Size = d.u32()
	m.Value = d.raw(maxXattr)
}

func (*Fallocate) Type() Type { return TFallocate }
func (m *Fallocate) encode(e *encoder) {
	e.u64(m.Handle)
	e.u32(m.Mode)
	e.u64(m.Offset)
	e.u64(m.Length)
}
func (m *Fallocate) decode(d *decoder) {
	m.Handle = d.u64()
	m.Mode = d.u32()
	m.Offset = d.u64()
	m.Length = d.u64()
}
