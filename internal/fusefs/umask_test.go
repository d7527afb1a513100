package fusefs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCreateUmaskFromRequest: every create and mkdir applies the
// umask the caller has at that moment, changed between calls well within
// the identity cache's lifetime (the umask comes with the request).
func TestCreateUmaskFromRequest(t *testing.T) {
	_, m := mountMem(t, Config{})
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for i, c := range []struct{ umask, file, dir uint32 }{
		{0o077, 0o600, 0o700}, {0o022, 0o644, 0o755}, {0o027, 0o640, 0o750}, {0, 0o666, 0o777},
	} {
		syscall.Umask(int(c.umask))
		f := filepath.Join(m.Dir(), "f"+string(rune('a'+i)))
		if err := os.WriteFile(f, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(m.Dir(), "d"+string(rune('a'+i)))
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]uint32{f: c.file, d: c.dir} {
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := uint32(fi.Mode().Perm()); got != want {
				t.Errorf("umask %03o: %s has mode %03o, want %03o", c.umask, filepath.Base(path), got, want)
			}
		}
	}
}
