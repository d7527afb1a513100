package posixtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Case is one named behaviour check. Fn gets a fresh, empty directory on the
// file system under test.
type Case struct {
	Name string
	Fn   func(t *testing.T, dir string)
}

// Cases lists every case of the suite, in the order Run runs them.
func Cases() []Case {
	return []Case{
		{"CreateReadWrite", CreateReadWrite},
		{"Append", Append},
		{"TruncateGrow", TruncateGrow},
		{"TruncateShrink", TruncateShrink},
		{"OpenTrunc", OpenTrunc},
		{"Chmod", Chmod},
		{"Chown", Chown},
		{"Utimes", Utimes},
		{"UtimesNow", UtimesNow},
		{"MkdirRmdir", MkdirRmdir},
		{"Unlink", Unlink},
		{"UnlinkOpenFile", UnlinkOpenFile},
		{"ExclusiveCreate", ExclusiveCreate},
		{"WriteDirectory", WriteDirectory},
		{"NotADirectory", NotADirectory},
		{"RenameFile", RenameFile},
		{"RenameDir", RenameDir},
		{"RenameOverExisting", RenameOverExisting},
		{"RenameOverOpenFile", RenameOverOpenFile},
		{"RenameNoReplace", RenameNoReplace},
		{"RenameExchange", RenameExchange},
		{"RenameDirErrors", RenameDirErrors},
		{"HardLink", HardLink},
		{"Symlink", Symlink},
		{"ReaddirMany", ReaddirMany},
		{"LargeSparseFile", LargeSparseFile},
		{"Fsync", Fsync},
		{"Statfs", Statfs},
		{"AccessDenied", AccessDenied},
		{"SeekPreadPwrite", SeekPreadPwrite},
		{"ConcurrentReaders", ConcurrentReaders},
	}
}

// Run runs every case of Cases as a subtest of t, each in its own new
// subdirectory of dir (removed afterwards when the case passed).
func Run(t *testing.T, dir string) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			sub := filepath.Join(dir, c.Name)
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatalf("mkdir %s: %v", sub, err)
			}
			t.Cleanup(func() {
				if !t.Failed() {
					if err := os.RemoveAll(sub); err != nil {
						t.Errorf("cleanup: %v", err)
					}
				}
			})
			c.Fn(t, sub)
		})
	}
}

// RunNamed runs the cases whose names are given, for focused debugging.
func RunNamed(t *testing.T, dir string, names ...string) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, c := range Cases() {
		if want[c.Name] {
			t.Run(c.Name, func(t *testing.T) {
				sub, err := os.MkdirTemp(dir, c.Name)
				if err != nil {
					t.Fatal(err)
				}
				c.Fn(t, sub)
			})
			delete(want, c.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("unknown cases: %v", fmt.Sprint(want))
	}
}
