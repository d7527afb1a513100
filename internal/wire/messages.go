package wire

import (
	"crypto/ed25519"
	"fmt"

	"github.com/coopfs/coopfs/internal/block"
)

// Type is a message type, the third byte of a frame header.
type Type uint8

// Message types. Numbers are part of the protocol: never reuse one.
const (
	THello      Type = 1 // client → server: version, role, nonce
	THelloReply Type = 2 // server → client: version, nonce, server proof, settings
	TAuth       Type = 3 // client → server: client proof
	TWelcome    Type = 4 // server → client: accepted, client id

	TError Type = 10 // reply: errno and message
	TOK    Type = 11 // reply: success without a body
	TPing  Type = 12 // request: liveness; answered with TOK

	TLookup   Type = 20
	TGetAttr  Type = 21
	TSetAttr  Type = 22
	TReadDir  Type = 23
	TMkdir    Type = 24
	TCreate   Type = 25
	TOpen     Type = 26
	TUnlink   Type = 27
	TRmdir    Type = 28
	TRename   Type = 29
	TLink     Type = 30
	TSymlink  Type = 31
	TReadlink Type = 32
	TStatFs   Type = 33
	TRelease  Type = 34
	TFsync    Type = 35

	TAttrReply     Type = 40
	TOpenReply     Type = 41
	TReadDirReply  Type = 42
	TReadlinkReply Type = 43
	TStatFsReply   Type = 44

	TReadBlock  Type = 50 // client → server: one block of a file
	TBlockReply Type = 51 // server → client: the block, or "forwarded"
	TWrite      Type = 52 // client → server: bytes at an offset

	TForward  Type = 60 // server → holder: send this block to that requester
	TPeerData Type = 61 // holder → requester: the block of a forward
	TPeerNack Type = 62 // holder → requester: cannot serve that forward
	TDiscard  Type = 63 // client → server: blocks this client no longer caches
	THeld     Type = 64 // client → server, one-way: blocks this client now holds (arrived and cached)
	TPeerWait Type = 65 // holder → requester: the block of that forward is still on its way to me
)

// Msg is one protocol message. Data-carrying messages also implement
// payloader; their bulk bytes travel in the frame's data section.
type Msg interface {
	Type() Type
	encode(e *encoder)
	decode(d *decoder)
}

// payloader is a message whose bulk data travels in the data section.
type payloader interface {
	payload() []byte
	setPayload(p []byte)
}

// newMsg returns an empty message of type t, or nil for an unknown type.
func newMsg(t Type) Msg {
	switch t {
	case THello:
		return &Hello{}
	case THelloReply:
		return &HelloReply{}
	case TAuth:
		return &Auth{}
	case TWelcome:
		return &Welcome{}
	case TError:
		return &Error{}
	case TOK:
		return &OK{}
	case TPing:
		return &Ping{}
	case TLookup:
		return &Lookup{}
	case TGetAttr:
		return &GetAttr{}
	case TSetAttr:
		return &SetAttr{}
	case TReadDir:
		return &ReadDir{}
	case TMkdir:
		return &Mkdir{}
	case TCreate:
		return &Create{}
	case TOpen:
		return &Open{}
	case TUnlink:
		return &Unlink{}
	case TRmdir:
		return &Rmdir{}
	case TRename:
		return &Rename{}
	case TLink:
		return &Link{}
	case TSymlink:
		return &Symlink{}
	case TReadlink:
		return &Readlink{}
	case TStatFs:
		return &StatFsReq{}
	case TRelease:
		return &Release{}
	case TFsync:
		return &Fsync{}
	case TAttrReply:
		return &AttrReply{}
	case TOpenReply:
		return &OpenReply{}
	case TReadDirReply:
		return &ReadDirReply{}
	case TReadlinkReply:
		return &ReadlinkReply{}
	case TStatFsReply:
		return &StatFsReply{}
	case TReadBlock:
		return &ReadBlock{}
	case TBlockReply:
		return &BlockReply{}
	case TWrite:
		return &Write{}
	case TForward:
		return &Forward{}
	case TPeerData:
		return &PeerData{}
	case TPeerNack:
		return &PeerNack{}
	case TDiscard:
		return &Discard{}
	case THeld:
		return &Held{}
	case TPeerWait:
		return &PeerWait{}
	}
	if m := newPosixMsg(t); m != nil {
		return m
	}
	if m := newLockMsg(t); m != nil {
		return m
	}
	if m := newDirPlusMsg(t); m != nil {
		return m // msg_dirplus.go: types 110-119
	}
	if m := newCallbackMsg(t); m != nil {
		return m // msg_callback.go: types 113-119
	}
	if m := newPipeMsg(t); m != nil {
		return m // msg_pipe.go: types 120-129
	}
	if m := newHintsMsg(t); m != nil {
		return m // msg_hints.go: types 130-149
	}
	if m := newWriteBaseMsg(t); m != nil {
		return m // msg_writebase.go: types 141-149
	}
	if m := newWriteBackMsg(t); m != nil {
		return m // msg_writeback.go: types 150-151
	}
	if m := newRevalidateMsg(t); m != nil {
		return m // msg_revalidate.go: types 152-159
	}
	if m := newMetaMsg(t); m != nil {
		return m // msg_meta.go: types 160-169
	}
	if m := newWholeFileMsg(t); m != nil {
		return m // msg_wholefile.go: types 170-179
	}
	if m := newWarmupMsg(t); m != nil {
		return m // msg_warmup.go: types 180-189
	}
	return newSecurityMsg(t) // security.go: types 100-109
}

// typeNames is the read-only table behind Type.String, built once.
var typeNames = func() (names [256]string) {
	for t := range names {
		if m := newMsg(Type(t)); m != nil {
			names[t] = fmt.Sprintf("%T", m)[len("*wire."):]
		} else {
			names[t] = fmt.Sprintf("type%d", t)
		}
	}
	return names
}()

// String names the type for logs and metrics labels.
func (t Type) String() string { return typeNames[t] }

// Role says what a connection's dialer is.
type Role uint8

// Roles of a connection's dialer.
const (
	RoleClient Role = 1 // a mount talking to its server
	RolePeer   Role = 2 // a client or server sending peer data to a client
)

// Hello opens a connection.
type Hello struct {
	Version uint32
	Role    Role
	Name    string // the dialer's name for logs (host name, mount point)
	BootID  uint64 // changes whenever the dialer restarts
	Listen  string // the dialer's peer listener (host:port), "" if none
	Nonce   []byte // 32 random bytes
	// Session is the session a reconnecting client resumes: the
	// Welcome.Session a server gave it before, or empty for a new one.
	Session []byte
}

// HelloReply answers Hello with the server's nonce and its proof of the secret.
type HelloReply struct {
	Version   uint32
	Nonce     []byte
	Proof     []byte // the listener's proof of the secret (handshake.go), empty without a secret
	BlockSize uint32
	Policy    string // coordination policy of the export: "none", "directory"
	BootID    uint64
}

// Auth carries the dialer's proof of the secret and, from a client, its
// identity: an Ed25519 key and its signature over the handshake
// (handshake.go), which capabilities name.
type Auth struct {
	Proof []byte // the dialer's proof of the secret (handshake.go)
	IDKey []byte // the dialer's identity key, empty if none
	IDSig []byte // its signature over this handshake
}

// Welcome accepts the connection. A server sends the key its capabilities
// are signed with; a client's peer listener proves its identity key as the
// dialer does in Auth.
type Welcome struct {
	ClientID uint32 // the id the server knows this client by (0 for peers)
	// Session names the client's exactly-once state (the server's reply
	// cache, its record of appends): issued by the server to this
	// authenticated connection, unguessable, and presented again in
	// Hello.Session by a client that reconnects (SessionIDSize bytes;
	// empty from a peer's listener).
	Session []byte
	CapKey  []byte // the server's Ed25519 capability key, empty from peers
	IDKey   []byte // the listener's identity key, empty if none
	IDSig   []byte
}

// Error is the reply to a failed request.
type Error struct {
	Errno uint32 // a Linux errno (ENOENT = 2, ...)
	Msg   string
}

// OK is the reply to a request that succeeded and returns nothing.
type OK struct{}

// Ping asks whether the other end is alive.
type Ping struct{}

// Lookup asks for the attributes of a path.
type Lookup struct{ Path string }

// GetAttr asks for attributes, by open handle when Handle != 0.
type GetAttr struct {
	Path   string
	Handle uint64
}

// SetAttr changes the attributes named in Valid (Set* bits).
type SetAttr struct {
	Path         string
	Handle       uint64
	Valid        uint32
	Mode         uint32
	UID, GID     uint32
	Size         uint64
	Atime, Mtime int64
	// Ino and Gen, when Ino is not 0, name the file the change by Path is
	// meant for: the server refuses with ESTALE when Path names another
	// file (a client's kernel reaches a hard-linked file by any of its
	// names, the client may know it by a name since given to another file).
	Ino, Gen uint64
}

// ReadDir asks for the entries of a directory from index Offset on.
type ReadDir struct {
	Path   string
	Offset uint64
}

// Mkdir creates a directory owned by UID/GID.
type Mkdir struct {
	Path     string
	Mode     uint32
	UID, GID uint32
}

// Create creates and opens a file.
type Create struct {
	Path     string
	Flags    uint32 // open(2) flags
	Mode     uint32
	UID, GID uint32
}

// Open opens a file; the reply carries its current version.
type Open struct {
	Path  string
	Flags uint32
}

// Unlink removes a file.
type Unlink struct{ Path string }

// Rmdir removes an empty directory.
type Rmdir struct{ Path string }

// Rename renames Old to New with renameat2 flags.
type Rename struct {
	Old, New string
	Flags    uint32
}

// Link makes New a hard link to Old.
type Link struct {
	Old, New string
	// Ino and Gen, when Ino is not 0, name the file meant at Old (as in
	// SetAttr): the server refuses with ESTALE when Old names another.
	Ino, Gen uint64
}

// Symlink makes Path a symbolic link to Target.
type Symlink struct {
	Target, Path string
	UID, GID     uint32
}

// Readlink reads a symbolic link.
type Readlink struct{ Path string }

// StatFsReq asks for the export's statfs.
type StatFsReq struct{}

// Release closes an open handle.
type Release struct{ Handle uint64 }

// Fsync makes a handle's writes durable on the server.
type Fsync struct {
	Handle   uint64
	DataOnly bool
}

// AttrReply carries attributes.
type AttrReply struct{ Attr Attr }

// OpenReply carries a new handle and the file's attributes at open.
type OpenReply struct {
	Handle uint64
	Attr   Attr
	Cap    Capability // to read Attr.Version through peers (none for a write-only open)
}

// ReadDirReply is one page of a directory; More says another page follows.
type ReadDirReply struct {
	Entries []DirEntry
	More    bool
}

// ReadlinkReply carries a link target.
type ReadlinkReply struct{ Target string }

// StatFsReply carries statfs.
type StatFsReply struct{ StatFs StatFs }

// ReadBlock asks for block Index of File, which the client holds open as
// Handle at version Version. Token identifies the request end to end when
// the server forwards it to a peer.
type ReadBlock struct {
	Handle  uint64
	File    uint64
	Index   uint64
	Version uint64
	Token   uint64
	Retry   uint32 // client id of the holder whose forward failed, 0 if none
}

// BlockReply is the server's answer to ReadBlock: the data (shorter than a
// block at end of file) with the version it belongs to, or Forwarded with the
// holder that will send it as PeerData.
type BlockReply struct {
	Version   uint64
	Size      uint64 // the file's size at this version
	Forwarded bool
	Holder    uint32
	Layer     uint8  // where it was found: LayerMemory, LayerDisk, LayerProxy
	Digest    []byte // when Forwarded: SHA-256 of the block the holder must send (security.go)
	Data      []byte
}

// BlockReply.Layer values: where the block was found.
const (
	LayerMemory uint8 = 0 // the server's memory cache
	LayerDisk   uint8 = 1 // the server's export
	LayerProxy  uint8 = 2 // a caching proxy's memory or disk (coopfs proxy)
)

// Write writes Data at Offset through an open handle.
type Write struct {
	Handle uint64
	Offset uint64
	Data   []byte
}

// Forward asks a holder to send a block directly to a requester.
type Forward struct {
	File, Index, Version uint64
	Requester            uint32 // client id
	RequesterAddr        string // the requester's peer listener
	Token                uint64
	Cap                  Capability // the requester's, for the holder to check
}

// PeerData carries a forwarded block to its requester.
type PeerData struct {
	Token                uint64
	File, Index, Version uint64
	Size                 uint64
	Holder               uint32
	Data                 []byte
}

// PeerNack tells a requester that a holder cannot serve a forward.
type PeerNack struct {
	Token       uint64
	File, Index uint64
	Holder      uint32
	Reason      string
}

// Discard lists blocks a client evicted.
type Discard struct {
	Blocks   []block.ID
	OnDemand bool
}

// PeerWait tells a requester that the holder of its forward waits for the
// block itself (it is on its way to the holder): the requester waits
// another forward timeout, a bounded number of times, before asking the
// server.
type PeerWait struct {
	Token       uint64
	File, Index uint64
	Holder      uint32
}

// Held lists blocks that arrived at a client and are in its cache: the
// directory records a requester as a holder when it asks, and counts on it
// as one that has the block (not one still receiving it) from this on.
type Held struct {
	Blocks []block.ID
}

func (*Hello) Type() Type { return THello }
func (m *Hello) encode(e *encoder) {
	e.u32(m.Version)
	e.u32(uint32(m.Role))
	e.str(m.Name)
	e.u64(m.BootID)
	e.str(m.Listen)
	e.bytes(m.Nonce)
	e.bytes(m.Session)
}
func (m *Hello) decode(d *decoder) {
	m.Version = d.u32()
	m.Role = Role(d.u32())
	m.Name = d.str()
	m.BootID = d.u64()
	m.Listen = d.str()
	m.Nonce = d.raw(64)
	m.Session = d.raw(SessionIDSize)
}

func (*HelloReply) Type() Type { return THelloReply }
func (m *HelloReply) encode(e *encoder) {
	e.u32(m.Version)
	e.bytes(m.Nonce)
	e.bytes(m.Proof)
	e.u32(m.BlockSize)
	e.str(m.Policy)
	e.u64(m.BootID)
}
func (m *HelloReply) decode(d *decoder) {
	m.Version = d.u32()
	m.Nonce = d.raw(64)
	m.Proof = d.raw(64)
	m.BlockSize = d.u32()
	m.Policy = d.str()
	m.BootID = d.u64()
}

func (*Auth) Type() Type { return TAuth }
func (m *Auth) encode(e *encoder) {
	e.bytes(m.Proof)
	e.bytes(m.IDKey)
	e.bytes(m.IDSig)
}
func (m *Auth) decode(d *decoder) {
	m.Proof = d.raw(64)
	m.IDKey = d.optRaw(ed25519.PublicKeySize)
	m.IDSig = d.optRaw(ed25519.SignatureSize)
}
func (*Welcome) Type() Type { return TWelcome }
func (m *Welcome) encode(e *encoder) {
	e.u32(m.ClientID)
	e.bytes(m.Session)
	e.bytes(m.CapKey)
	e.bytes(m.IDKey)
	e.bytes(m.IDSig)
}
func (m *Welcome) decode(d *decoder) {
	m.ClientID = d.u32()
	m.Session = d.raw(SessionIDSize)
	m.CapKey = d.optRaw(ed25519.PublicKeySize)
	m.IDKey = d.optRaw(ed25519.PublicKeySize)
	m.IDSig = d.optRaw(ed25519.SignatureSize)
}

func (*Error) Type() Type { return TError }
func (m *Error) encode(e *encoder) {
	e.u32(m.Errno)
	e.str(m.Msg)
}
func (m *Error) decode(d *decoder) {
	m.Errno = d.u32()
	m.Msg = d.str()
}

func (*OK) Type() Type        { return TOK }
func (*OK) encode(*encoder)   {}
func (*OK) decode(*decoder)   {}
func (*Ping) Type() Type      { return TPing }
func (*Ping) encode(*encoder) {}
func (*Ping) decode(*decoder) {}

func (*Lookup) Type() Type          { return TLookup }
func (m *Lookup) encode(e *encoder) { e.str(m.Path) }
func (m *Lookup) decode(d *decoder) { m.Path = d.str() }

func (*GetAttr) Type() Type { return TGetAttr }
func (m *GetAttr) encode(e *encoder) {
	e.str(m.Path)
	e.u64(m.Handle)
}
func (m *GetAttr) decode(d *decoder) {
	m.Path = d.str()
	m.Handle = d.u64()
}

func (*SetAttr) Type() Type { return TSetAttr }
func (m *SetAttr) encode(e *encoder) {
	e.str(m.Path)
	e.u64(m.Handle)
	e.u32(m.Valid)
	e.u32(m.Mode)
	e.u32(m.UID)
	e.u32(m.GID)
	e.u64(m.Size)
	e.i64(m.Atime)
	e.i64(m.Mtime)
	e.u64(m.Ino)
	e.u64(m.Gen)
}
func (m *SetAttr) decode(d *decoder) {
	m.Path = d.str()
	m.Handle = d.u64()
	m.Valid = d.u32()
	m.Mode = d.u32()
	m.UID = d.u32()
	m.GID = d.u32()
	m.Size = d.u64()
	m.Atime = d.i64()
	m.Mtime = d.i64()
	m.Ino = d.u64()
	m.Gen = d.u64()
}

func (*ReadDir) Type() Type { return TReadDir }
func (m *ReadDir) encode(e *encoder) {
	e.str(m.Path)
	e.u64(m.Offset)
}
func (m *ReadDir) decode(d *decoder) {
	m.Path = d.str()
	m.Offset = d.u64()
}

func (*Mkdir) Type() Type { return TMkdir }
func (m *Mkdir) encode(e *encoder) {
	e.str(m.Path)
	e.u32(m.Mode)
	e.u32(m.UID)
	e.u32(m.GID)
}
func (m *Mkdir) decode(d *decoder) {
	m.Path = d.str()
	m.Mode = d.u32()
	m.UID = d.u32()
	m.GID = d.u32()
}

func (*Create) Type() Type { return TCreate }
func (m *Create) encode(e *encoder) {
	e.str(m.Path)
	e.u32(m.Flags)
	e.u32(m.Mode)
	e.u32(m.UID)
	e.u32(m.GID)
}
func (m *Create) decode(d *decoder) {
	m.Path = d.str()
	m.Flags = d.u32()
	m.Mode = d.u32()
	m.UID = d.u32()
	m.GID = d.u32()
}

func (*Open) Type() Type { return TOpen }
func (m *Open) encode(e *encoder) {
	e.str(m.Path)
	e.u32(m.Flags)
}
func (m *Open) decode(d *decoder) {
	m.Path = d.str()
	m.Flags = d.u32()
}

func (*Unlink) Type() Type          { return TUnlink }
func (m *Unlink) encode(e *encoder) { e.str(m.Path) }
func (m *Unlink) decode(d *decoder) { m.Path = d.str() }
func (*Rmdir) Type() Type           { return TRmdir }
func (m *Rmdir) encode(e *encoder)  { e.str(m.Path) }
func (m *Rmdir) decode(d *decoder)  { m.Path = d.str() }

func (*Rename) Type() Type { return TRename }
func (m *Rename) encode(e *encoder) {
	e.str(m.Old)
	e.str(m.New)
	e.u32(m.Flags)
}
func (m *Rename) decode(d *decoder) {
	m.Old = d.str()
	m.New = d.str()
	m.Flags = d.u32()
}

func (*Link) Type() Type { return TLink }
func (m *Link) encode(e *encoder) {
	e.str(m.Old)
	e.str(m.New)
	e.u64(m.Ino)
	e.u64(m.Gen)
}
func (m *Link) decode(d *decoder) {
	m.Old = d.str()
	m.New = d.str()
	m.Ino = d.u64()
	m.Gen = d.u64()
}

func (*Symlink) Type() Type { return TSymlink }
func (m *Symlink) encode(e *encoder) {
	e.str(m.Target)
	e.str(m.Path)
	e.u32(m.UID)
	e.u32(m.GID)
}
func (m *Symlink) decode(d *decoder) {
	m.Target = d.str()
	m.Path = d.str()
	m.UID = d.u32()
	m.GID = d.u32()
}

func (*Readlink) Type() Type          { return TReadlink }
func (m *Readlink) encode(e *encoder) { e.str(m.Path) }
func (m *Readlink) decode(d *decoder) { m.Path = d.str() }
func (*StatFsReq) Type() Type         { return TStatFs }
func (*StatFsReq) encode(*encoder)    {}
func (*StatFsReq) decode(*decoder)    {}
func (*Release) Type() Type           { return TRelease }
func (m *Release) encode(e *encoder)  { e.u64(m.Handle) }
func (m *Release) decode(d *decoder)  { m.Handle = d.u64() }

func (*Fsync) Type() Type { return TFsync }
func (m *Fsync) encode(e *encoder) {
	e.u64(m.Handle)
	e.boolean(m.DataOnly)
}
func (m *Fsync) decode(d *decoder) {
	m.Handle = d.u64()
	m.DataOnly = d.boolean()
}

func encodeAttr(e *encoder, a *Attr) {
	e.u64(a.Ino)
	e.u32(a.Mode)
	e.u32(a.Nlink)
	e.u32(a.UID)
	e.u32(a.GID)
	e.u64(a.Size)
	e.u64(a.Blocks)
	e.i64(a.Atime)
	e.i64(a.Mtime)
	e.i64(a.Ctime)
	e.u32(a.Rdev)
	e.u64(a.Version)
	e.u64(a.Gen)
}

func decodeAttr(d *decoder, a *Attr) {
	a.Ino = d.u64()
	a.Mode = d.u32()
	a.Nlink = d.u32()
	a.UID = d.u32()
	a.GID = d.u32()
	a.Size = d.u64()
	a.Blocks = d.u64()
	a.Atime = d.i64()
	a.Mtime = d.i64()
	a.Ctime = d.i64()
	a.Rdev = d.u32()
	a.Version = d.u64()
	a.Gen = d.u64()
}

func (*AttrReply) Type() Type          { return TAttrReply }
func (m *AttrReply) encode(e *encoder) { encodeAttr(e, &m.Attr) }
func (m *AttrReply) decode(d *decoder) { decodeAttr(d, &m.Attr) }

func (*OpenReply) Type() Type { return TOpenReply }
func (m *OpenReply) encode(e *encoder) {
	e.u64(m.Handle)
	encodeAttr(e, &m.Attr)
	encodeCap(e, &m.Cap)
}
func (m *OpenReply) decode(d *decoder) {
	m.Handle = d.u64()
	decodeAttr(d, &m.Attr)
	decodeCap(d, &m.Cap)
}

func (*ReadDirReply) Type() Type { return TReadDirReply }
func (m *ReadDirReply) encode(e *encoder) {
	e.u64(uint64(len(m.Entries)))
	for _, de := range m.Entries {
		e.str(de.Name)
		e.u64(de.Ino)
		e.u32(de.Mode)
	}
	e.boolean(m.More)
}
func (m *ReadDirReply) decode(d *decoder) {
	n := d.count(3)
	m.Entries = make([]DirEntry, n)
	for i := range m.Entries {
		m.Entries[i] = DirEntry{Name: d.str(), Ino: d.u64(), Mode: d.u32()}
	}
	m.More = d.boolean()
}

func (*ReadlinkReply) Type() Type          { return TReadlinkReply }
func (m *ReadlinkReply) encode(e *encoder) { e.str(m.Target) }
func (m *ReadlinkReply) decode(d *decoder) { m.Target = d.str() }

func (*StatFsReply) Type() Type { return TStatFsReply }
func (m *StatFsReply) encode(e *encoder) {
	s := &m.StatFs
	for _, v := range []uint64{s.Blocks, s.Bfree, s.Bavail, s.Files, s.Ffree} {
		e.u64(v)
	}
	e.u32(s.Bsize)
	e.u32(s.NameLen)
	e.u32(s.Frsize)
}
func (m *StatFsReply) decode(d *decoder) {
	s := &m.StatFs
	for _, p := range []*uint64{&s.Blocks, &s.Bfree, &s.Bavail, &s.Files, &s.Ffree} {
		*p = d.u64()
	}
	s.Bsize = d.u32()
	s.NameLen = d.u32()
	s.Frsize = d.u32()
}

func (*ReadBlock) Type() Type { return TReadBlock }
func (m *ReadBlock) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.File)
	e.u64(m.Index)
	e.u64(m.Version)
	e.u64(m.Token)
	e.u32(m.Retry)
}
func (m *ReadBlock) decode(d *decoder) {
	m.Handle = d.u64()
	m.File = d.u64()
	m.Index = d.u64()
	m.Version = d.u64()
	m.Token = d.u64()
	m.Retry = d.u32()
}

func (*BlockReply) Type() Type { return TBlockReply }
func (m *BlockReply) encode(e *encoder) {
	e.u64(m.Version)
	e.u64(m.Size)
	e.boolean(m.Forwarded)
	e.u32(m.Holder)
	e.u32(uint32(m.Layer))
	e.bytes(m.Digest)
}
func (m *BlockReply) decode(d *decoder) {
	m.Version = d.u64()
	m.Size = d.u64()
	m.Forwarded = d.boolean()
	m.Holder = d.u32()
	m.Layer = uint8(d.u32())
	if m.Digest = d.raw(64); len(m.Digest) == 0 {
		m.Digest = nil
	}
}
func (m *BlockReply) payload() []byte     { return m.Data }
func (m *BlockReply) setPayload(p []byte) { m.Data = p }

func (*Write) Type() Type { return TWrite }
func (m *Write) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.Offset)
}
func (m *Write) decode(d *decoder) {
	m.Handle = d.u64()
	m.Offset = d.u64()
}
func (m *Write) payload() []byte     { return m.Data }
func (m *Write) setPayload(p []byte) { m.Data = p }

func (*Forward) Type() Type { return TForward }
func (m *Forward) encode(e *encoder) {
	e.u64(m.File)
	e.u64(m.Index)
	e.u64(m.Version)
	e.u32(m.Requester)
	e.str(m.RequesterAddr)
	e.u64(m.Token)
	encodeCap(e, &m.Cap)
}
func (m *Forward) decode(d *decoder) {
	m.File = d.u64()
	m.Index = d.u64()
	m.Version = d.u64()
	m.Requester = d.u32()
	m.RequesterAddr = d.str()
	m.Token = d.u64()
	decodeCap(d, &m.Cap)
}

func (*PeerData) Type() Type { return TPeerData }
func (m *PeerData) encode(e *encoder) {
	e.u64(m.Token)
	e.u64(m.File)
	e.u64(m.Index)
	e.u64(m.Version)
	e.u64(m.Size)
	e.u32(m.Holder)
}
func (m *PeerData) decode(d *decoder) {
	m.Token = d.u64()
	m.File = d.u64()
	m.Index = d.u64()
	m.Version = d.u64()
	m.Size = d.u64()
	m.Holder = d.u32()
}
func (m *PeerData) payload() []byte     { return m.Data }
func (m *PeerData) setPayload(p []byte) { m.Data = p }

func (*PeerNack) Type() Type { return TPeerNack }
func (m *PeerNack) encode(e *encoder) {
	e.u64(m.Token)
	e.u64(m.File)
	e.u64(m.Index)
	e.u32(m.Holder)
	e.str(m.Reason)
}
func (m *PeerNack) decode(d *decoder) {
	m.Token = d.u64()
	m.File = d.u64()
	m.Index = d.u64()
	m.Holder = d.u32()
	m.Reason = d.str()
}

func (*PeerWait) Type() Type { return TPeerWait }
func (m *PeerWait) encode(e *encoder) {
	e.u64(m.Token)
	e.u64(m.File)
	e.u64(m.Index)
	e.u32(m.Holder)
}
func (m *PeerWait) decode(d *decoder) {
	m.Token = d.u64()
	m.File = d.u64()
	m.Index = d.u64()
	m.Holder = d.u32()
}

func (*Held) Type() Type { return THeld }
func (m *Held) encode(e *encoder) {
	e.u64(uint64(len(m.Blocks)))
	for _, b := range m.Blocks {
		e.u64(b.File)
		e.u64(b.Index)
	}
}
func (m *Held) decode(d *decoder) {
	n := d.count(2)
	m.Blocks = make([]block.ID, n)
	for i := range m.Blocks {
		m.Blocks[i] = block.ID{File: d.u64(), Index: d.u64()}
	}
}

func (*Discard) Type() Type { return TDiscard }
func (m *Discard) encode(e *encoder) {
	e.u64(uint64(len(m.Blocks)))
	for _, b := range m.Blocks {
		e.u64(b.File)
		e.u64(b.Index)
	}
	e.boolean(m.OnDemand)
}
func (m *Discard) decode(d *decoder) {
	n := d.count(2)
	m.Blocks = make([]block.ID, n)
	for i := range m.Blocks {
		m.Blocks[i] = block.ID{File: d.u64(), Index: d.u64()}
	}
	m.OnDemand = d.boolean()
}
