package wholefile

import (
	"cmp"
	"slices"
)

// Range is a run of blocks [First, First+Count).
type Range struct {
	First, Count uint64
}

func (r Range) end() uint64 { return r.First + r.Count }

// Fetch plans one whole-file fetch of blocks [0, blocks) from holders
// 0..n-1: equal segments, one per holder, taken in chunks of at most chunk
// blocks (NewFetch); or, from holders whose copies are still arriving in
// file order, one queue in file order that every holder takes the next
// chunk of (NewSequentialFetch). It is not safe for concurrent use (the
// live agent locks it).
//
// INVARIANT: every block is in exactly one of: a live holder's segment
// (not yet handed out), the orphans, a chunk in flight, or done; the
// orphans are in file order and do not overlap.
type Fetch struct {
	chunk   uint64
	segs    []segment
	orphans []Range // work of failed holders (or the queue), taken first by any live one, in file order
	resplit int
}

type segment struct {
	next, end uint64 // the part not yet handed out
	failed    bool
}

// NewFetch splits blocks into n equal segments (the last ones one block
// shorter when n does not divide it); chunk is the most blocks one request
// carries (at least 1).
func NewFetch(blocks uint64, n int, chunk uint64) *Fetch {
	f := &Fetch{chunk: max(1, chunk), segs: make([]segment, max(0, n))}
	if n <= 0 {
		if blocks > 0 {
			f.orphans = []Range{{0, blocks}}
		}
		return f
	}
	per, extra := blocks/uint64(n), blocks%uint64(n)
	var at uint64
	for i := range f.segs {
		size := per
		if uint64(i) < extra {
			size++
		}
		f.segs[i] = segment{next: at, end: at + size}
		at += size
	}
	return f
}

// NewSequentialFetch plans blocks for n holders whose copies are partial
// and grow from the file's start (they are reading it): no segments, one
// queue in file order, each holder taking the lowest chunk left, so that
// every request asks for what its holder most likely has already.
func NewSequentialFetch(blocks uint64, n int, chunk uint64) *Fetch {
	f := &Fetch{chunk: max(1, chunk), segs: make([]segment, max(0, n))}
	if blocks > 0 {
		f.orphans = []Range{{0, blocks}}
	}
	return f
}

// Segments returns the planned segment of each holder as it stands (for
// tests and logs).
func (f *Fetch) Segments() []Range {
	out := make([]Range, len(f.segs))
	for i, s := range f.segs {
		out[i] = Range{s.next, s.end - s.next}
	}
	return out
}

// Next hands holder h its next chunk: from the orphans first, then its own
// segment, then (re-split) the second half of the largest segment another
// holder has left. ok is false when nothing is left for h (or h failed).
func (f *Fetch) Next(h int) (r Range, ok bool) {
	if h < 0 || h >= len(f.segs) || f.segs[h].failed {
		return Range{}, false
	}
	if len(f.orphans) > 0 {
		o := &f.orphans[0]
		r = Range{o.First, min(o.Count, f.chunk)}
		o.First += r.Count
		o.Count -= r.Count
		if o.Count == 0 {
			f.orphans = f.orphans[1:]
		}
		return r, true
	}
	s := &f.segs[h]
	if s.next >= s.end && !f.steal(h) {
		return Range{}, false
	}
	r = Range{s.next, min(s.end-s.next, f.chunk)}
	s.next += r.Count
	return r, true
}

// steal gives holder h the second half of the largest segment left to
// another live holder (at least one block); false if none is left.
func (f *Fetch) steal(h int) bool {
	best, most := -1, uint64(0)
	for i, s := range f.segs {
		if i != h && !s.failed && s.end-s.next > most {
			best, most = i, s.end-s.next
		}
	}
	if best < 0 {
		return false
	}
	v := &f.segs[best]
	mid := v.next + most/2 // a single block moves whole: most/2 == 0 gives it all
	f.segs[h] = segment{next: mid, end: v.end}
	v.end = mid
	f.resplit++
	return true
}

// Failed: holder h did not deliver r (the chunk it was fetching): r and
// the rest of h's segment go to the orphans, and h gets no more work.
func (f *Fetch) Failed(h int, r Range) {
	f.orphan(r)
	if h < 0 || h >= len(f.segs) {
		return
	}
	s := &f.segs[h]
	if s.end > s.next {
		f.orphan(Range{s.next, s.end - s.next})
	}
	s.next, s.end, s.failed = 0, 0, true
}

// Returned: holder h delivered only part of a chunk (a holder whose copy is
// still arriving sends what it has): r, the rest, goes back to the queue,
// first in line, and h stays live.
func (f *Fetch) Returned(r Range) { f.orphan(r) }

// orphan puts r among the orphans, keeping them in file order.
func (f *Fetch) orphan(r Range) {
	if r.Count == 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(f.orphans, r.First, func(o Range, first uint64) int { return cmp.Compare(o.First, first) })
	f.orphans = slices.Insert(f.orphans, i, r)
}

// Remaining is the work no live holder can take (every holder failed or
// none was given): the blocks left for the server.
func (f *Fetch) Remaining() []Range {
	var out []Range
	for _, o := range f.orphans {
		if o.Count > 0 {
			out = append(out, o)
		}
	}
	for _, s := range f.segs {
		if !s.failed && s.end > s.next {
			out = append(out, Range{s.next, s.end - s.next})
		}
	}
	return out
}

// Resplits counts the segments split to move work to a holder that ran out.
func (f *Fetch) Resplits() int { return f.resplit }
