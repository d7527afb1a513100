package warmup

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// coverage maps each path to the byte ranges the segments hold, checking
// that they tile the item exactly.
func checkTiles(t *testing.T, items []Item, segs [][]Item, bs uint64) {
	t.Helper()
	next := make(map[string]uint64)
	whole := make(map[string]bool)
	for _, seg := range segs {
		for _, it := range seg {
			if it.Off != next[it.Path] {
				t.Fatalf("%s: a piece starts at %d, want %d", it.Path, it.Off, next[it.Path])
			}
			if it.Off%bs != 0 {
				t.Fatalf("%s: a piece starts at %d, not a block boundary", it.Path, it.Off)
			}
			if it.Len == 0 {
				whole[it.Path] = true
				next[it.Path] = it.Size
			} else {
				next[it.Path] += it.Len
			}
		}
	}
	for _, it := range items {
		if !whole[it.Path] {
			t.Fatalf("%s: no piece runs to its end", it.Path)
		}
	}
}

func TestSplitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const bs = 1 << 20
	for trial := range 300 {
		var items []Item
		var total uint64
		for i := range r.IntN(40) + 1 {
			size := uint64(r.IntN(8 << 20))
			if r.IntN(4) == 0 {
				size = uint64(r.IntN(4096))
			}
			items = append(items, Item{Path: fmt.Sprintf("f%d", i), Size: size})
			total += size
		}
		n := r.IntN(10) + 1
		segs := Split(items, n, bs)
		if len(segs) != n {
			t.Fatalf("trial %d: %d segments, want %d", trial, len(segs), n)
		}
		checkTiles(t, items, segs, bs)
		target := max((total+uint64(n)-1)/uint64(n), 1)
		for i, seg := range segs[:n-1] {
			var b uint64
			for _, it := range seg {
				b += it.bytes()
			}
			if b > target+bs {
				t.Fatalf("trial %d: segment %d holds %d bytes, target %d", trial, i, b, target)
			}
		}
	}
}

// TestSplitOneBigFile: one file is cut into equal block-aligned parts.
func TestSplitOneBigFile(t *testing.T) {
	segs := Split([]Item{{Path: "big", Size: 8 << 20}}, 4, 1<<20)
	for i, seg := range segs {
		if len(seg) != 1 || seg[0].bytes() != 2<<20 || seg[0].Off != uint64(i)*(2<<20) {
			t.Fatalf("segment %d: %+v; want 2 MiB at %d", i, seg, i*(2<<20))
		}
	}
}

// TestPhases: shares first, then the ring; every member fetches every
// segment exactly once.
func TestPhases(t *testing.T) {
	items := []Item{{Path: "a", Size: 3 << 20}, {Path: "b", Size: 3 << 20}, {Path: "c", Size: 3 << 20}}
	j, acts, err := New(items, []Member{1, 2, 3}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 3 {
		t.Fatalf("%d phase-1 assignments, want 3", len(acts))
	}
	got := make(map[Member]map[string]int)
	note := func(as []Assign) {
		for _, a := range as {
			if got[a.To] == nil {
				got[a.To] = make(map[string]int)
			}
			for _, it := range a.Items {
				got[a.To][it.Path]++
			}
		}
	}
	note(acts)
	if st := j.State(); st.Phase != Shares || st.TotalBytes != 27<<20 || st.ClientsDone != 0 {
		t.Fatalf("state %+v", st)
	}
	var next []Assign
	for _, a := range acts {
		next = append(next, j.Report(a.To, a.Seq, 3<<20, true, "")...)
	}
	if j.State().Phase != Peers || len(next) != 3 {
		t.Fatalf("after the shares: phase %d, %d assignments; want phase 2 and 3", j.State().Phase, len(next))
	}
	// Member 1 (position 0) starts with segment 1 (member 2's), read
	// from member 2.
	if next[0].To != 1 || next[0].Items[0].Path != "b" || len(next[0].From) != len(next[0].Items) || next[0].From[0] != 2 {
		t.Fatalf("member 1's rest starts with %+v from %v; want b from 2", next[0].Items[0], next[0].From)
	}
	note(next)
	for m, files := range got {
		for _, p := range []string{"a", "b", "c"} {
			if files[p] != 1 {
				t.Fatalf("member %d fetches %s %d times; want once", m, p, files[p])
			}
		}
	}
	for _, a := range next {
		j.Report(a.To, a.Seq, 6<<20, true, "")
	}
	if st := j.State(); st.Phase != Done || st.Bytes != 27<<20 || st.ClientsDone != 3 || st.Err != nil {
		t.Fatalf("final state %+v", st)
	}
}

// TestLeftInPhaseOne: a member that leaves before its share is in has its
// share reassigned; the others' rests skip what they fetched themselves.
func TestLeftInPhaseOne(t *testing.T) {
	items := []Item{{Path: "a", Size: 1 << 20}, {Path: "b", Size: 1 << 20}, {Path: "c", Size: 1 << 20}}
	j, acts, _ := New(items, []Member{1, 2, 3}, 1<<20)
	j.Report(1, acts[0].Seq, 1<<20, true, "")
	re := j.Left(2)
	if len(re) != 1 || re[0].Phase != Shares || re[0].Items[0].Path != "b" || re[0].To != 1 {
		t.Fatalf("reassignment %+v; want b to member 1 (it has nothing left to do)", re)
	}
	var rest []Assign
	rest = append(rest, j.Report(3, acts[2].Seq, 1<<20, true, "")...)
	rest = append(rest, j.Report(re[0].To, re[0].Seq, 1<<20, true, "")...)
	if len(rest) != 2 {
		t.Fatalf("phase 2: %+v; want 2 assignments", rest)
	}
	for _, a := range rest {
		want := map[Member]int{1: 1, 3: 2}[a.To] // member 1 fetched a and b itself
		if len(a.Items) != want {
			t.Fatalf("member %d's rest %+v: want %d files", a.To, a.Items, want)
		}
		for i, it := range a.Items { // b from its new owner, member 1
			if from := map[string]Member{"a": 1, "b": 1, "c": 3}[it.Path]; a.From[i] != from {
				t.Fatalf("member %d reads %s from %d, want %d", a.To, it.Path, a.From[i], from)
			}
		}
	}
	for _, a := range rest {
		j.Report(a.To, a.Seq, 1<<20, true, "x: failed")
	}
	if st := j.State(); st.Phase != Done || st.Err == nil || len(st.Members) != 2 {
		t.Fatalf("final %+v", st)
	}
	if j.Left(1); j.Left(3) != nil || j.State().Phase != Done {
		t.Fatal("leaving after the end changes nothing")
	}
}

// TestEveryoneLeft: the job ends with an error.
func TestEveryoneLeft(t *testing.T) {
	j, _, _ := New([]Item{{Path: "a", Size: 10}}, []Member{1, 2}, 4096)
	j.Left(1)
	j.Left(2)
	if st := j.State(); st.Phase != Done || st.Err == nil {
		t.Fatalf("%+v", st)
	}
}

// TestSplitWhole: with bs 0 no file is cut; a large file fills a segment.
func TestSplitWhole(t *testing.T) {
	items := []Item{{Path: "big", Size: 10 << 20}, {Path: "a", Size: 1 << 20}, {Path: "b", Size: 1 << 20}, {Path: "c", Size: 1 << 20}}
	segs := Split(items, 3, 0)
	for _, seg := range segs {
		for _, it := range seg {
			if it.Off != 0 || it.Len != 0 {
				t.Fatalf("a file was cut: %+v", it)
			}
		}
	}
	if len(segs[0]) != 1 || segs[0][0].Path != "big" {
		t.Fatalf("segments %+v; want big alone in the first", segs)
	}
	n := 0
	for _, seg := range segs {
		n += len(seg)
	}
	if n != 4 {
		t.Fatalf("segments %+v hold %d files; want 4", segs, n)
	}
}
