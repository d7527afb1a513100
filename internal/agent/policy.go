package agent

import (
	"context"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/wire"
)

// Policies is every coordination policy a mount can run (the server's
// --policy chooses; the agent learns it at the handshake).
var Policies = []string{"none", "directory", "hints", "wholefile"}

// policy is the client's side of a coordination policy, the one seam the
// read path and the tiers drive: events in (an open, a local hit, a miss,
// an eviction, a message from the server), actions out (where a miss is
// read from, what the server and the peers are sent). Each cooperative
// policy is an adapter around a state machine of internal/coord
// (pdirectory.go, phints.go, pwholefile.go); `none` is policyNone.
type policy interface {
	// opened: a regular file was opened as f (hints: the hint hand-out).
	opened(ctx context.Context, f *file)
	// fetch reads block id at version v of f after the memory and disk
	// tiers missed it: from a peer or the server, as the policy decides.
	// It counts the read in the layer that served it.
	fetch(ctx context.Context, f *file, id block.ID, v uint64) (*wire.BlockReply, error)
	// hit: the memory tier served id at v; promoted: the disk tier did
	// and the block is now in memory too.
	hit(id block.ID, v uint64)
	promoted(id block.ID, v uint64)
	// memEvicted and diskEvicted: a tier dropped a block on its own.
	memEvicted(id block.ID)
	diskEvicted(id block.ID)
	// fileDropped: the file's blocks were dropped (its version changed).
	fileDropped(ino uint64)
	// serveServer answers what the server sends under the policy;
	// handled is false for a message the policy does not know.
	serveServer(ctx context.Context, m wire.Msg) (reply wire.Msg, err error, handled bool)
	// closing: f is being closed (FUSE flush; wholefile: the commit).
	closing(ctx context.Context, f *file)
	close()
}

// policyBox holds the running policy for an atomic swap at connect time
// (the server may send before the agent has built its policy).
type policyBox struct{ policy }

// policy returns the running policy.
func (a *Agent) policy() policy { return a.pol.Load().policy }

// policyNone is plain client–server caching: every miss goes to the server.
type policyNone struct{}

func (policyNone) opened(context.Context, *file) {}
func (policyNone) fetch(ctx context.Context, f *file, id block.ID, v uint64) (*wire.BlockReply, error) {
	return f.fromServer(ctx, &wire.ReadBlock{File: id.File, Index: id.Index, Version: v})
}
func (policyNone) hit(block.ID, uint64)      {}
func (policyNone) promoted(block.ID, uint64) {}
func (policyNone) memEvicted(block.ID)       {}
func (policyNone) diskEvicted(block.ID)      {}
func (policyNone) fileDropped(uint64)        {}
func (policyNone) serveServer(context.Context, wire.Msg) (wire.Msg, error, bool) {
	return nil, nil, false
}
func (policyNone) closing(context.Context, *file) {}
func (policyNone) close()                         {}
