package wholefile

import (
	"errors"
	"slices"
)

// ClientID names a client to the server (the live server's connection id).
type ClientID uint32

// Config configures a Server.
type Config struct {
	// Epoch is the first commit counter of every file the server learns
	// of. The live server passes its boot id (nanoseconds since 1970 at
	// start): counters then only grow across restarts, so a counter a
	// client saw before a restart never equals one after it (a client
	// would need more than one commit per nanosecond of downtime to
	// catch up).
	Epoch uint64
	// MaxFiles bounds the files tracked; past it an arbitrary file's state
	// is forgotten (its map empties: safe, the next opener reads from the
	// server). 0 means DefaultMaxFiles.
	MaxFiles int
}

// DefaultMaxFiles is the default bound on the files a Server tracks.
const DefaultMaxFiles = 1 << 18

func (c *Config) validate() error {
	if c.MaxFiles < 0 {
		return errors.New("wholefile: MaxFiles is negative")
	}
	if c.MaxFiles == 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	return nil
}

// Server is the server's side of the policy: commit counters, valid-cache
// maps, and the clients whose copy of the current version is on its way
// (fetchers). It is not safe for concurrent use (the live server wraps it
// in a lock).
//
// INVARIANT: a client is in files[f].valid or files[f].fetching iff f is
// in byClient[client]; no client is in both, nor twice in one.
type Server struct {
	cfg      Config
	files    map[uint64]*fileState
	byClient map[ClientID]map[uint64]struct{}
}

// fileState is one file's commit counter, valid-cache map and fetchers.
// Both sets refer to data version version (0: none known yet).
type fileState struct {
	commit   uint64
	version  uint64
	valid    []ClientID
	fetching []ClientID // reading version whole, not there yet (a partial copy grows)
}

// NewServer returns an empty Server.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, files: make(map[uint64]*fileState), byClient: make(map[ClientID]map[uint64]struct{})}, nil
}

// OpenResult is what an opener learns: the file's commit counter (it hands
// it back when it commits), the clients holding the current version whole
// and the clients fetching it (their copy is partial and growing), the
// opener excluded.
type OpenResult struct {
	Commit   uint64
	Holders  []ClientID
	Fetchers []ClientID
}

// Open: client c opened file at data version v; have says it holds that
// version whole already (its counter matches: no data moves), which makes
// it a holder.
func (s *Server) Open(c ClientID, file, v uint64, have bool) OpenResult {
	st := s.state(file, v)
	r := OpenResult{Commit: st.commit}
	for _, h := range st.valid {
		if h != c {
			r.Holders = append(r.Holders, h)
		}
	}
	for _, h := range st.fetching {
		if h != c {
			r.Fetchers = append(r.Fetchers, h)
		}
	}
	if have {
		s.add(c, file, st)
	}
	return r
}

// Fetching: client c is reading file at data version v whole and has not
// got all of it yet (it opened the file with no current copy): until it
// holds it (Have) or gives up (Dropped), later openers may fetch the part
// it has from it. A client already in the map stays there. The result says
// whether c is a fetcher now.
func (s *Server) Fetching(c ClientID, file, v uint64) bool {
	st := s.files[file]
	if st == nil || v == 0 || st.version != v || slices.Contains(st.valid, c) {
		return false
	}
	if !slices.Contains(st.fetching, c) {
		st.fetching = append(st.fetching, c)
		s.index(c, file)
	}
	return true
}

// Have: client c now holds file whole at data version v (it fetched it
// from holders or read it through from the server). It joins the map
// (leaving the fetchers) if v is still the version the map is for; the
// result says whether it did.
func (s *Server) Have(c ClientID, file, v uint64) bool {
	st := s.files[file]
	if st == nil || v == 0 || st.version != v {
		return false
	}
	s.add(c, file, st)
	return true
}

// CommitResult is the outcome of a commit: the new counter, and whether
// the committer's copy is now the one valid copy.
type CommitResult struct {
	Commit uint64
	Valid  bool
}

// Commit: client c closed file after writing it. opened is the counter it
// was handed at its open, v the data version the file has now and whole
// whether c holds that version whole. The map becomes {c} if no one else
// committed since c's open (and c's copy is whole at v), else empty; the
// counter grows by one either way (seed 001, section 3).
func (s *Server) Commit(c ClientID, file, opened, v uint64, whole bool) CommitResult {
	st := s.state(file, v)
	valid := st.commit == opened && whole && v != 0
	s.clear(file, st)
	if valid {
		s.add(c, file, st)
	}
	st.commit++
	return CommitResult{Commit: st.commit, Valid: valid}
}

// Changed: file has a new data version v (0: unknown, the file changed or
// left the server's version table): its map empties.
func (s *Server) Changed(file, v uint64) {
	st := s.files[file]
	if st == nil || (v != 0 && st.version == v) {
		return
	}
	s.clear(file, st)
	st.version = v
}

// Dropped: client c no longer holds file whole (its tiers evicted part of
// it), or stopped fetching it.
func (s *Server) Dropped(c ClientID, file uint64) {
	if st := s.files[file]; st != nil {
		s.remove(c, file, st)
	}
}

// Left: client c disconnected: it is no holder of anything any more (a
// client that comes back says what it holds when it next opens a file).
func (s *Server) Left(c ClientID) {
	for file := range s.byClient[c] {
		if st := s.files[file]; st != nil {
			st.valid = without(st.valid, c)
			st.fetching = without(st.fetching, c)
		}
	}
	delete(s.byClient, c)
}

// Holders returns the clients in file's map (for tests and metrics).
func (s *Server) Holders(file uint64) []ClientID {
	if st := s.files[file]; st != nil {
		return slices.Clone(st.valid)
	}
	return nil
}

// Fetchers returns the clients fetching file (for tests and metrics).
func (s *Server) Fetchers(file uint64) []ClientID {
	if st := s.files[file]; st != nil {
		return slices.Clone(st.fetching)
	}
	return nil
}

// CommitOf returns file's commit counter and whether the file is tracked.
func (s *Server) CommitOf(file uint64) (uint64, bool) {
	if st := s.files[file]; st != nil {
		return st.commit, true
	}
	return 0, false
}

// Len is the number of files tracked.
func (s *Server) Len() int { return len(s.files) }

// state returns file's state, creating it (counter Epoch), and empties the
// map when it was built for another data version than v.
func (s *Server) state(file, v uint64) *fileState {
	st := s.files[file]
	if st == nil {
		s.bound()
		st = &fileState{commit: s.cfg.Epoch, version: v}
		s.files[file] = st
		return st
	}
	if st.version != v {
		s.clear(file, st)
		st.version = v
	}
	return st
}

// bound forgets an arbitrary file when the table is full.
func (s *Server) bound() {
	for file, st := range s.files {
		if len(s.files) < s.cfg.MaxFiles {
			return
		}
		s.clear(file, st)
		delete(s.files, file)
	}
}

// add puts c in file's map (out of its fetchers).
func (s *Server) add(c ClientID, file uint64, st *fileState) {
	st.fetching = without(st.fetching, c)
	if !slices.Contains(st.valid, c) {
		st.valid = append(st.valid, c)
	}
	s.index(c, file)
}

// index records that c is in one of file's sets.
func (s *Server) index(c ClientID, file uint64) {
	fs := s.byClient[c]
	if fs == nil {
		fs = make(map[uint64]struct{})
		s.byClient[c] = fs
	}
	fs[file] = struct{}{}
}

// unindex forgets that c is in one of file's sets.
func (s *Server) unindex(c ClientID, file uint64) {
	if fs := s.byClient[c]; fs != nil {
		delete(fs, file)
		if len(fs) == 0 {
			delete(s.byClient, c)
		}
	}
}

func (s *Server) remove(c ClientID, file uint64, st *fileState) {
	st.valid = without(st.valid, c)
	st.fetching = without(st.fetching, c)
	s.unindex(c, file)
}

// clear empties file's map and its fetchers.
func (s *Server) clear(file uint64, st *fileState) {
	for _, c := range st.valid {
		s.unindex(c, file)
	}
	for _, c := range st.fetching {
		s.unindex(c, file)
	}
	st.valid, st.fetching = st.valid[:0], st.fetching[:0]
}

func without(cs []ClientID, c ClientID) []ClientID {
	return slices.DeleteFunc(cs, func(x ClientID) bool { return x == c })
}
