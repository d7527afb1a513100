package warmup

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Member names a client of the warm-up (the server's client id).
type Member uint32

// Item is a byte range of a file: Len 0 runs to the end; Size is the
// file's size when it was listed.
type Item struct {
	Path           string
	Off, Len, Size uint64
}

// bytes is how many bytes the item covers by its listed size.
func (it Item) bytes() uint64 {
	if it.Len != 0 {
		return it.Len
	}
	return it.Size - min(it.Off, it.Size)
}

// Phases.
const (
	Shares uint8 = 1 // each client its segment, from the server
	Peers  uint8 = 2 // the rest, from the peers
	Done   uint8 = 3
)

// Assign is an action: push assignment Seq (Items, in Phase) to To. In
// phase 2, From[i] is the member that fetched Items[i] in phase 1 (To
// itself when that member is gone): the peer to read it from.
type Assign struct {
	To    Member
	Seq   uint32
	Phase uint8
	Items []Item
	From  []Member
}

// State is a job's progress.
type State struct {
	Phase       uint8
	Members     []Member // the live members, in ring order
	ClientsDone int      // live members with nothing outstanding in the current phase
	Bytes       uint64   // fetched by the live members, over both phases
	TotalBytes  uint64   // the files' bytes times the live members
	Err         error    // at Done: what failed (joined, the first few)
}

type assignment struct {
	to    Member
	phase uint8
	items []Item
	segs  []int // the segments it holds (phase 1)
	bytes uint64
	done  bool
}

type member struct {
	pos   int    // ring position
	owns  []bool // segments this member fetched in phase 1 (by index)
	alive bool
}

// Job is one cluster warm-up. Not safe for concurrent use.
type Job struct {
	segs    [][]Item
	total   uint64
	ring    []Member
	members map[Member]*member
	assigns []*assignment // by Seq-1
	phase   uint8
	errs    []string
}

// ErrNoMembers: a warm-up needs at least one client.
var ErrNoMembers = errors.New("no clients to warm up")

// New plans a warm-up of items on members (in ring order), cutting at
// multiples of blockSize (0: never cutting a file), and returns the
// phase-1 assignments.
func New(items []Item, members []Member, blockSize uint64) (*Job, []Assign, error) {
	if len(members) == 0 {
		return nil, nil, ErrNoMembers
	}
	j := &Job{ring: members, members: make(map[Member]*member), phase: Shares}
	j.segs = Split(items, len(members), blockSize)
	for _, it := range items {
		j.total += it.bytes()
	}
	var acts []Assign
	for i, m := range members {
		if _, dup := j.members[m]; dup {
			return nil, nil, fmt.Errorf("client %d named twice", m)
		}
		j.members[m] = &member{pos: i, owns: make([]bool, len(members)), alive: true}
		acts = append(acts, j.assign(m, Shares, []int{i}))
	}
	return j, acts, nil
}

// assign records an assignment of the segments segs (phase 1) or of the
// items of segs (phase 2) to m and returns its action.
func (j *Job) assign(m Member, phase uint8, segs []int) Assign {
	a := &assignment{to: m, phase: phase}
	var from []Member
	for _, s := range segs {
		a.items = append(a.items, j.segs[s]...)
		if phase == Peers {
			o := j.owner(s, m)
			for range j.segs[s] {
				from = append(from, o)
			}
		}
	}
	if phase == Shares {
		a.segs = segs
		for _, s := range segs {
			j.members[m].owns[s] = true
		}
	}
	j.assigns = append(j.assigns, a)
	return Assign{To: m, Seq: uint32(len(j.assigns)), Phase: phase, Items: a.items, From: from}
}

// owner is a live member that fetched segment s in phase 1 (the one
// assigned it last: a share handed over from a member that left goes to
// its new owner); def when none is left.
func (j *Job) owner(s int, def Member) Member {
	for i := len(j.assigns) - 1; i >= 0; i-- {
		a := j.assigns[i]
		if a.phase == Shares && j.members[a.to].alive && slices.Contains(a.segs, s) {
			return a.to
		}
	}
	return def
}

// Split cuts items, in order, into n contiguous segments of about equal
// bytes, splitting a file at multiples of bs where a cut falls inside it.
// With bs 0 files are never split (a policy that caches files whole): a
// file larger than a segment fills one alone.
func Split(items []Item, n int, bs uint64) [][]Item {
	var total uint64
	for _, it := range items {
		total += it.bytes()
	}
	target := (total + uint64(n) - 1) / uint64(n)
	if bs > 0 {
		target = max((target+bs-1)/bs*bs, bs)
	}
	segs := make([][]Item, n)
	cur, fill := 0, uint64(0)
	for _, it := range items {
		for {
			if cur < n-1 && fill >= target {
				cur, fill = cur+1, 0
			}
			left := it.bytes()
			if cur == n-1 || fill+left <= target || bs == 0 && fill == 0 {
				segs[cur] = append(segs[cur], it)
				fill += left
				break
			}
			var cut uint64
			if bs > 0 {
				cut = (target - fill) / bs * bs // whole blocks that still fit
			}
			if cut == 0 {
				cur, fill = cur+1, 0
				continue
			}
			segs[cur] = append(segs[cur], Item{Path: it.Path, Off: it.Off, Len: cut, Size: it.Size})
			fill += cut
			it.Off += cut
			if it.Len != 0 {
				it.Len -= cut
			}
		}
	}
	return segs
}

// Report records assignment seq's progress from m; at its end (done) the
// phase may advance, and the new assignments come back.
func (j *Job) Report(m Member, seq uint32, bytes uint64, done bool, errMsg string) []Assign {
	if seq == 0 || int(seq) > len(j.assigns) {
		return nil
	}
	a := j.assigns[seq-1]
	if a.to != m || a.done {
		return nil
	}
	a.bytes = bytes
	if !done {
		return nil
	}
	a.done = true
	if errMsg != "" && len(j.errs) < 5 {
		j.errs = append(j.errs, errMsg)
	}
	return j.advance()
}

// Left records that m left (its connection closed): its unfinished
// phase-1 work goes to the live member with the least left to do.
func (j *Job) Left(m Member) []Assign {
	mb := j.members[m]
	if mb == nil || !mb.alive {
		return nil
	}
	mb.alive = false
	var acts []Assign
	for _, a := range j.assigns {
		if a.to != m || a.done {
			continue
		}
		a.done = true
		if a.phase != Shares || j.phase != Shares {
			continue
		}
		if to, ok := j.leastLoaded(); ok {
			acts = append(acts, j.assign(to, Shares, a.segs))
		}
	}
	if len(j.live()) == 0 && j.phase != Done {
		j.phase = Done
		j.errs = append(j.errs, "every client left before the warm-up finished")
		return acts
	}
	return append(acts, j.advance()...)
}

// leastLoaded is the live member with the fewest bytes outstanding.
func (j *Job) leastLoaded() (Member, bool) {
	left := make(map[Member]uint64)
	for _, a := range j.assigns {
		if !a.done {
			var n uint64
			for _, it := range a.items {
				n += it.bytes()
			}
			left[a.to] += n - min(a.bytes, n)
		}
	}
	var best Member
	found := false
	for _, m := range j.live() {
		if !found || left[m] < left[best] {
			best, found = m, true
		}
	}
	return best, found
}

func (j *Job) live() []Member {
	var out []Member
	for _, m := range j.ring {
		if j.members[m].alive {
			out = append(out, m)
		}
	}
	return out
}

// outstanding reports whether some assignment of the current phase is
// not done.
func (j *Job) outstanding() bool {
	for _, a := range j.assigns {
		if !a.done && a.phase == j.phase {
			return true
		}
	}
	return false
}

// advance moves to the next phase when the current one is over.
func (j *Job) advance() []Assign {
	if j.phase == Done || j.outstanding() {
		return nil
	}
	if j.phase == Peers {
		j.phase = Done
		return nil
	}
	j.phase = Peers
	var acts []Assign
	n := len(j.ring)
	for _, m := range j.live() {
		mb := j.members[m]
		var segs []int
		for k := 1; k < n; k++ {
			s := (mb.pos + k) % n
			if !mb.owns[s] {
				segs = append(segs, s)
			}
		}
		if act := j.assign(m, Peers, segs); len(act.Items) > 0 {
			acts = append(acts, act)
		} else {
			j.assigns[act.Seq-1].done = true
		}
	}
	if len(acts) == 0 {
		j.phase = Done
	}
	return acts
}

// Phase is the job's phase.
func (j *Job) Phase() uint8 { return j.phase }

// State returns the job's progress.
func (j *Job) State() State {
	st := State{Phase: j.phase, Members: j.live()}
	busy := make(map[Member]bool)
	for _, a := range j.assigns {
		if !j.members[a.to].alive {
			continue
		}
		st.Bytes += a.bytes
		if !a.done && a.phase == j.phase {
			busy[a.to] = true
		}
	}
	st.ClientsDone = len(st.Members) - len(busy)
	st.TotalBytes = j.total * uint64(len(st.Members))
	if j.phase == Done && len(j.errs) > 0 {
		st.Err = errors.New(strings.Join(j.errs, "; "))
	}
	return st
}
