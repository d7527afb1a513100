package wire

// Message types 180–189: the cluster warm-up (`coopfs warmup --cluster`,
// issue 12). The initiating client sends the file list to the server, which
// splits it into one share per client and pushes each client its share
// (phase 1: from the server), then, once every share is in, the rest
// (phase 2: from the peers, through the policy). Clients report their
// progress; the initiator polls the job. See docs/protocol.md, "Cluster
// warm-up", and internal/server/warmup.go.
const (
	TWarmupStart   Type = 180 // initiator → server: warm these files on these clients; answered by WarmupStarted
	TWarmupStarted Type = 181 // the job's id and the clients taking part
	TWarmupAssign  Type = 182 // server → client: fetch these ranges (a share or the rest); answered with OK at once
	TWarmupReport  Type = 183 // client → server: bytes fetched of an assignment so far, or its end; answered with OK
	TWarmupStatus  Type = 184 // initiator → server: how is the job going; answered by WarmupState
	TWarmupState   Type = 185 // the job's progress
)

// Warm-up phases.
const (
	WarmupShares uint8 = 1 // every client fetches its share from the server
	WarmupPeers  uint8 = 2 // every client fetches the rest, from its peers
	WarmupDone   uint8 = 3
)

// WarmupItem is a byte range of a file, by path relative to the export
// root; Len 0 runs to the end of the file. Size is the file's size when it
// was listed.
type WarmupItem struct {
	Path           string
	Off, Len, Size uint64
}

// WarmupStart asks the server to warm Items on the clients named in
// Clients (their Hello names; empty: every connected client). UID and GID
// are the initiating user's: the clients read as that user.
type WarmupStart struct {
	Clients  []string
	UID, GID uint32
	Items    []WarmupItem
}

// WarmupStarted answers WarmupStart: the job, and the clients taking part.
type WarmupStarted struct {
	Job     uint64
	Clients []string
}

// WarmupAssign asks a client to fetch Items into its caches as UID/GID,
// in phase Phase of job Job. The client answers with OK at once and
// reports with WarmupReport. In phase 2, From[i] is the peer listener of
// the member that fetched Items[i] in phase 1 ("" when unknown): where to
// read it from.
type WarmupAssign struct {
	Job      uint64
	Phase    uint8
	Seq      uint32 // the assignment's number within the job, echoed by its reports
	UID, GID uint32
	Items    []WarmupItem
	From     []string
}

// WarmupReport tells the server how far a client got with assignment Seq
// of job Job: Bytes so far; Done at its end, with Err naming what failed.
type WarmupReport struct {
	Job   uint64
	Seq   uint32
	Bytes uint64
	Done  bool
	Err   string
}

// WarmupStatus asks for the progress of job Job.
type WarmupStatus struct {
	Job uint64
}

// WarmupState is a job's progress: the phase, the clients taking part
// (Names) and how many finished, bytes fetched by all of them against the
// files' size times the clients, and at the end (Phase WarmupDone) the
// errors, if any.
type WarmupState struct {
	Phase       uint8
	ClientsDone uint32
	Names       []string
	Bytes       uint64
	TotalBytes  uint64
	Err         string
}

func newWarmupMsg(t Type) Msg {
	switch t {
	case TWarmupStart:
		return &WarmupStart{}
	case TWarmupStarted:
		return &WarmupStarted{}
	case TWarmupAssign:
		return &WarmupAssign{}
	case TWarmupReport:
		return &WarmupReport{}
	case TWarmupStatus:
		return &WarmupStatus{}
	case TWarmupState:
		return &WarmupState{}
	}
	return nil
}

func encodeWarmupItems(e *encoder, items []WarmupItem) {
	encodeList(e, items, func(e *encoder, it WarmupItem) {
		e.str(it.Path)
		e.u64(it.Off)
		e.u64(it.Len)
		e.u64(it.Size)
	})
}

func decodeWarmupItems(d *decoder) []WarmupItem {
	return decodeList(d, 4, func(d *decoder) WarmupItem {
		return WarmupItem{Path: d.str(), Off: d.u64(), Len: d.u64(), Size: d.u64()}
	})
}

func encodeStrs(e *encoder, ss []string) {
	e.u64(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

func decodeStrs(d *decoder) []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

func (*WarmupStart) Type() Type { return TWarmupStart }
func (m *WarmupStart) encode(e *encoder) {
	encodeStrs(e, m.Clients)
	e.u32(m.UID)
	e.u32(m.GID)
	encodeWarmupItems(e, m.Items)
}
func (m *WarmupStart) decode(d *decoder) {
	m.Clients = decodeStrs(d)
	m.UID, m.GID = d.u32(), d.u32()
	m.Items = decodeWarmupItems(d)
}

func (*WarmupStarted) Type() Type { return TWarmupStarted }
func (m *WarmupStarted) encode(e *encoder) {
	e.u64(m.Job)
	encodeStrs(e, m.Clients)
}
func (m *WarmupStarted) decode(d *decoder) {
	m.Job = d.u64()
	m.Clients = decodeStrs(d)
}

func (*WarmupAssign) Type() Type { return TWarmupAssign }
func (m *WarmupAssign) encode(e *encoder) {
	e.u64(m.Job)
	e.u64(uint64(m.Phase))
	e.u32(m.Seq)
	e.u32(m.UID)
	e.u32(m.GID)
	encodeWarmupItems(e, m.Items)
	encodeStrs(e, m.From)
}
func (m *WarmupAssign) decode(d *decoder) {
	m.Job = d.u64()
	m.Phase = uint8(d.u64())
	m.Seq = d.u32()
	m.UID, m.GID = d.u32(), d.u32()
	m.Items = decodeWarmupItems(d)
	m.From = decodeStrs(d)
}

func (*WarmupReport) Type() Type { return TWarmupReport }
func (m *WarmupReport) encode(e *encoder) {
	e.u64(m.Job)
	e.u32(m.Seq)
	e.u64(m.Bytes)
	e.boolean(m.Done)
	e.str(m.Err)
}
func (m *WarmupReport) decode(d *decoder) {
	m.Job = d.u64()
	m.Seq = d.u32()
	m.Bytes = d.u64()
	m.Done = d.boolean()
	m.Err = d.str()
}

func (*WarmupStatus) Type() Type          { return TWarmupStatus }
func (m *WarmupStatus) encode(e *encoder) { e.u64(m.Job) }
func (m *WarmupStatus) decode(d *decoder) { m.Job = d.u64() }

func (*WarmupState) Type() Type { return TWarmupState }
func (m *WarmupState) encode(e *encoder) {
	e.u64(uint64(m.Phase))
	e.u32(m.ClientsDone)
	encodeStrs(e, m.Names)
	e.u64(m.Bytes)
	e.u64(m.TotalBytes)
	e.str(m.Err)
}
func (m *WarmupState) decode(d *decoder) {
	m.Phase = uint8(d.u64())
	m.ClientsDone = d.u32()
	m.Names = decodeStrs(d)
	m.Bytes = d.u64()
	m.TotalBytes = d.u64()
	m.Err = d.str()
}
