// Package servertest runs a coopfs server for the tests of the packages
// that talk to one (agent, proxy, writeback).
package servertest

import (
	"context"
	"testing"

	"github.com/coopfs/coopfs/internal/server"
)

// Serve starts a server with cfg on a free loopback port and returns its
// address; the server stops when the test ends.
func Serve(t testing.TB, cfg server.Config) string {
	t.Helper()
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := server.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}
