package fusefs

import (
	"os"
	"slices"
	"syscall"
	"testing"
)

// readGroups reads the calling thread's supplementary groups as the kernel
// reports them; they match getgroups(2).
func TestReadStatus(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	got, umask, err := readStatus(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if umask != 0o027 {
		t.Errorf("umask = %o, want 027", umask)
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
	if _, _, err := readStatus(1 << 30); err == nil {
		t.Error("readGroups of a process that does not exist: no error")
	}
}
