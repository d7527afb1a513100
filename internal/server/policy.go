package server

import (
	"context"
	"fmt"
	"os"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/wire"
)

// Policies is every coordination policy the live server runs.
var Policies = []string{"none", "directory", "hints", "wholefile"}

// policy is the server's side of a coordination policy: the live server
// feeds it events (clients joining and leaving, files changing, blocks
// entering and leaving its memory, misses reaching it, the policy's own
// messages) and carries out what it decides. Each policy is an adapter
// around a state machine of internal/coord (pdirectory.go, phints.go,
// pwholefile.go);
// `none` is policyNone. The server never asks which policy runs.
type policy interface {
	// joined and left bracket a client's connection.
	joined(cl *client, c *wire.Conn)
	left(cl *client)
	// fileChanged: a known file got a new version (versions.go).
	fileChanged(ino uint64)
	// memEvicted: the server's memory cache dropped a block.
	memEvicted(id block.ID)
	// read is a client's miss of block id (version v, open as f) reaching
	// the server. A policy that answers it (a forward to a holder, a hit in
	// a policy's own memory) fills reply in and returns true; otherwise
	// the server serves it from its memory cache or the export.
	read(c *wire.Conn, cl *client, m *wire.ReadBlock, f *os.File, id block.ID, v uint64, reply *wire.BlockReply) bool
	// served: the server served block id at version v itself, from its
	// memory cache or (fromDisk) the export.
	served(f *os.File, id block.ID, v uint64, data []byte, fromDisk bool)
	// serve handles the policy's own messages; handled is false for a
	// message that is not one.
	serve(ctx context.Context, c *wire.Conn, cl *client, m wire.Msg) (reply wire.Msg, err error, handled bool)
}

// newPolicy makes the adapter of the configured policy (after
// validate).
func newPolicy(s *Server) (policy, error) {
	switch s.cfg.Policy {
	case "none":
		return policyNone{}, nil
	case "directory":
		return newDirectoryPolicy(s)
	case "hints":
		return newHintsPolicy(s)
	case "wholefile":
		return newWholeFilePolicy(s)
	}
	return nil, fmt.Errorf("unknown policy %q: use none, directory, hints or wholefile", s.cfg.Policy)
}

// policyNone is plain client–server caching: every miss is served by the
// server; cooperative messages are ignored.
type policyNone struct{}

func (policyNone) joined(*client, *wire.Conn) {}
func (policyNone) left(*client)               {}
func (policyNone) fileChanged(uint64)         {}
func (policyNone) memEvicted(block.ID)        {}
func (policyNone) read(*wire.Conn, *client, *wire.ReadBlock, *os.File, block.ID, uint64, *wire.BlockReply) bool {
	return false
}
func (policyNone) served(*os.File, block.ID, uint64, []byte, bool) {}
func (policyNone) serve(_ context.Context, _ *wire.Conn, _ *client, m wire.Msg) (wire.Msg, error, bool) {
	switch m.(type) {
	case *wire.Discard, *wire.Held, *wire.PeerReport, *wire.HintsDiscard:
		return nil, nil, true // one-way notes of a policy not running: nothing to do
	}
	return nil, nil, false
}
