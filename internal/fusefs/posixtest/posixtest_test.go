package posixtest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLocal runs the suite against a local directory: every case must pass
// on the kernel's own file systems, which checks the suite itself.
func TestLocal(t *testing.T) {
	dir := t.TempDir()
	// t.TempDir makes 0700 directories; let other users reach it for
	// AccessDenied.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	Run(t, dir)
}
