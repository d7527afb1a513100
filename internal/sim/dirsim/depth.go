package dirsim

import "math"

// depths tracks the forward depth of the clients' cached copies: how many
// holders in the chain a copy came through were themselves still waiting
// for the block. A copy from the server, or from a holder whose copy had
// arrived, has depth 0; a copy from a holder that was waiting for its own
// (its copy pending when the forward reached it) has that copy's depth
// plus one. The live agents bound such chains by the forward timeout; the
// simulator lets them grow, so that the depth shows how long they get when
// many clients read the same block at about the same time.
//
// Most copies have depth 0, so only the others are stored (a client's
// copy is set on every insert: a re-cached block never keeps an old depth).
// Nothing the simulation decides depends on them.
type depths struct {
	deep map[uint64]int32 // client<<32 | block number → depth (> 0)
	hist []int64          // reads served by a peer, by the depth of the copy they made
	last int              // the depth of the read being simulated (cooperative → miss)
}

func depthKey(cl int, id uint32) uint64 { return uint64(cl)<<32 | uint64(id) }

// of returns the depth of client cl's cached copy of block id.
func (d *depths) of(cl int, id uint32) int {
	if len(d.deep) == 0 {
		return 0
	}
	return int(d.deep[depthKey(cl, id)])
}

// served records a read served by a peer, making a copy of depth n.
func (d *depths) served(n int) {
	for len(d.hist) <= n {
		d.hist = append(d.hist, 0)
	}
	d.hist[n]++
	d.last = n
}

// set records the depth of client cl's new copy of block id.
func (d *depths) set(cl int, id uint32, n int) {
	switch {
	case n > 0:
		if d.deep == nil {
			d.deep = make(map[uint64]int32)
		}
		d.deep[depthKey(cl, id)] = int32(n)
	case len(d.deep) > 0:
		delete(d.deep, depthKey(cl, id))
	}
}

// DepthStats summarizes the forward depths of the reads peers served.
type DepthStats struct {
	Reads  int64   `json:"reads"`  // reads served by a peer
	Waited int64   `json:"waited"` // ... whose holder was still waiting (depth ≥ 1)
	Mean   float64 `json:"mean"`
	P99    int     `json:"p99"`
	Max    int     `json:"max"`
	// Hist is the reads by depth (index: the depth).
	Hist []int64 `json:"hist"`
}

// ForwardDepth returns the forward depths of the reads peers served since
// New.
func (s *Sim) ForwardDepth() DepthStats { return DepthOf(s.depth.hist) }

// DepthOf summarizes a histogram of depths (hist[d]: reads of depth d).
func DepthOf(hist []int64) DepthStats {
	st := DepthStats{Hist: append([]int64(nil), hist...)}
	var sum float64
	for d, n := range hist {
		st.Reads += n
		sum += float64(d) * float64(n)
		if d > 0 {
			st.Waited += n
		}
		if n > 0 {
			st.Max = d
		}
	}
	if st.Reads == 0 {
		return st
	}
	st.Mean = sum / float64(st.Reads)
	want := int64(math.Ceil(0.99 * float64(st.Reads)))
	var acc int64
	for d, n := range hist {
		if acc += n; acc >= want {
			st.P99 = d
			break
		}
	}
	return st
}
