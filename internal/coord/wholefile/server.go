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

// Server is the server's side of the policy: commit counters and
// valid-cache maps. It is not safe for concurrent use (the live server
// wraps it in a lock).
//
// INVARIANT: a client is in files[f].valid iff f is in byClient[client];
// no valid map holds a client twice.
type Server struct {
	cfg      Config
	files    map[uint64]*fileState
	byClient map[ClientID]map[uint64]struct{}
}

// fileState is one file's commit counter and valid-cache map. The map
// refers to data version version (0: none known yet).
type fileState struct {
	commit  uint64
	version uint64
	valid   []ClientID
}

// NewServer returns an empty Server.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, files: make(map[uint64]*fileState), byClient: make(map[ClientID]map[uint64]struct{})}, nil
}

// OpenResult is what an opener learns: the file's commit counter (it hands
// it back when it commits) and the clients holding the current version
// whole, the opener excluded.
type OpenResult struct {
	Commit  uint64
	Holders []ClientID
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
	if have {
		s.add(c, file, st)
	}
	return r
}

// Have: client c now holds file whole at data version v (it fetched it
// from holders or read it through from the server). It joins the map if v
// is still the version the map is for; the result says whether it did.
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
// it).
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
			st.valid = slices.DeleteFunc(st.valid, func(x ClientID) bool { return x == c })
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

func (s *Server) add(c ClientID, file uint64, st *fileState) {
	if slices.Contains(st.valid, c) {
		return
	}
	st.valid = append(st.valid, c)
	fs := s.byClient[c]
	if fs == nil {
		fs = make(map[uint64]struct{})
		s.byClient[c] = fs
	}
	fs[file] = struct{}{}
}

func (s *Server) remove(c ClientID, file uint64, st *fileState) {
	st.valid = slices.DeleteFunc(st.valid, func(x ClientID) bool { return x == c })
	if fs := s.byClient[c]; fs != nil {
		delete(fs, file)
		if len(fs) == 0 {
			delete(s.byClient, c)
		}
	}
}

func (s *Server) clear(file uint64, st *fileState) {
	for _, c := range st.valid {
		if fs := s.byClient[c]; fs != nil {
			delete(fs, file)
			if len(fs) == 0 {
				delete(s.byClient, c)
			}
		}
	}
	st.valid = st.valid[:0]
}
