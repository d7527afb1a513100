package main

import (
	"os"
	"syscall"
	"testing"
)

// TestE2EUnlinkedOpenFileNlink: a file opened read-only and then unlinked
// through the same mount has no links left: fstat reports st_nlink 0, as
// ext4 does (the mount used to report 1).
func TestE2EUnlinkedOpenFileNlink(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	m := startMount(t, srv.addr)
	for _, flags := range []int{os.O_RDONLY, os.O_RDWR} {
		p := m.path("f")
		mustWrite(t, p, []byte("data"))
		f, err := os.OpenFile(p, flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if st.Nlink != 0 {
			t.Errorf("fstat of a file opened with flags %#x, then unlinked: st_nlink %d, want 0", flags, st.Nlink)
		}
	}
}
