package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// Op is what an access does. Only reads are timed (all algorithms are
// write-through, as in seed 002); the other operations drive consistency,
// hints and deletion.
type Op uint8

const (
	OpRead   Op = iota // read one block
	OpWrite            // write one block (write-through to the server)
	OpOpen             // open a file; Block holds the file's size in blocks
	OpClose            // close a file; Block is ignored
	OpDelete           // delete a file; Block holds the file's size in blocks
)

var opNames = [...]string{"read", "write", "open", "close", "delete"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", o)
}

// ParseOp parses the trace-format name of an operation (read, write, open,
// close, delete; r, w, o, c, d also accepted).
func ParseOp(s string) (Op, error) {
	switch s {
	case "read", "r", "R":
		return OpRead, nil
	case "write", "w", "W":
		return OpWrite, nil
	case "open", "o":
		return OpOpen, nil
	case "close", "c":
		return OpClose, nil
	case "delete", "d":
		return OpDelete, nil
	}
	return 0, fmt.Errorf("unknown operation %q: want read, write, open, close or delete", s)
}

// Access is one trace record: client Client does Op on block Block of file
// File at virtual time Time (since the start of the trace). For OpOpen and
// OpDelete, Block is the file's length in blocks (0 if unknown). Size is
// the object's size in bytes when the trace carries one (object traces:
// File is the object id, Block 0), else 0; readers turn sizes into blocks
// or drop them before the algorithms see them (ReadOptions.Sizes). ID is
// the block's dense number (IDs) for a read or write, set by Run for
// algorithms that number blocks (Numberer), else 0; FileID likewise the
// file's, for those that also number files (IDs.NumberFiles). Next is the
// position of the next access to the same block as the trace gives it
// (libCacheSim's oracleGeneral formats: accesses counted from 1, every
// operation included), -1 if the trace says there is none, 0 if the trace
// does not say; sources that add, drop or reorder accesses set it to 0. It
// is a claim, not a fact: Optimal checks every one it takes (NextTaker).
type Access struct {
	Time   time.Duration
	Client int
	File   uint64
	Block  uint64
	Op     Op
	Size   uint32
	ID     uint32
	FileID uint32
	Next   int64
}

// Key is the block an access names, usable as a map key.
type Key struct {
	File  uint64
	Block uint64
}

// Key returns the block the access names.
func (a Access) Key() Key { return Key{a.File, a.Block} }

// Source yields accesses in order. Next returns io.EOF after the last one.
type Source interface {
	Next() (Access, error)
}

// Workload is a replayable sequence of accesses: every Open starts again
// from the first access and yields the same sequence (generators are seeded).
// Sources stream: memory grows with what a source must remember (unique
// blocks for generators), never with the trace length.
type Workload interface {
	Name() string
	Open() (Source, error)
}

// Closer is implemented by sources that hold files open; the runner closes
// them when done.
type Closer interface{ Close() error }

// CloseSource closes src if it holds resources.
func CloseSource(src Source) error {
	if c, ok := src.(Closer); ok {
		return c.Close()
	}
	return nil
}

// Layer is where a read was served from.
type Layer uint8

const (
	LayerNone   Layer = iota // not a read (write, open, close, delete)
	LayerLocal               // the client's own cache
	LayerRemote              // another client's cache (the cooperative cache)
	LayerServer              // server memory (disk cache, cooperative use or discard cache)
	LayerDisk                // the server's disk
)

var layerNames = [...]string{"none", "local", "remote", "server", "disk"}

func (l Layer) String() string {
	if int(l) < len(layerNames) {
		return layerNames[l]
	}
	return fmt.Sprintf("layer(%d)", l)
}

// Outcome is what an algorithm reports for one access.
type Outcome struct {
	// Layer serves the read (LayerNone for other operations).
	Layer Layer
	// Hops counts messages on the read's path beyond the layer's standard
	// path (a request forwarded on a wrong hint, a forward miss); each one
	// costs Params.MessageMs.
	Hops int
	// Discard is set when a LayerServer hit came from the discard cache.
	Discard bool
	// ExtraMs is added as is to the access time (algorithms with their own
	// cost model, like NASD, put their whole cost here with Layer set for
	// the hit distribution and Params latencies zeroed).
	ExtraMs float64
}

// Algorithm is a cooperative caching algorithm under simulation. It is a
// deterministic state machine: no goroutines, no clock, randomness only from
// a generator seeded with Params.Seed. Access performs one access, updates
// the caches and records the messages it sends in c; the runner accounts the
// outcome (hits and access time) and handles warm-up by handing a fresh
// Counters after the warm-up accesses, so c may differ between calls and
// must not be retained.
type Algorithm interface {
	Access(a Access, c *Counters) Outcome
}

// Toucher is implemented by algorithms whose per-access state is spread
// over more memory than the processor caches hold (many clients, many
// blocks), where an access waits mostly on loads from memory. When Run reads
// ahead, it simulates each batch in windows of TouchWindow accesses and,
// before it simulates a window, hands Touch the window after it: the
// algorithm loads the state those accesses will use (independent loads the
// CPU overlaps with each other and with the window being simulated), so
// that it is in the cache when they come. Touch only reads: it must not
// change anything the results depend on, and Access must not depend on
// whether or when Touch was called (a batch's first window is not touched
// ahead, and a source read in step is never touched).
type Toucher interface {
	// TouchWindow is the window's length in accesses (at least 1).
	TouchWindow() int
	// Touch loads the state of ahead's accesses, which come next, in order,
	// after the window being simulated.
	Touch(ahead []Access)
}

// Prescanner is implemented by algorithms that need to see the whole
// workload before the run (Optimal builds its next-use index). The runner
// calls Prescan on a fresh Source from the same Workload before the run.
type Prescanner interface {
	Prescan(src Source) error
}

// PrescanNumberer is implemented by Prescanners that number blocks in
// their prescan: Run numbers the prescan's reads and writes with these IDs
// on the reading goroutine, so Prescan gets them numbered (Access.ID).
type PrescanNumberer interface {
	PrescanIDs() *IDs
}

// NextTaker is implemented by Prescanners that can take the next uses a
// trace carries (Access.Next) instead of prescanning. Run first runs such
// an algorithm without a prescan, numbering the reads and writes with the
// IDs TakeNext returns (as for a Numberer); the algorithm checks every next
// use it takes against the blocks it sees, and as soon as one does not hold
// (or an access carries none), Run stops, prescans and runs again from the
// start. Either way the results are the prescan's.
type NextTaker interface {
	Prescanner
	// TakeNext readies a run that takes the next uses from the accesses.
	TakeNext() *IDs
	// NextHeld reports whether every next use taken so far held; with end
	// (the run is over), also that no block still waits for an access.
	NextHeld(end bool) bool
}

// Numberer is implemented by algorithms that keep their per-block state in
// slices indexed by dense block numbers: Run numbers the reads and writes
// with their IDs (Access.ID) as it reads the trace, ahead of the
// simulation (on another core when it reads ahead). Their Access numbers
// an access whose ID is 0 itself (callers other than Run).
type Numberer interface {
	IDs() *IDs
}

// Checker is implemented by algorithms that can verify their invariants
// (cache sizes, no duplicate global blocks, ...). Tests call it.
type Checker interface {
	Check() error
}

// Nodes in message accounting: clients are 0..Clients-1.
const (
	NodeServer  = -1
	NodeManager = -2
)

// Cause of a manager message (seed 002 figure 5.2).
type Cause uint8

const (
	CauseConsistency Cause = iota
	CauseLookup
	CauseReplacement
)

// ReplCause is the cause of a replacement message (seed 002 figure 5.3).
type ReplCause uint8

const (
	ReplForward   ReplCause = iota // forwarding a block to another client (and notifying the manager)
	ReplDelete                     // telling the manager a block was dropped
	ReplDuplicate                  // duplicate avoidance (is it a singlet? it became one)
)

// ErrConfig marks an invalid parameter.
var ErrConfig = errors.New("invalid simulation parameters")

// Params are the simulated system and cost model. Defaults (DefaultParams)
// are seed 002 table 5.2. JSON keys are the config-file names.
type Params struct {
	Clients           int     `json:"clients"`
	BlockSize         int64   `json:"block_size"`          // bytes
	ClientCacheBlocks int     `json:"client_cache_blocks"` // per client
	ServerCacheBlocks int     `json:"server_cache_blocks"`
	LocalMs           float64 `json:"local_ms"`   // hit in the local cache
	RemoteMs          float64 `json:"remote_ms"`  // hit in another client's cache
	ServerMs          float64 `json:"server_ms"`  // hit in server memory (table 5.2: = remote)
	DiskMs            float64 `json:"disk_ms"`    // read from the server's disk
	MessageMs         float64 `json:"message_ms"` // one extra message hop
	WarmUp            int     `json:"warmup_accesses"`
	Seed              int64   `json:"seed"`
	// NChance is N-chance's recirculation count n.
	NChance int `json:"nchance"`
	// GMSEpochReplacements is the number of replacements an epoch lasts (the
	// number of oldest blocks the manager locates, GMS's M); 0 means
	// Clients*ClientCacheBlocks/10 (at least 1).
	GMSEpochReplacements int `json:"gms_epoch_replacements"`
	// GMSEpochMaxAccesses ends an epoch after this many accesses even if
	// not enough replacements happened (GMS's T); 0 means no limit.
	GMSEpochMaxAccesses int `json:"gms_epoch_max_accesses"`
	// LoadWindow is the window over which the maximum network and client
	// loads are taken.
	LoadWindow time.Duration `json:"load_window_ns"`
	// MessageBytes is the size of a message without a block, for loads.
	MessageBytes int64 `json:"message_bytes"`
	// Options holds algorithm-specific settings as key=value (for example
	// hints' "server_memory": "discard"). Each algorithm documents its keys
	// and rejects values it cannot parse.
	Options map[string]string `json:"options,omitempty"`
}

// DefaultParams returns seed 002 table 5.2: 42 clients, 16 MB client
// caches, 128 MB server cache, 8 KB blocks, local 0.25 ms, remote 1.25 ms,
// disk 15.85 ms, message 0.2 ms, 400 000 warm-up accesses, n = 2.
func DefaultParams() Params {
	const bs = 8 << 10
	return Params{
		Clients:           42,
		BlockSize:         bs,
		ClientCacheBlocks: (16 << 20) / bs,
		ServerCacheBlocks: (128 << 20) / bs,
		LocalMs:           0.25,
		RemoteMs:          1.25,
		ServerMs:          1.25,
		DiskMs:            15.85,
		MessageMs:         0.2,
		WarmUp:            400000,
		Seed:              1,
		NChance:           2,
		LoadWindow:        time.Minute,
		MessageBytes:      64,
	}
}

// Validate reports the first invalid parameter.
func (p Params) Validate() error {
	switch {
	case p.Clients < 1:
		return fmt.Errorf("%w: clients = %d, want at least 1", ErrConfig, p.Clients)
	case p.BlockSize < 1:
		return fmt.Errorf("%w: block size = %d, want at least 1 byte", ErrConfig, p.BlockSize)
	case p.ClientCacheBlocks < 0 || p.ServerCacheBlocks < 0:
		return fmt.Errorf("%w: cache sizes must not be negative", ErrConfig)
	case p.LocalMs < 0 || p.RemoteMs < 0 || p.ServerMs < 0 || p.DiskMs < 0 || p.MessageMs < 0:
		return fmt.Errorf("%w: latencies must not be negative", ErrConfig)
	case p.WarmUp < 0:
		return fmt.Errorf("%w: warm-up = %d, want >= 0", ErrConfig, p.WarmUp)
	case p.NChance < 0:
		return fmt.Errorf("%w: nchance = %d, want >= 0", ErrConfig, p.NChance)
	case p.GMSEpochReplacements < 0 || p.GMSEpochMaxAccesses < 0:
		return fmt.Errorf("%w: GMS epoch lengths must not be negative", ErrConfig)
	case p.LoadWindow <= 0:
		return fmt.Errorf("%w: load window = %v, want > 0", ErrConfig, p.LoadWindow)
	}
	return nil
}

// Option returns the algorithm option key, or def when unset.
func (p Params) Option(key, def string) string {
	if v, ok := p.Options[key]; ok {
		return v
	}
	return def
}

// WithOption returns a copy of p with option key set to value (the map is
// copied, so Params values can be shared between runs).
func (p Params) WithOption(key, value string) Params {
	m := make(map[string]string, len(p.Options)+1)
	for k, v := range p.Options {
		m[k] = v
	}
	m[key] = value
	p.Options = m
	return p
}

// Counters are what an algorithm records during a run. Algorithms call the
// methods; the runner turns the counts into Metrics.
type Counters struct {
	// Manager messages (sent and received by the manager) by cause.
	ManagerMsgs [3]int64
	// LookupMsgs counts the messages spent locating blocks on local read
	// misses, request and reply included (seed 002 5.2.2: 3 for
	// manager-based lookup, 2 for a correct hint).
	LookupMsgs int64
	// ReplMsgs counts replacement messages by ReplCause.
	ReplMsgs [3]int64
	// Hint accuracy (seed 002 table 5.4), counted on local read misses.
	HintSaysClient   int64 // hints say a client caches the block
	HintCorrect      int64 // ... and some client does
	HintAbsCorrect   int64 // ... and the hinted client does
	HintFalseNeg     int64 // hints say no client, yet one does
	Forwards         int64 // blocks forwarded to another cache on replacement
	UnnecessaryFwds  int64 // forwarded blocks deleted before becoming the last copy
	ForwardedReqs    int64 // requests the server forwarded to a client (directory)
	ForwardMisses    int64 // ... that the client no longer had
	Invalidations    int64 // copies invalidated by writes
	ServerMemLookups int64 // reads that looked in server memory
	DiscardInserts   int64 // blocks placed in the discard cache

	now         time.Duration
	window      time.Duration
	msgBytes    int64
	blockBytes  int64
	netBytes    int64
	clientBytes []int64
	winStart    time.Duration
	winLast     time.Duration // the current window's last instant (startWindow)
	winNet      int64
	winClient   []int64 // bytes per client in the current window
	maxWinNet   int64
	maxWinCli   int64
}

// NewCounters returns counters for a run with p's clients and loads.
func NewCounters(p Params) *Counters {
	c := &Counters{
		window:      p.LoadWindow,
		msgBytes:    p.MessageBytes,
		blockBytes:  p.BlockSize,
		clientBytes: make([]int64, p.Clients),
		winClient:   make([]int64, p.Clients),
	}
	c.startWindow(0)
	return c
}

// Manager records n messages sent or received by the manager for cause.
func (c *Counters) Manager(cause Cause, n int) { c.ManagerMsgs[cause] += int64(n) }

// Replacement records n replacement messages of the given cause.
func (c *Counters) Replacement(cause ReplCause, n int) { c.ReplMsgs[cause] += int64(n) }

// Lookup records n lookup messages.
func (c *Counters) Lookup(n int) { c.LookupMsgs += int64(n) }

// Msg records one message from node from to node to on the network, carrying
// a block or not, for the network and client loads. It does not count toward
// the manager or lookup counts (call those too). It adds to the current load
// window only; the totals take each window's bytes when it closes.
func (c *Counters) Msg(from, to int, carriesBlock bool) {
	n := c.msgBytes
	if carriesBlock {
		n += c.blockBytes
	}
	c.winNet += n
	if uint(from) < uint(len(c.winClient)) {
		c.winClient[from] += n
	}
	if uint(to) < uint(len(c.winClient)) {
		c.winClient[to] += n
	}
}

// Now is the virtual time of the access being simulated.
func (c *Counters) Now() time.Duration { return c.now }

// advance moves virtual time to t, closing load windows on the way. It must
// stay within Go's inlining budget (go build -gcflags=-m=2 ./internal/sim
// | grep advance): the run loop calls it on every access, so the window's
// bookkeeping is in roll, which runs once a window.
func (c *Counters) advance(t time.Duration) {
	if t > c.now { // traces may carry unordered times; time never goes back
		c.now = t
	}
	if c.now > c.winLast {
		c.roll()
	}
}

// roll closes the current load window and starts the one holding now.
// It is kept out of advance, which would otherwise grow past the budget.
//
//go:noinline
func (c *Counters) roll() {
	c.closeWindow()
	c.startWindow(c.now - (c.now-c.winStart)%c.window)
}

// startWindow starts a load window at s: winLast is its last instant
// (t > winLast is t-s >= window without overflow), the end of time if
// there are no windows.
func (c *Counters) startWindow(s time.Duration) {
	c.winStart = s
	c.winLast = math.MaxInt64
	if c.window > 0 && s <= math.MaxInt64-c.window {
		c.winLast = s + c.window - 1
	}
}

// closeWindow takes the current window's maxima, adds its bytes to the
// totals and empties it.
func (c *Counters) closeWindow() {
	c.maxWinNet = max(c.maxWinNet, c.winNet)
	c.netBytes += c.winNet
	for k, v := range c.winClient {
		c.maxWinCli = max(c.maxWinCli, v)
		c.clientBytes[k] += v
		c.winClient[k] = 0
	}
	c.winNet = 0
}

// Metrics are the results of one run, with the seeds' names. The JSON keys
// are stable and documented in docs/sim.md. Ratios whose denominator is zero
// (e.g. hint_correctness for an algorithm without hints) are 0.
type Metrics struct {
	Algorithm string `json:"algorithm"`
	Config    string `json:"config"`
	Workload  string `json:"workload"`

	Accesses int64 `json:"accesses"` // counted accesses (after warm-up)
	Reads    int64 `json:"reads"`
	WarmUp   int64 `json:"warmup_accesses"`

	AvgAccessMs float64   `json:"avg_access_ms"`
	Breakdown   Breakdown `json:"breakdown_ms"`
	Hits        Hits      `json:"hits"`
	HitDistr    HitDistr  `json:"hit_distribution"`

	LocalHitRatio  float64 `json:"local_hit_ratio"`
	ServerHitRatio float64 `json:"server_hit_ratio"` // server memory hits / reads
	DiskAccesses   int64   `json:"disk_accesses"`

	ManagerMsgsPerAccess float64     `json:"manager_msgs_per_access"`
	ManagerByCause       ByCauseRate `json:"manager_msgs_by_cause"`
	LookupMsgsPerMiss    float64     `json:"lookup_msgs_per_miss"`
	ReplMsgsPerLocalMiss float64     `json:"replacement_msgs_per_local_miss"`
	ReplByCause          ReplRate    `json:"replacement_msgs_by_cause"`

	HintCorrectness     float64 `json:"hint_correctness"`
	AbsoluteCorrectness float64 `json:"absolute_correctness"`
	FalseNegatives      float64 `json:"false_negatives"`
	UnnecessaryForwards float64 `json:"unnecessary_forwards"`
	DiscardHitRatio     float64 `json:"discard_hit_ratio"` // discard-cache hits / reads
	ForwardMissRate     float64 `json:"forward_miss_rate"` // forward misses / forwarded requests
	InvalidationsPerAcc float64 `json:"invalidations_per_access"`

	NetworkLoadAvgKbps float64 `json:"network_load_avg_kbps"`
	NetworkLoadMaxKbps float64 `json:"network_load_max_kbps"`
	ClientLoadAvgKbps  float64 `json:"client_load_avg_kbps"`
	ClientLoadMaxKbps  float64 `json:"client_load_max_kbps"`

	Counts Counts `json:"counts"`
}

// Breakdown is the average access time split by where reads were served,
// plus the extra message hops. The parts sum to AvgAccessMs.
type Breakdown struct {
	Local   float64 `json:"local"`
	Remote  float64 `json:"remote"`
	Server  float64 `json:"server"`
	Disk    float64 `json:"disk"`
	Message float64 `json:"message"`
	Extra   float64 `json:"extra"`
}

// Hits counts reads by the layer that served them.
type Hits struct {
	Local   int64 `json:"local"`
	Remote  int64 `json:"remote"`
	Server  int64 `json:"server"`
	Disk    int64 `json:"disk"`
	Discard int64 `json:"discard"` // part of Server: from the discard cache
}

// HitDistr is Hits as fractions of reads (seed 002 table 5.3).
type HitDistr struct {
	Local  float64 `json:"local"`
	Remote float64 `json:"remote"`
	Server float64 `json:"server"`
	Disk   float64 `json:"disk"`
}

// ByCauseRate is manager messages per access by cause.
type ByCauseRate struct {
	Consistency float64 `json:"consistency"`
	Lookup      float64 `json:"lookup"`
	Replacement float64 `json:"replacement"`
}

// ReplRate is replacement messages per local miss by cause.
type ReplRate struct {
	Forward   float64 `json:"forward"`
	Delete    float64 `json:"delete"`
	Duplicate float64 `json:"duplicate"`
}

// Counts are the raw counters behind the ratios.
type Counts struct {
	ManagerMsgs     int64   `json:"manager_msgs"`
	LookupMsgs      int64   `json:"lookup_msgs"`
	ReplMsgs        int64   `json:"replacement_msgs"`
	LocalMisses     int64   `json:"local_misses"`
	Forwards        int64   `json:"forwards"`
	ForwardedReqs   int64   `json:"forwarded_requests"`
	ForwardMisses   int64   `json:"forward_misses"`
	Invalidations   int64   `json:"invalidations"`
	Hops            int64   `json:"extra_hops"`
	DiscardInserts  int64   `json:"discard_inserts"`
	NetworkBytes    int64   `json:"network_bytes"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// Recorder accumulates outcomes into Metrics; Run uses it, and algorithms
// with their own drivers (NASD) can too.
type Recorder struct {
	p        Params
	c        *Counters
	start    time.Duration
	accesses int64
	reads    int64
	layers   [8]int64 // reads by Layer (only LayerLocal..LayerDisk count)
	discard  int64    // LayerServer reads from the discard cache
	hops     int64
	extraMs  float64
}

// NewRecorder starts recording with fresh counters.
func NewRecorder(p Params) *Recorder {
	return &Recorder{p: p, c: NewCounters(p)}
}

// Counters returns the counters the algorithm must be handed for the next
// access.
func (r *Recorder) Counters() *Counters { return r.c }

// Reset forgets everything recorded so far (end of warm-up), keeping the
// virtual time.
func (r *Recorder) Reset() {
	now := r.c.now
	*r = Recorder{p: r.p, c: NewCounters(r.p), start: now}
	r.c.now = now
	r.c.startWindow(now)
}

// Begin sets the virtual time t of the access about to be simulated.
func (r *Recorder) Begin(t time.Duration) { r.c.advance(t) }

// Record accounts the outcome of one access doing op.
func (r *Recorder) Record(op Op, o Outcome) {
	r.accesses++
	if op != OpRead {
		return
	}
	r.reads++
	r.layers[o.Layer&7]++ // an indexed add, not a branch on where the read hit
	if o.Discard && o.Layer == LayerServer {
		r.discard++
	}
	r.hops += int64(o.Hops)
	r.extraMs += o.ExtraMs
}

// hits returns the reads counted so far by the layer that served them.
func (r *Recorder) hits() Hits {
	return Hits{Local: r.layers[LayerLocal], Remote: r.layers[LayerRemote],
		Server: r.layers[LayerServer], Disk: r.layers[LayerDisk], Discard: r.discard}
}

// Metrics computes the results so far.
func (r *Recorder) Metrics(algorithm, config, workload string, warmUp int64) Metrics {
	c, p, hits := r.c, r.p, r.hits()
	c.closeWindow()
	m := Metrics{Algorithm: algorithm, Config: config, Workload: workload,
		Accesses: r.accesses, Reads: r.reads, WarmUp: warmUp, Hits: hits}
	rd := float64(r.reads)
	if r.reads > 0 {
		m.Breakdown = Breakdown{
			Local:   float64(hits.Local) * p.LocalMs / rd,
			Remote:  float64(hits.Remote) * p.RemoteMs / rd,
			Server:  float64(hits.Server) * p.ServerMs / rd,
			Disk:    float64(hits.Disk) * p.DiskMs / rd,
			Message: float64(r.hops) * p.MessageMs / rd,
			Extra:   r.extraMs / rd,
		}
		b := m.Breakdown
		m.AvgAccessMs = b.Local + b.Remote + b.Server + b.Disk + b.Message + b.Extra
		m.HitDistr = HitDistr{ratio(hits.Local, r.reads), ratio(hits.Remote, r.reads),
			ratio(hits.Server, r.reads), ratio(hits.Disk, r.reads)}
	}
	m.LocalHitRatio = m.HitDistr.Local
	m.ServerHitRatio = m.HitDistr.Server
	m.DiskAccesses = hits.Disk
	misses := r.reads - hits.Local
	mgr := c.ManagerMsgs[0] + c.ManagerMsgs[1] + c.ManagerMsgs[2]
	m.ManagerMsgsPerAccess = ratio(mgr, r.accesses)
	m.ManagerByCause = ByCauseRate{ratio(c.ManagerMsgs[CauseConsistency], r.accesses),
		ratio(c.ManagerMsgs[CauseLookup], r.accesses), ratio(c.ManagerMsgs[CauseReplacement], r.accesses)}
	m.LookupMsgsPerMiss = ratio(c.LookupMsgs, misses)
	repl := c.ReplMsgs[0] + c.ReplMsgs[1] + c.ReplMsgs[2]
	m.ReplMsgsPerLocalMiss = ratio(repl, misses)
	m.ReplByCause = ReplRate{ratio(c.ReplMsgs[ReplForward], misses),
		ratio(c.ReplMsgs[ReplDelete], misses), ratio(c.ReplMsgs[ReplDuplicate], misses)}
	m.HintCorrectness = ratio(c.HintCorrect, c.HintSaysClient)
	m.AbsoluteCorrectness = ratio(c.HintAbsCorrect, c.HintCorrect)
	m.FalseNegatives = ratio(c.HintFalseNeg, misses)
	m.UnnecessaryForwards = ratio(c.UnnecessaryFwds, c.Forwards)
	m.DiscardHitRatio = ratio(hits.Discard, r.reads)
	m.ForwardMissRate = ratio(c.ForwardMisses, c.ForwardedReqs)
	m.InvalidationsPerAcc = ratio(c.Invalidations, r.accesses)
	dur := (c.now - r.start).Seconds()
	if dur > 0 {
		m.NetworkLoadAvgKbps = float64(c.netBytes) * 8 / 1000 / dur
		var sum int64
		for _, b := range c.clientBytes {
			sum += b
		}
		m.ClientLoadAvgKbps = float64(sum) * 8 / 1000 / dur / float64(max(1, len(c.clientBytes)))
		w := min(c.window.Seconds(), dur)
		m.NetworkLoadMaxKbps = float64(c.maxWinNet) * 8 / 1000 / w
		m.ClientLoadMaxKbps = float64(c.maxWinCli) * 8 / 1000 / w
	}
	m.Counts = Counts{ManagerMsgs: mgr, LookupMsgs: c.LookupMsgs, ReplMsgs: repl, LocalMisses: misses,
		Forwards: c.Forwards, ForwardedReqs: c.ForwardedReqs, ForwardMisses: c.ForwardMisses,
		Invalidations: c.Invalidations, Hops: r.hops, DiscardInserts: c.DiscardInserts,
		NetworkBytes: c.netBytes, DurationSeconds: dur}
	return m
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// drain reads a source to its end; used by prescans and tests.
func drain(src Source, f func(Access)) error {
	for {
		a, err := src.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		f(a)
	}
}

// ForEach calls f for every access of w, in order.
func ForEach(w Workload, f func(Access)) error {
	src, err := w.Open()
	if err != nil {
		return err
	}
	defer CloseSource(src)
	return drain(src, f)
}
