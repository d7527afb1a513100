package classic

import "github.com/coopfs/coopfs/internal/sim"

// GMS is the Global Memory Service algorithm (seed 002 3.2, Feeley95).
//
// Lookup is manager-based as in N-chance (3 messages, 2 at the manager).
// The manager tracks the copies of every block and tells a client when its
// copy becomes a singlet (1 duplicate-avoidance message), so a client
// never asks. (A client's copy stops being a singlet when another client
// reads it; the simulator does not charge a message for that change.)
//
// Replacement approximates global LRU with epochs: at the start of an epoch
// every client sends the manager a summary of its ages and the manager
// sends back the weights (2 messages per client, replacement cause). The
// manager finds the M oldest blocks in the client caches (free slots count
// as the oldest) and sets w_i, the fraction of them on client i, and
// MinAge, the age of the M-th oldest. An epoch lasts M replacements (M =
// Params.GMSEpochReplacements, default a tenth of the client memory) or
// Params.GMSEpochMaxAccesses accesses. A client that needs room evicts its
// LRU block v: a duplicate is dropped (1 delete message); a singlet older
// than MinAge is dropped; otherwise it is forwarded to client i chosen with
// probability w_i (2 forward messages; dropped instead if i is the client
// itself), where it joins the target's global (forwarded) pages keeping
// its age, and the target drops its own oldest page.
type GMS struct {
	c          *caches
	m          int
	maxAcc     int
	left       int // replacements left in this epoch
	accesses   int
	cum        []float64 // cumulative weights
	needsEpoch bool
	epochs     int64
}

// NewGMS returns GMS.
func NewGMS(p sim.Params) (*GMS, error) {
	c, err := newCaches(p)
	if err != nil {
		return nil, err
	}
	c.global()
	m := p.GMSEpochReplacements
	if m == 0 {
		m = max(1, p.Clients*p.ClientCacheBlocks/10)
	}
	return &GMS{c: c, m: m, maxAcc: p.GMSEpochMaxAccesses, cum: make([]float64, p.Clients), needsEpoch: true}, nil
}

// Access implements sim.Algorithm.
func (g *GMS) Access(a sim.Access, cnt *sim.Counters) sim.Outcome {
	g.accesses++
	if g.maxAcc > 0 && g.accesses >= g.maxAcc {
		g.needsEpoch = true
	}
	g.c.reserve()
	return managerAccess(g.c, &a, cnt, g)
}

// Epochs returns the number of epochs started so far.
func (g *GMS) Epochs() int64 { return g.epochs }

func (g *GMS) newEpoch(cnt *sim.Counters) {
	c := g.c
	g.epochs++
	g.needsEpoch, g.left, g.accesses = false, g.m, 0
	w := make([]int, len(c.cl))
	found := 0
	for _, n := range c.freeSet() {
		f := min(c.k-c.cl[n].Len(), g.m-found)
		w[n] += f
		found += f
	}
	old, last := c.countOldest(w, g.m-found) // last: the M-th oldest block
	found += old
	c.ax.mark = 0 // MinAge
	if found == g.m && last != 0 {
		c.ax.mark = c.es[last].age
	} // else fewer blocks than M: nothing is old enough to drop
	t := 0.0
	for i := range w {
		t += float64(w[i])
		g.cum[i] = t
	}
	cnt.Manager(sim.CauseReplacement, 2*len(c.cl))
	for n := range c.cl {
		cnt.Msg(n, sim.NodeManager, false)
		cnt.Msg(sim.NodeManager, n, false)
	}
}

func (g *GMS) pick() int {
	total := g.cum[len(g.cum)-1]
	if total == 0 {
		return -1
	}
	x := g.c.rng.Float64()*total + 1e-12
	// The first i with cum[i] >= x, as sort.SearchFloat64s finds it (the
	// last client if x passes them all), without a call through a closure
	// at every step and without a branch on the comparisons (a conditional
	// move: which half holds x is a coin toss). INVARIANT: that i is in
	// [base, base+n-1].
	cum := g.cum
	base, n := 0, len(cum)
	for n > 1 {
		half := n / 2
		if cum[base+half-1] < x {
			base += half
		}
		n -= half
	}
	return base
}

// drop drops e with a delete notice; if that leaves a singlet, the manager
// tells its holder.
func (g *GMS) drop(e int32, cnt *sim.Counters) {
	if o := dropNotify(g.c, e, cnt); o.h != 0 {
		cnt.Replacement(sim.ReplDuplicate, 1)
		cnt.Manager(sim.CauseReplacement, 1)
		cnt.Msg(sim.NodeManager, int(o.node), false)
	}
}

func (g *GMS) makeRoom(n int, cnt *sim.Counters) {
	c := g.c
	if g.needsEpoch || g.left <= 0 {
		g.newEpoch(cnt)
	}
	g.left--
	v := c.victim(n)
	e := &c.es[v]
	if c.copies(e.id) > 1 || e.age <= c.ax.mark || c.p.Clients == 1 {
		g.drop(v, cnt)
		return
	}
	t := g.pick()
	if t < 0 || t == n {
		g.drop(v, cnt)
		return
	}
	if c.full(t) {
		g.drop(c.victim(t), cnt)
	}
	forward(c, v, t, false, cnt)
}

// Check implements sim.Checker.
func (g *GMS) Check() error {
	if err := g.c.check(); err != nil {
		return err
	}
	return g.c.checkNoGlobalDuplicates()
}

// IDs implements sim.Numberer.
func (g *GMS) IDs() *sim.IDs { return &g.c.ids }
