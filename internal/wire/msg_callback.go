package wire

// Message types 113–129: callbacks (issue 9). The server promises a client
// to tell it before anything it fetched changes; see docs/protocol.md,
// "Callbacks", and internal/server/callbacks.go.
const (
	TCallbackRegister Type = 113 // client → server: grant me callbacks on what I fetch on this connection
	TCallbackBreak    Type = 114 // server → client: these objects changed; answered with OK (the ack)
)

// CallbackRegister asks the server to grant callbacks on everything the
// client fetches from now on over this connection (lookups, getattrs,
// listings, opens). A server that does not know it answers ENOSYS and the
// client caches nothing past its timeouts. Flags is reserved (0).
type CallbackRegister struct {
	Flags uint32
}

// Names of BreakItem that are not entry names (no entry is called "" or
// contains "/").
const (
	BreakAttr    = ""  // the object's attributes (and, for a file, its data) changed
	BreakEntries = "/" // any entry of the directory may have changed
)

// BreakItem names what changed: the attributes (and data) of object Ino
// when Name is BreakAttr, or the entry Name of directory Ino (created,
// removed, renamed from or to), or every entry when Name is BreakEntries.
// An entry change also changes the directory's attributes (mtime): the
// client drops both.
type BreakItem struct {
	Ino  uint64
	Name string
}

// CallbackBreak tells a holder that the callbacks on Items' objects are
// broken: it drops what it cached of them (a directory's entries, and the
// subtree below a changed entry) and answers OK. All breaks every callback
// the client holds (Items is then empty). Kind says what the holder must do
// before it answers: CallbackDir and CallbackRead are "drop"; a write
// delegation's (CallbackWrite) is "flush the file, then answer". Cause is
// the client id (Welcome.ClientID) of the client whose request broke the
// callbacks, 0 for none (a change made directly in the export): a proxy
// that holds write delegations for the clients behind it does not recall
// the client that caused the recall, as the server does not recall the
// requester (its clients' ids are the upstream's, passed through).
type CallbackBreak struct {
	Kind  uint8
	All   bool
	Cause uint32
	Items []BreakItem
}

// Callback kinds: what a grant promises and what its break asks. A break
// message carries the highest kind among the holder's broken grants.
const (
	// CallbackDir: a directory's attributes and entries. Its breaks do
	// not revoke it: the holder keeps being told of every change of the
	// directory (its kernel keeps the names it looked up for long).
	CallbackDir uint8 = 1
	// CallbackRead: a file's attributes and data, revoked by its first
	// break (one break per burst of writes).
	CallbackRead uint8 = 2
	// CallbackWrite: a write delegation of a write-back client
	// (DelegateWrite, 150); its break means "flush the file, then answer".
	CallbackWrite uint8 = 3
)

func newCallbackMsg(t Type) Msg {
	switch t {
	case TCallbackRegister:
		return &CallbackRegister{}
	case TCallbackBreak:
		return &CallbackBreak{}
	}
	return nil
}

func (*CallbackRegister) Type() Type          { return TCallbackRegister }
func (m *CallbackRegister) encode(e *encoder) { e.u32(m.Flags) }
func (m *CallbackRegister) decode(d *decoder) { m.Flags = d.u32() }
func (*CallbackBreak) Type() Type             { return TCallbackBreak }
func (m *CallbackBreak) encode(e *encoder) {
	e.u32(uint32(m.Kind))
	e.boolean(m.All)
	e.u32(m.Cause)
	e.u64(uint64(len(m.Items)))
	for _, it := range m.Items {
		e.u64(it.Ino)
		e.str(it.Name)
	}
}
func (m *CallbackBreak) decode(d *decoder) {
	k := d.u32()
	if k > 255 {
		d.fail("callback kind")
	}
	m.Kind = uint8(k)
	m.All = d.boolean()
	m.Cause = d.u32()
	n := d.count(2)
	m.Items = make([]BreakItem, n)
	for i := range m.Items {
		m.Items[i].Ino = d.u64()
		m.Items[i].Name = d.str()
	}
}
