package classic

import "math"

// useIndex is Prescan's next-use index: access i's block number and the
// position of its block's next access (math.MaxInt32 if none), in chunks
// of useChunk accesses, so that growing it copies nothing and touches
// each page once (a slice grown by append copies it several times over,
// in fresh pages that fault in).
type useIndex struct {
	c [][]useEntry
	n int
}

type useEntry struct {
	next int32
	id   uint32
}

const useShift = 16
const useChunk = 1 << useShift

// add appends an access to block id, with no next use yet.
func (x *useIndex) add(id uint32) {
	c := x.n >> useShift
	if c == len(x.c) {
		x.c = append(x.c, make([]useEntry, useChunk))
	}
	x.c[c][x.n&(useChunk-1)] = useEntry{math.MaxInt32, id}
	x.n++
}

// setNext makes i the next use of access j.
func (x *useIndex) setNext(j, i int32) { x.c[j>>useShift][j&(useChunk-1)].next = i }

func (x *useIndex) at(i int) useEntry { return x.c[i>>useShift][i&(useChunk-1)] }
