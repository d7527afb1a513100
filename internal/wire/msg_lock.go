package wire

// Message types 90–99: advisory locks held by the server and writes applied
// exactly once (issue 7). See docs/protocol.md, "Locks" and "Exactly-once
// writes".
const (
	TLockSet     Type = 90 // client → server: take or drop a lock (F_SETLK/F_SETLKW, flock)
	TLockTest    Type = 91 // client → server: F_GETLK
	TLockReply   Type = 92 // server → client: the conflicting lock, or F_UNLCK
	TLockRelease Type = 93 // client → server: drop an owner's locks on a file (close)
	TLockCancel  Type = 94 // client → server: stop an owner's blocked LockSet (interrupted)
	TWriteSeq    Type = 95 // client → server: a write with a request sequence number
)

// Lock types, as fcntl(2) numbers them.
const (
	LockRead   uint32 = 0 // F_RDLCK
	LockWrite  uint32 = 1 // F_WRLCK
	LockUnlock uint32 = 2 // F_UNLCK
)

// LockEOF is the End of a lock that reaches to end of file and beyond
// (the kernel's OFFSET_MAX).
const LockEOF = uint64(1<<63 - 1)

// Lock is a byte-range lock [Start, End] (End inclusive; LockEOF for "to
// the end"), or a whole-file flock lock.
type Lock struct {
	Type       uint32 // LockRead, LockWrite, LockUnlock
	Start, End uint64
	Pid        uint32 // the holder's process id on its own client (F_GETLK reports it)
}

// LockSet takes, changes or drops a lock on the file open as Handle for
// lock owner Owner (the kernel's lock owner id on the client). Flock
// selects the flock(2) lock space (whole file) instead of fcntl byte
// ranges. With Wait the server waits for a conflicting lock to go away, at
// most a few seconds per request: it then answers EINPROGRESS and the
// client asks again.
type LockSet struct {
	Handle uint64
	Owner  uint64
	Flock  bool
	Wait   bool
	Lock   Lock
}

// LockTest asks for a lock that would conflict with Lock (F_GETLK).
type LockTest struct {
	Handle uint64
	Owner  uint64
	Flock  bool
	Lock   Lock
}

// LockReply answers LockTest: the conflicting lock, or Type LockUnlock.
type LockReply struct{ Lock Lock }

// LockRelease drops every lock of Owner on the file open as Handle: the
// fcntl locks when the owner closes a descriptor of the file, its flock and
// OFD locks (Flock: only those) when the open file is released.
type LockRelease struct {
	Handle uint64
	Owner  uint64
	Flock  bool
}

// LockCancel ends a LockSet with Wait of Owner on the file open as Handle
// that is waiting; it is answered EINTR (or OK if the lock was granted
// first).
type LockCancel struct {
	Handle uint64
	Owner  uint64
}

// WriteSeq is Write with the client's request sequence number: the server
// applies a (client boot id, Seq) once, however often it arrives.
type WriteSeq struct {
	Seq    uint64
	Handle uint64
	Offset uint64
	Data   []byte
}

// newLockMsg returns an empty message of a type in 90–99, or nil.
func newLockMsg(t Type) Msg {
	switch t {
	case TLockSet:
		return &LockSet{}
	case TLockTest:
		return &LockTest{}
	case TLockReply:
		return &LockReply{}
	case TLockRelease:
		return &LockRelease{}
	case TLockCancel:
		return &LockCancel{}
	case TWriteSeq:
		return &WriteSeq{}
	case TOpenPinned:
		return &OpenPinned{}
	case TLookupPinned:
		return &LookupPinned{}
	}
	return nil
}

func encodeLock(e *encoder, l *Lock) {
	e.u32(l.Type)
	e.u64(l.Start)
	e.u64(l.End)
	e.u32(l.Pid)
}

func decodeLock(d *decoder, l *Lock) {
	l.Type = d.u32()
	l.Start = d.u64()
	l.End = d.u64()
	l.Pid = d.u32()
}

func (*LockSet) Type() Type { return TLockSet }
func (m *LockSet) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.Owner)
	e.boolean(m.Flock)
	e.boolean(m.Wait)
	encodeLock(e, &m.Lock)
}
func (m *LockSet) decode(d *decoder) {
	m.Handle = d.u64()
	m.Owner = d.u64()
	m.Flock = d.boolean()
	m.Wait = d.boolean()
	decodeLock(d, &m.Lock)
}

func (*LockTest) Type() Type { return TLockTest }
func (m *LockTest) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.Owner)
	e.boolean(m.Flock)
	encodeLock(e, &m.Lock)
}
func (m *LockTest) decode(d *decoder) {
	m.Handle = d.u64()
	m.Owner = d.u64()
	m.Flock = d.boolean()
	decodeLock(d, &m.Lock)
}

func (*LockReply) Type() Type          { return TLockReply }
func (m *LockReply) encode(e *encoder) { encodeLock(e, &m.Lock) }
func (m *LockReply) decode(d *decoder) { decodeLock(d, &m.Lock) }

func (*LockRelease) Type() Type { return TLockRelease }
func (m *LockRelease) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.Owner)
	e.boolean(m.Flock)
}
func (m *LockRelease) decode(d *decoder) {
	m.Handle = d.u64()
	m.Owner = d.u64()
	m.Flock = d.boolean()
}

func (*LockCancel) Type() Type { return TLockCancel }
func (m *LockCancel) encode(e *encoder) {
	e.u64(m.Handle)
	e.u64(m.Owner)
}
func (m *LockCancel) decode(d *decoder) {
	m.Handle = d.u64()
	m.Owner = d.u64()
}

func (*WriteSeq) Type() Type { return TWriteSeq }
func (m *WriteSeq) encode(e *encoder) {
	e.u64(m.Seq)
	e.u64(m.Handle)
	e.u64(m.Offset)
}
func (m *WriteSeq) decode(d *decoder) {
	m.Seq = d.u64()
	m.Handle = d.u64()
	m.Offset = d.u64()
}
func (m *WriteSeq) payload() []byte     { return m.Data }
func (m *WriteSeq) setPayload(p []byte) { m.Data = p }

// TOpenPinned is in the 90–99 range too (see OpenPinned).
const TOpenPinned Type = 96

// OpenPinned opens Path read-only like Open, for a client whose kernel
// knows the name as file (Ino, Gen). When the name now denotes another
// file and the server looked the name up as (Ino, Gen) a moment ago, it
// opens that file: the open then returns the file the client's own fresh
// lookup found, even if another client renamed a file over it in between.
type OpenPinned struct {
	Path     string
	Flags    uint32
	Ino, Gen uint64
}

func (*OpenPinned) Type() Type { return TOpenPinned }
func (m *OpenPinned) encode(e *encoder) {
	e.str(m.Path)
	e.u32(m.Flags)
	e.u64(m.Ino)
	e.u64(m.Gen)
}
func (m *OpenPinned) decode(d *decoder) {
	m.Path = d.str()
	m.Flags = d.u32()
	m.Ino = d.u64()
	m.Gen = d.u64()
}

// TLookupPinned is in the 90–99 range too (see LookupPinned).
const TLookupPinned Type = 97

// LookupPinned is Lookup that also pins the regular file it finds on the
// server for a moment, for the OpenPinned that follows it. A client sends
// it only for a name whose open it just answered ESTALE (the kernel's
// fresh lookup before its retry); every other lookup is a plain Lookup.
type LookupPinned struct{ Path string }

func (*LookupPinned) Type() Type          { return TLookupPinned }
func (m *LookupPinned) encode(e *encoder) { e.str(m.Path) }
func (m *LookupPinned) decode(d *decoder) { m.Path = d.str() }
