package directory

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/block"
)

// refDir is the simple reference: linear scans, maps and a recency slice.
// It states the policy as plainly as possible; the property test checks
// that Directory takes exactly the same decisions.
type refDir struct {
	cfg     Config
	order   []block.ID // most recently used first
	ents    map[block.ID]*refEntry
	mem     map[block.ID]bool
	clients map[ClientID]*refClient
	fwd     map[fwdKey]fwdRec
}

type refEntry struct {
	ver     block.Version
	holders map[ClientID]bool
	last    ClientID
}

type refClient struct {
	failed, pinging bool
	run             int
	deadline        time.Duration
}

func newRef(cfg Config) *refDir {
	return &refDir{cfg: cfg.withDefaults(), ents: map[block.ID]*refEntry{}, mem: map[block.ID]bool{},
		clients: map[ClientID]*refClient{}, fwd: map[fwdKey]fwdRec{}}
}

func (r *refDir) cl(c ClientID) *refClient {
	if r.clients[c] == nil {
		r.clients[c] = &refClient{}
	}
	return r.clients[c]
}

func (r *refDir) heard(c ClientID) { *r.cl(c) = refClient{} }

func (r *refDir) drop(id block.ID) {
	delete(r.ents, id)
	r.order = slices.DeleteFunc(r.order, func(x block.ID) bool { return x == id })
}

func (r *refDir) touch(id block.ID) {
	r.order = slices.DeleteFunc(r.order, func(x block.ID) bool { return x == id })
	r.order = slices.Insert(r.order, 0, id)
}

func (r *refDir) cur(id block.ID, v block.Version) *refEntry {
	if e := r.ents[id]; e != nil && e.ver != v {
		r.drop(id)
	}
	return r.ents[id]
}

func (r *refDir) add(id block.ID, v block.Version, c ClientID) *refEntry {
	e := r.ents[id]
	if e == nil {
		if len(r.ents) == r.cfg.Entries {
			r.drop(r.order[len(r.order)-1])
		}
		e = &refEntry{ver: v, holders: map[ClientID]bool{}, last: NoClient}
		r.ents[id] = e
		r.touch(id)
	}
	e.holders[c] = true
	return e
}

func (r *refDir) del(id block.ID, c ClientID) {
	if e := r.ents[id]; e != nil {
		delete(e.holders, c)
		if len(e.holders) == 0 {
			r.drop(id)
		}
	}
}

func (r *refDir) request(now time.Duration, c ClientID, id block.ID, v block.Version) Action {
	r.heard(c)
	act := Action{Kind: ActServe, Client: c, Block: id, Version: v}
	e := r.cur(id, v)
	var cands []ClientID
	if r.mem[id] {
		cands = append(cands, Server)
	}
	if e != nil {
		r.touch(id)
		for _, h := range slices.Sorted(maps.Keys(e.holders)) {
			if h != c && !r.clients[h].pinging {
				cands = append(cands, h)
			}
		}
	}
	to := NoClient
	if len(cands) > 0 {
		to = cands[0]
		if e != nil && e.last != NoClient {
			for _, x := range cands {
				if x > e.last {
					to = x
					break
				}
			}
		}
	}
	switch to {
	case NoClient:
	case Server:
		act.FromMemory = true
	default:
		act.Kind, act.To = ActForward, to
		r.fwd[fwdKey{c, id}] = fwdRec{holder: to, at: now}
	}
	e = r.add(id, v, c)
	if to != NoClient {
		e.last = to
	}
	return act
}

func (r *refDir) retry(now time.Duration, c ClientID, id block.ID, v block.Version, holder ClientID) Action {
	r.heard(c)
	k := fwdKey{c, id}
	if f, ok := r.fwd[k]; ok {
		delete(r.fwd, k)
		if holder == NoClient && now-f.at <= r.cfg.ForwardTTL {
			holder = f.holder
		}
	}
	act := Action{Kind: ActServe, Client: c, Block: id, Version: v}
	r.cur(id, v)
	if h := r.clients[holder]; h != nil && holder != Server && holder != c {
		h.run++
		r.del(id, holder)
		if h.run >= r.cfg.MissThreshold && !h.pinging && !h.failed {
			h.pinging, h.deadline = true, now+r.cfg.PingTimeout
			act.Ping = holder
		}
	}
	if r.ents[id] != nil {
		r.touch(id)
	}
	r.add(id, v, c)
	return act
}

func (r *refDir) purge(c ClientID) {
	for _, id := range slices.Clone(r.order) {
		r.del(id, c)
	}
}

func (r *refDir) fail(c ClientID) {
	cl := r.cl(c)
	cl.failed, cl.pinging = true, false
	r.purge(c)
}

// TestPropertyAgainstReference drives Directory and the reference with the
// same random event sequences and compares every decision and every
// holder set, checking the invariants on the way. A third of the runs use
// client ids from 64 on too (kept outside an entry's mask), a third number
// blocks densely (Config.Dense, as the simulator does).
func TestPropertyAgainstReference(t *testing.T) {
	runs := 300
	if testing.Short() {
		runs = 60
	}
	for seed := range uint64(runs) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { propertyRun(t, seed, 400) })
	}
}

func propertyRun(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	cfg := Config{Entries: 1 + rng.IntN(8), MissThreshold: 1 + rng.IntN(3),
		PingTimeout: time.Duration(1+rng.IntN(5)) * time.Second, ForwardTTL: 5 * time.Second,
		Dense: seed%3 == 2}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref := newRef(cfg)
	vers := map[uint64]block.Version{1: 1, 2: 1}
	var now time.Duration
	ids := []block.ID{}
	for f := uint64(1); f <= 2; f++ {
		for i := range uint64(4) {
			if cfg.Dense {
				ids = append(ids, block.ID{File: f, Index: (f-1)*4 + i + 1})
			} else {
				ids = append(ids, block.ID{File: f, Index: i})
			}
		}
	}
	client := func() ClientID { return ClientID(1 + rng.IntN(5)) }
	if seed%3 == 1 {
		some := []ClientID{1, 5, 63, 64, 65, 200, 4103}
		client = func() ClientID { return some[rng.IntN(len(some))] }
	}
	for step := range steps {
		now += time.Duration(rng.IntN(1500)) * time.Millisecond
		id := ids[rng.IntN(len(ids))]
		c := client()
		v := vers[id.File]
		if rng.IntN(20) == 0 {
			v-- // a request racing a version change
		}
		var ev string
		switch k := rng.IntN(100); {
		case k < 40:
			ev = fmt.Sprintf("Request(%d,%v,v%d)", c, id, v)
			// the holder set before the request, for the invariants
			before := d.Holders(id)
			got, want := d.Request(now, c, id, v), ref.request(now, c, id, v)
			if got != want {
				t.Fatalf("step %d %s: got %+v, reference %+v", step, ev, got, want)
			}
			if got.Kind == ActForward {
				cs, _ := d.ClientStats(got.To)
				switch {
				case got.To == c:
					t.Fatalf("step %d: forwarded to the requester", step)
				case cs.Failed:
					t.Fatalf("step %d: forwarded to failed client %d", step, got.To)
				case !slices.Contains(before, got.To):
					t.Fatalf("step %d: forwarded to %d, not a holder (%v)", step, got.To, before)
				case got.Version != vers[id.File] && v == vers[id.File]:
					t.Fatalf("step %d: forward carries v%d, file is at v%d", step, got.Version, vers[id.File])
				}
			}
		case k < 55:
			h := NoClient
			if rng.IntN(2) == 0 {
				h = client()
			}
			ev = fmt.Sprintf("Retry(%d,%v,v%d,%d)", c, id, v, h)
			got, want := d.Retry(now, c, id, v, h), ref.retry(now, c, id, v, h)
			if got != want {
				t.Fatalf("step %d %s: got %+v, reference %+v", step, ev, got, want)
			}
		case k < 67:
			batch := []block.ID{id, ids[rng.IntN(len(ids))]}
			ev = fmt.Sprintf("Discarded(%d,%v)", c, batch)
			d.Discarded(c, batch)
			ref.heard(c)
			for _, x := range batch {
				ref.del(x, c)
			}
		case k < 74:
			ev = fmt.Sprintf("ServerCached(%v)", id)
			d.ServerCached(id)
			ref.mem[id] = true
		case k < 80:
			ev = fmt.Sprintf("ServerEvicted(%v)", id)
			d.ServerEvicted(id)
			delete(ref.mem, id)
		case k < 84:
			ev = fmt.Sprintf("FileChanged(%d)", id.File)
			vers[id.File]++
			d.FileChanged(id.File)
			for _, x := range slices.Clone(ref.order) {
				if x.File == id.File {
					ref.drop(x)
				}
			}
		case k < 87:
			ev = fmt.Sprintf("ClientJoined(%d)", c)
			d.ClientJoined(c)
			ref.purge(c)
			*ref.cl(c) = refClient{}
		case k < 90:
			ev = fmt.Sprintf("ClientFailed(%d)", c)
			d.ClientFailed(c)
			ref.fail(c)
		case k < 94:
			ev = fmt.Sprintf("PingOK(%d)", c)
			d.PingOK(c)
			cl := ref.cl(c)
			cl.pinging, cl.run = false, 0
		default:
			ev = "Tick"
			got := d.Tick(now)
			var want []ClientID
			for _, x := range slices.Sorted(maps.Keys(ref.clients)) {
				if cl := ref.clients[x]; cl.pinging && now >= cl.deadline {
					want = append(want, x)
					ref.fail(x)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d Tick: failed %v, reference %v", step, got, want)
			}
		}
		// compare the whole state and check the invariants
		if d.Len() > cfg.Entries {
			t.Fatalf("step %d %s: %d entries > %d", step, ev, d.Len(), cfg.Entries)
		}
		if d.Len() != len(ref.ents) {
			t.Fatalf("step %d %s: %d entries, reference %d", step, ev, d.Len(), len(ref.ents))
		}
		for _, x := range ids {
			got := d.Holders(x)
			var want []ClientID
			if e := ref.ents[x]; e != nil {
				want = slices.Sorted(maps.Keys(e.holders))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d %s: holders of %v = %v, reference %v", step, ev, x, got, want)
			}
			for _, h := range got {
				if cs, _ := d.ClientStats(h); cs.Failed {
					t.Fatalf("step %d %s: failed client %d holds %v", step, ev, h, x)
				}
			}
		}
		for c, rc := range ref.clients {
			cs, _ := d.ClientStats(c)
			if cs.Failed != rc.failed || cs.Pinging != rc.pinging || cs.MissRun != rc.run {
				t.Fatalf("step %d %s: client %d = %+v, reference %+v", step, ev, c, cs, *rc)
			}
		}
	}
}

// The holder's decision table, checked over every combination against the
// rule as the seed states it.
func TestPropertyHolder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h, _ := NewHolder(HolderConfig{QueueLen: 5})
	for range 2000 {
		l := Local{State(rng.IntN(3)), block.Version(rng.IntN(4))}
		v := block.Version(1 + rng.IntN(3))
		r := h.Forward(block.ID{File: 1, Index: uint64(rng.IntN(9))}, v, l)
		if r.Answer == Send && !(l.State == Present && l.Version == v) {
			t.Fatalf("sends %+v for a forward of v%d", l, v)
		}
		if r.Answer == Wait && !(l.State == Pending && l.Version == v) {
			t.Fatalf("waits on %+v for a forward of v%d", l, v)
		}
		if r.DropFile != (l.State != Absent && l.Version < v) {
			t.Fatalf("DropFile = %v for %+v, v%d", r.DropFile, l, v)
		}
		if (r.Notify != nil) != (l.State == Absent) {
			t.Fatalf("on-demand notification %v for %+v", r.Notify, l)
		}
		if rng.IntN(2) == 0 {
			h.Evicted(block.ID{File: 1, Index: uint64(rng.IntN(9))})
		}
		if s := h.Stats(); s.Queued >= 5 {
			t.Fatalf("queue holds %d >= QueueLen", s.Queued)
		}
	}
}
