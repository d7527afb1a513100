// Package clustertest helps tests that run a local cluster: it builds the
// coopfs binary once per test binary and skips where FUSE or root is
// missing.
package clustertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// builder builds cmd/coopfs once per test binary; guarded by its Once.
type builder struct {
	once sync.Once
	dir  string
	bin  string
	err  error
	out  []byte
}

var shared builder // process-wide build cache of the test binary, set once

// Binary returns a freshly built coopfs binary, skipping the test when the
// tree does not build (other packages may be mid-edit).
func Binary(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "coopfs-bin-")
		if shared.err != nil {
			return
		}
		shared.bin = filepath.Join(shared.dir, "coopfs")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared.out, shared.err = exec.CommandContext(ctx, "go", "build", "-o", shared.bin, "github.com/coopfs/coopfs/cmd/coopfs").CombinedOutput()
	})
	if shared.err != nil {
		t.Skipf("cannot build coopfs (the tree may be mid-edit): %v\n%s", shared.err, shared.out)
	}
	return shared.bin
}

// Cleanup removes the built binary; call it from TestMain after m.Run.
func Cleanup() {
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

// RequireFUSE skips the test unless FUSE mounts can be made as root here.
func RequireFUSE(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("FUSE unavailable: ", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("these tests mount as root")
	}
}
