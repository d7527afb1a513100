package hints

import (
	"fmt"
	"slices"

	"github.com/coopfs/coopfs/internal/block"
)

// MemoryUse is how the server uses its memory (seed 002 section 4.5.1).
type MemoryUse uint8

const (
	// MemoryDiscard: the discard cache, holding young master copies that
	// clients evicted by mistake; it evicts its oldest block first. The
	// hint-based algorithm's choice and the default.
	MemoryDiscard MemoryUse = iota
	// MemoryDiskCache: a traditional LRU cache of blocks read from disk or
	// written through.
	MemoryDiskCache
	// MemoryCoop: part of the cooperative cache: the server memory is a
	// participant (ServerConfig.CoopID) that clients forward master copies
	// to like any other; blocks from disk are not kept.
	MemoryCoop
)

var memoryUseNames = [...]string{"discard", "disk", "coop"}

func (m MemoryUse) String() string {
	if int(m) < len(memoryUseNames) {
		return memoryUseNames[m]
	}
	return fmt.Sprintf("memory(%d)", m)
}

// ParseMemoryUse parses "discard", "disk" (also "diskcache") or "coop".
func ParseMemoryUse(s string) (MemoryUse, error) {
	switch s {
	case "discard":
		return MemoryDiscard, nil
	case "disk", "diskcache", "disk-cache":
		return MemoryDiskCache, nil
	case "coop", "cooperative":
		return MemoryCoop, nil
	}
	return 0, fmt.Errorf("%w: server memory use %q, want discard, disk or coop", ErrConfig, s)
}

// ServerConfig configures the server (manager and server memory).
type ServerConfig struct {
	// MemoryBlocks is the size of the server memory in blocks (0: none).
	MemoryBlocks int
	// Memory is how it is used.
	Memory MemoryUse
	// CoopID names the server memory as a participant in MemoryCoop; it
	// must differ from every client id. Clients list it among their Peers.
	CoopID ClientID
	// Clients are the client ids (the coop participant's peers).
	Clients []ClientID
	// Watch, if set, is called whenever a block enters (in) or leaves
	// (!in) the disk or discard cache, after the change: a live server
	// keeps the blocks' bytes beside this state machine and frees them on
	// !in. It must not call back into the server.
	Watch func(b block.ID, in bool)
	// DenseFiles says file ids are small dense numbers (ClientConfig).
	DenseFiles bool
}

func (c *ServerConfig) validate() error {
	if c.MemoryBlocks < 0 {
		return fmt.Errorf("%w: server memory of %d blocks", ErrConfig, c.MemoryBlocks)
	}
	if c.Memory > MemoryCoop {
		return fmt.Errorf("%w: server memory use %d", ErrConfig, c.Memory)
	}
	if c.Memory == MemoryCoop {
		if c.CoopID < 0 {
			return fmt.Errorf("%w: coop id %d, want >= 0", ErrConfig, c.CoopID)
		}
		for _, id := range c.Clients {
			if id == c.CoopID {
				return fmt.Errorf("%w: coop id %d is also a client id", ErrConfig, id)
			}
		}
	}
	return nil
}

// fileState is the manager's view of one file.
// Pointer-free and 32 bytes: a simulated server keeps one for every file
// ever read (every object of an object trace), looked up on every access.
type fileState struct {
	version  block.Version // grows with every new writer
	lastBoot BootID
	last     ClientID  // last client that opened the file (NoClient: none)
	writer   ClientID  // holder of the write token (NoClient: none)
	holders  holderSet // clients holding a token (may cache blocks)
}

// OpenResult is the manager's answer to an open (or a token request).
type OpenResult struct {
	// HintsFrom is the last client that opened the file: the manager asks
	// it for its hints (Client.ExportHints) and hands them to the opener
	// (Client.ImportHints). NoClient when there is no one to ask.
	HintsFrom ClientID
	HintsBoot BootID
	// Revoke lists the clients whose tokens are revoked for a writer: each
	// drops its blocks and hints of the file (Client.Invalidate).
	Revoke []ClientID
	// Downgraded is the former writer whose write token became a read
	// token (its blocks stay valid: write-through), or NoClient.
	Downgraded ClientID
	// Version is the file's current version: blocks of older versions are
	// stale wherever they are cached. A new writer makes a new version; the
	// writer keeps its own blocks (Client.Revalidate).
	Version block.Version
	// NewVersion is set when this open made a new version.
	NewVersion bool
}

// FetchResult says where the server found a requested block.
type FetchResult struct {
	Memory  bool // in server memory (else from disk)
	Discard bool // ... in the discard cache (the block leaves it)
	// Master is set when the requester gets the master copy (from disk, a
	// disk cache or the discard cache); not when the server memory is a
	// participant that keeps the master copy (MemoryCoop).
	Master bool
}

// Server is the manager (file tokens, hint hand-out) and the server memory,
// as a state machine. Not safe for concurrent use.
type Server struct {
	cfg   ServerConfig
	files serverFiles // the file states
	boots idMap[BootID]
	down  idMap[bool]
	mem   *ageCache // disk cache or discard cache
	coop  *Client   // MemoryCoop participant
	revok []ClientID
	quick quickTokens // Token's answers for reads while every version is 1
}

// NewServer returns a server with empty memory and no file state.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg}
	s.files.dense = cfg.DenseFiles
	if cfg.DenseFiles {
		s.quick.init(cfg.Clients)
	}
	switch {
	case cfg.Memory == MemoryCoop && cfg.MemoryBlocks > 0:
		c, err := NewClient(ClientConfig{ID: cfg.CoopID, Boot: 1, CacheBlocks: cfg.MemoryBlocks,
			Peers: cfg.Clients, Discard: DiscardNever, ServeOnly: true, DenseFiles: cfg.DenseFiles})
		if err != nil {
			return nil, err
		}
		s.coop = c
	case cfg.Memory != MemoryCoop:
		s.mem = newAgeCache(cfg.MemoryBlocks, newFileIndex(cfg.DenseFiles), cfg.Watch)
	}
	return s, nil
}

// Memory returns how the server uses its memory.
func (s *Server) Memory() MemoryUse { return s.cfg.Memory }

// Coop returns the server memory's participant in MemoryCoop (nil
// otherwise): forwards to CoopID are delivered to it (AcceptForward).
func (s *Server) Coop() *Client { return s.coop }

// MemoryLen returns how many blocks the server memory holds.
func (s *Server) MemoryLen() int {
	if s.coop != nil {
		return s.coop.Len()
	}
	if s.mem != nil {
		return s.mem.len()
	}
	return 0
}

// lookup returns file f's state, nil if the server has none (valid until
// the next file call).
func (s *Server) lookup(f uint64) *fileState { return s.files.find(f) }

// file returns file f's state, made if need be (valid until the next
// file call).
func (s *Server) file(f uint64) *fileState {
	if fs := s.files.find(f); fs != nil {
		return fs
	}
	fs := s.files.add(f)
	*fs = fileState{last: NoClient, writer: NoClient, holders: holderSet{more: fs.holders.more}, version: 1}
	return fs
}

// serverFiles is the manager's per-file state: in a fileSlab, or, when
// file ids are dense (ServerConfig.DenseFiles: the simulator's), in pages
// indexed by the id itself, a state of version 0 being none (a file's
// version starts at 1 and only grows): a lookup is then one memory access
// fewer (no id-to-record map).
type serverFiles struct {
	dense bool
	slab  fileSlab[fileState]
	pages [][]fileState // dense: file f's state is pages[f/slabPage][f%slabPage]
	n     int           // dense: files with state
	more  holderLists   // the token holders past each file's first
}

// find returns file f's state, nil if none.
func (t *serverFiles) find(f uint64) *fileState {
	if !t.dense {
		return t.findSlab(f)
	}
	if p := f >> slabPageBits; p < uint64(len(t.pages)) {
		if fs := &t.pages[p][f&(slabPage-1)]; fs.version != 0 {
			return fs
		}
	}
	return nil
}

// findSlab is find without dense ids.
func (t *serverFiles) findSlab(f uint64) *fileState {
	if i := t.slab.find(f); i != 0 {
		return t.slab.rec(i)
	}
	return nil
}

// add returns the state to make for file f, which has none: the caller
// sets a nonzero version (the memory of a released state is kept).
func (t *serverFiles) add(f uint64) *fileState {
	if !t.dense {
		return t.slab.rec(t.slab.add(f))
	}
	for f>>slabPageBits >= uint64(len(t.pages)) {
		t.pages = append(t.pages, make([]fileState, slabPage))
	}
	t.n++
	return &t.pages[f>>slabPageBits][f&(slabPage-1)]
}

// forget drops file f's state, if any.
func (t *serverFiles) forget(f uint64) {
	var fs *fileState
	if !t.dense {
		i := t.slab.find(f)
		if i == 0 {
			return
		}
		t.slab.release(f, i)
		fs = t.slab.rec(i)
	} else if fs = t.find(f); fs == nil {
		return
	} else {
		t.n--
	}
	fs.holders.reset(&t.more)
	*fs = fileState{holders: holderSet{more: fs.holders.more}}
}

// len returns how many files have state.
func (t *serverFiles) len() int {
	if t.dense {
		return t.n
	}
	return t.slab.len()
}

// holds reports whether c is among the token holders of file (state fs):
// while the quick bits are on, they are the holders.
func (s *Server) holds(fs *fileState, file uint64, c ClientID) bool {
	if s.quick.on {
		return s.quick.has(c, file)
	}
	return fs.holders.has(c, &s.files.more)
}

// addHolder records that c, not a holder yet, holds a token for file
// (state fs): in the quick bits while they are on (a simulation that
// never writes builds no holder lists), else in fs's holder set.
func (s *Server) addHolder(fs *fileState, file uint64, c ClientID) {
	if s.quick.on {
		if s.quick.fits(c, file) {
			s.quick.add(c, file)
			return
		}
		s.quickOff()
	}
	fs.holders.add(c, &s.files.more)
}

// quickOff turns the quick bits off for good, first writing the holders
// they record into the files' holder sets (in file and client order: the
// order of a set does not matter, its users sort what they take from it).
func (s *Server) quickOff() {
	if !s.quick.on {
		return
	}
	s.quick.each(func(c ClientID, file uint64) {
		s.files.find(file).holders.add(c, &s.files.more)
	})
	s.quick.off()
}

// holderSet is a file's token holders, unordered: the first inline (most
// files have one or two: no allocation, no pointer to follow), the others
// in a list of the server's holderLists (kept, emptied, with the file's
// state: its memory is reused).
type holderSet struct {
	first1 uint32 // the first holder's id + 1 (0: no holder)
	more   int32  // the others: a list of holderLists (0: none yet)
}

// holderLists holds the holders past the first of every file that has
// had more than one; list 0 is unused.
type holderLists struct{ lists [][]ClientID }

// has reports whether c is in the set.
func (h *holderSet) has(c ClientID, more *holderLists) bool {
	if h.first1 == 0 {
		return false
	}
	if h.first1 == uint32(c)+1 {
		return true
	}
	return h.more != 0 && slices.Contains(more.lists[h.more], c)
}

// add puts c, which is not in the set, in it. c is a participant, never
// NoClient (the one id first1 cannot hold).
func (h *holderSet) add(c ClientID, more *holderLists) {
	if h.first1 == 0 {
		h.first1 = uint32(c) + 1
		return
	}
	if h.more == 0 {
		if len(more.lists) == 0 {
			more.lists = append(more.lists, nil)
		}
		h.more = int32(len(more.lists))
		more.lists = append(more.lists, nil)
	}
	more.lists[h.more] = append(more.lists[h.more], c)
}

// appendExcept appends the holders other than c to out: the first, then
// the others in the order they came.
func (h *holderSet) appendExcept(out []ClientID, c ClientID, more *holderLists) []ClientID {
	if h.first1 == 0 {
		return out
	}
	if first := ClientID(h.first1 - 1); first != c {
		out = append(out, first)
	}
	if h.more == 0 {
		return out
	}
	for _, x := range more.lists[h.more] {
		if x != c {
			out = append(out, x)
		}
	}
	return out
}

// reset empties the set (its list, if any, stays with it, emptied).
func (h *holderSet) reset(more *holderLists) {
	h.first1 = 0
	if h.more != 0 {
		more.lists[h.more] = more.lists[h.more][:0]
	}
}

// Holds reports whether client c holds a token for file that allows the
// access (any token to read; the write token to write). A client that does
// not must Open first.
func (s *Server) Holds(c ClientID, file uint64, write bool) bool {
	fs := s.lookup(file)
	if fs == nil {
		return false
	}
	if write {
		return fs.writer == c
	}
	return s.holds(fs, file, c)
}

// Token reports, in one lookup, file's current version (Version) and
// whether client c holds a token for it that allows the access (Holds).
func (s *Server) Token(c ClientID, file uint64, write bool) (v block.Version, held bool) {
	if s.quick.on && !write {
		return 1, s.quick.has(c, file)
	}
	fs := s.lookup(file)
	if fs == nil {
		return 1, false
	}
	if write {
		return fs.version, fs.writer == c
	}
	return fs.version, s.holds(fs, file, c)
}

// OpenIsLocal reports whether client c can open file without contacting
// the manager: it holds a sufficient token and is still the file's last
// opener (no one has opened it since, so there are no newer hints to hand
// out). A client knows this locally: the manager fetches the last opener's
// hints on every other client's open, which tells it that it is no longer
// the last one; and a revocation takes its token.
func (s *Server) OpenIsLocal(c ClientID, file uint64, write bool) bool {
	fs := s.lookup(file)
	return fs != nil && fs.last == c && s.Holds(c, file, write)
}

// Open handles client c (in life boot) opening file at now, for writing or
// not. The opener gets a token; a writer revokes every other holder's
// token; the hints of the previous opener are handed to the new one.
// The returned Revoke slice is valid until the next call.
func (s *Server) Open(now Time, c ClientID, boot BootID, file uint64, write bool) OpenResult {
	s.ClientSeen(c, boot)
	fs := s.file(file)
	r := OpenResult{HintsFrom: NoClient, Downgraded: NoClient}
	if fs.last != NoClient && fs.last != c && !s.isDown(fs.last) && s.bootOf(fs.last) == fs.lastBoot {
		r.HintsFrom, r.HintsBoot = fs.last, fs.lastBoot
	}
	fs.last, fs.lastBoot = c, boot
	s.revok = s.revok[:0]
	if write {
		if fs.writer != c {
			s.quickOff() // a new version
			had := s.holds(fs, file, c)
			s.revok = fs.holders.appendExcept(s.revok, c, &s.files.more)
			fs.holders.reset(&s.files.more)
			if had {
				fs.holders.add(c, &s.files.more)
			}
			sortIDs(s.revok)
			fs.writer = c
			fs.version++
			r.NewVersion = true
		}
	} else if fs.writer != NoClient && fs.writer != c {
		r.Downgraded = fs.writer
		fs.writer = NoClient
	}
	if !s.holds(fs, file, c) {
		s.addHolder(fs, file, c)
	}
	r.Revoke, r.Version = s.revok, fs.version
	return r
}

// Delete removes file: every holder drops its blocks and hints (returned,
// valid until the next call), the server memory drops the file's blocks.
func (s *Server) Delete(file uint64) []ClientID {
	s.revok = s.revok[:0]
	if fs := s.lookup(file); fs != nil {
		s.quickOff() // a new version
		s.revok = fs.holders.appendExcept(s.revok, NoClient, &s.files.more)
		sortIDs(s.revok)
		// Keep the file's state with a new version: copies cached outside
		// the token holders (forward targets) become stale, even if the id
		// is reused.
		fs.holders.reset(&s.files.more)
		fs.last, fs.writer = NoClient, NoClient
		fs.version++
	}
	switch {
	case s.coop != nil:
		s.coop.Invalidate(file)
	case s.mem != nil:
		s.mem.dropFile(file, nil)
	}
	return s.revok
}

// Fetch serves a request for b that reached the server at now (a client
// without a usable hint, or the end of a hint chain): from memory when it
// is there, else from disk.
func (s *Server) Fetch(now Time, b block.ID) FetchResult {
	switch {
	case s.coop != nil:
		if r := s.coop.ServeRequest(now, b, s.Version(b.File), NoClient, 0); r.Kind == RouteLocal {
			return FetchResult{Memory: true}
		}
		return FetchResult{Master: true}
	case s.mem == nil || s.cfg.MemoryBlocks == 0:
		return FetchResult{Master: true} // no memory: the version does not matter
	}
	v := s.Version(b.File)
	e := s.mem.get(b)
	if e != 0 && s.mem.at(e).ver < v { // stale
		s.mem.remove(e)
		e = 0
	}
	if s.cfg.Memory == MemoryDiscard {
		if e == 0 {
			return FetchResult{Master: true}
		}
		s.mem.remove(e) // the master copy moves back to a client
		return FetchResult{Memory: true, Discard: true, Master: true}
	}
	if e != 0 {
		s.mem.touch(e, now)
		return FetchResult{Memory: true, Master: true}
	}
	s.diskCacheInsert(b, v, now)
	return FetchResult{Master: true}
}

func (s *Server) diskCacheInsert(b block.ID, v block.Version, now Time) {
	if s.mem.full() {
		s.mem.popOldest()
	}
	s.mem.insert(b, v, now, false, false)
}

// Forget drops the manager's state of file (its last opener, tokens and
// version): a live server whose own version table changed or forgot the
// file calls it, which bounds this state by that table. The next open
// hands out no hints (those of a changed file name stale copies anyway).
func (s *Server) Forget(file uint64) {
	s.files.forget(file)
	s.quick.clear(file)
}

// Files returns how many files the manager has state for.
func (s *Server) Files() int { return s.files.len() }

// NewVersion makes a new version of file (a write of a block whose master
// copy may be cached elsewhere) and returns it. The writer revalidates its
// own copies (Client.Revalidate).
func (s *Server) NewVersion(file uint64) block.Version {
	s.quickOff()
	fs := s.file(file)
	fs.version++
	return fs.version
}

// Version returns file's current version (1 for a file never written).
func (s *Server) Version(file uint64) block.Version {
	if s.quick.on { // no file has a second version: no lookup
		return 1
	}
	if fs := s.lookup(file); fs != nil {
		return fs.version
	}
	return 1
}

// AcceptDiscard takes a young master copy of b (age stamp) into the discard
// cache. The discard cache evicts its oldest block first, so a block older
// than everything in a full cache is not kept. It reports whether b was
// stored. Without a discard cache it does nothing.
func (s *Server) AcceptDiscard(b block.ID, v block.Version, stamp Time) bool {
	if s.cfg.Memory != MemoryDiscard || s.mem == nil || s.cfg.MemoryBlocks == 0 || v < s.Version(b.File) {
		return false
	}
	if e := s.mem.get(b); e != 0 {
		if stamp > s.mem.at(e).stamp {
			s.mem.setAge(e, stamp)
		}
		return true
	}
	if s.mem.full() {
		if stamp < s.mem.oldest() {
			return false
		}
		s.mem.popOldest()
	}
	s.mem.insert(b, v, stamp, true, true)
	return true
}

// WriteThrough handles a block written through to the server at now: a
// disk cache keeps the new data; a copy in the discard cache or the
// cooperative server memory is stale and dropped.
func (s *Server) WriteThrough(now Time, b block.ID) {
	switch {
	case s.coop != nil:
		s.coop.Drop(b)
	case s.mem == nil || s.cfg.MemoryBlocks == 0:
	case s.cfg.Memory == MemoryDiskCache:
		if e := s.mem.get(b); e != 0 {
			s.mem.touch(e, now)
			s.mem.at(e).ver = s.Version(b.File)
		} else {
			s.diskCacheInsert(b, s.Version(b.File), now)
		}
	default:
		if e := s.mem.get(b); e != 0 {
			s.mem.remove(e)
		}
	}
}

// InMemory reports whether b is in the server memory.
func (s *Server) InMemory(b block.ID) bool {
	if s.coop != nil {
		ok, _ := s.coop.Has(b)
		return ok
	}
	return s.mem != nil && s.mem.get(b) != 0
}

// ClientSeen records that client c is alive in life boot. A new boot id
// means c restarted: hints it handed out before are stale.
func (s *Server) ClientSeen(c ClientID, boot BootID) {
	if boot > s.bootOf(c) {
		s.boots.set(c, boot)
		if s.coop != nil {
			s.coop.PeerBooted(c, boot)
		}
	}
	s.down.del(c)
}

// ClientFailed records that a message to c timed out: the manager hands out
// no hints from c until it is seen again.
func (s *Server) ClientFailed(c ClientID) {
	s.down.set(c, true)
	if s.coop != nil {
		s.coop.PeerFailed(c)
	}
}

// Check verifies the server's invariants.
func (s *Server) Check() error {
	if s.coop != nil {
		return s.coop.Check()
	}
	if s.mem != nil {
		return s.mem.check()
	}
	return nil
}

func sortIDs(ids []ClientID) { slices.Sort(ids) }

func (s *Server) bootOf(c ClientID) BootID {
	b, _ := s.boots.get(c)
	return b
}

func (s *Server) isDown(c ClientID) bool {
	d, _ := s.down.get(c)
	return d
}
