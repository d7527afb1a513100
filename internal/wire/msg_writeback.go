package wire

// Message types 150–159: write delegations of write-back clients (issue
// 11). A write delegation is a callback of kind CallbackWrite; its break
// (a recall) asks the holder to write the file back, then answer. See
// docs/protocol.md, "Write delegations", and internal/server/recall.go.
const (
	TDelegateWrite  Type = 150 // client → server: I hold unflushed writes to Ino; answered with OK
	TDelegateReturn Type = 151 // client → server: Ino is written back; answered with OK
)

// DelegateWrite tells the server that the client holds writes to file Ino
// that are not written back yet (write-back policy). Another client's open
// of the file recalls them first: the server breaks this client's
// delegation with a CallbackBreak of kind CallbackWrite, and the holder
// writes the file back before it answers. The client must be registered
// for callbacks; otherwise the server answers EOPNOTSUPP. The server grants
// it only to a client that may write the file: one that opened it for
// writing on this connection, or whose caller (the As around it) may write
// the file Path names now (a client declaring again on a new connection),
// or that left it orphaned (its name and certificate); else EACCES.
type DelegateWrite struct {
	Ino  uint64
	Path string // the file's path in the export, "" if unknown
}

// DelegateReturn tells the server that the client wrote file Ino back and
// holds no unflushed writes to it any more. Ino 0 (SettledIno) says that
// the client, on a new connection, has declared every file it still holds
// unflushed writes to: the files a client of its name left orphaned and it
// did not declare have nothing left to write back.
type DelegateReturn struct {
	Ino uint64
}

// SettledIno is DelegateReturn's Ino for "every unflushed write declared".
const SettledIno = 0

func newWriteBackMsg(t Type) Msg {
	switch t {
	case TDelegateWrite:
		return &DelegateWrite{}
	case TDelegateReturn:
		return &DelegateReturn{}
	}
	return nil
}

func (*DelegateWrite) Type() Type           { return TDelegateWrite }
func (m *DelegateWrite) encode(e *encoder)  { e.u64(m.Ino); e.str(m.Path) }
func (m *DelegateWrite) decode(d *decoder)  { m.Ino = d.u64(); m.Path = d.str() }
func (*DelegateReturn) Type() Type          { return TDelegateReturn }
func (m *DelegateReturn) encode(e *encoder) { e.u64(m.Ino) }
func (m *DelegateReturn) decode(d *decoder) { m.Ino = d.u64() }
