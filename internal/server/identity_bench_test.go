package server

import (
	"testing"

	"github.com/coopfs/coopfs/internal/wire"
)

// BenchmarkRunAs is the cost of acting as a client user for one request
// (identity.go): the switch of the thread's credentials and back, around
// nothing. Needs root.
//
//	go test -run '^$' -bench RunAs ./internal/server
func BenchmarkRunAs(b *testing.B) {
	s := &Server{}
	if err := s.initCreds(); err != nil || !s.switchCreds {
		b.Skip("acting as other users needs root")
	}
	id := identity{uid: DefaultAnonID, gid: DefaultAnonID}
	for b.Loop() {
		if _, err := s.runAs(id, func() (wire.Msg, error) { return nil, nil }); err != nil {
			b.Fatal(err)
		}
	}
}
