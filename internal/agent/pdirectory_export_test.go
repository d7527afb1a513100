package agent

import (
	"context"
	"fmt"
	"syscall"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/directory"
)

// Test hooks of the directory policy (coop_test.go).

// DirectoryStateAfterFetch opens path on a (under the directory policy),
// runs the policy's fetch of block idx the way file.fetch does, and
// returns what a forward arriving right after the policy's fetch returned
// (before file.fetch stores the block) would find: Present or Pending
// serve it, Absent answers negatively.
func DirectoryStateAfterFetch(ctx context.Context, a *Agent, path string, idx uint64) (string, error) {
	c, ok := a.policy().(*coop)
	if !ok {
		return "", fmt.Errorf("the agent does not run the directory policy")
	}
	f, _, err := a.Open(ctx, path, syscall.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer f.Release(ctx)
	of := f.(*file)
	id := block.ID{File: of.attr.Ino, Index: idx}
	if _, err := c.fetch(ctx, of, id, of.attr.Version); err != nil {
		return "", err
	}
	switch c.localState(id).State {
	case directory.Present:
		return "present", nil
	case directory.Pending:
		return "pending", nil
	}
	return "absent", nil
}
