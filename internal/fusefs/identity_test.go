package fusefs

import (
	"os"
	"slices"
	"testing"
)

// readGroups reads the calling thread's supplementary groups as the kernel
// reports them; they match getgroups(2).
func TestReadGroups(t *testing.T) {
	got, err := readGroups(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	g := make([]int, len(got))
	for i, v := range got {
		g[i] = int(v)
	}
	slices.Sort(g)
	slices.Sort(want)
	if !slices.Equal(g, want) {
		t.Errorf("readGroups = %v, getgroups = %v", g, want)
	}
	if _, err := readGroups(1 << 30); err == nil {
		t.Error("readGroups of a process that does not exist: no error")
	}
}
