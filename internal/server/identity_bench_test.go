package server

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
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
		if _, err := s.runAs(nil, id, func() (wire.Msg, error) { return nil, nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteAsUser is a 4 KiB write through the protocol (loopback
// TCP, no TLS) to a file a non-root user opened, which costs an fstat per
// write for the set-id bits (killPrivOnWrite); "root" opens it as the
// server's own identity, which skips that. Needs root.
//
//	go test -run '^$' -bench WriteAsUser ./internal/server
func BenchmarkWriteAsUser(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("acting as other users needs root")
	}
	for _, who := range []struct {
		name string
		uid  uint32
	}{{"root", 0}, {"user", 1000}} {
		b.Run(who.name, func(b *testing.B) {
			export := b.TempDir()
			p := filepath.Join(export, "f")
			os.WriteFile(p, nil, 0o666)
			os.Chmod(p, 0o666)
			s, err := New(Config{Export: export, Squash: SquashNone})
			if err != nil {
				b.Fatal(err)
			}
			ln, err := Listen("127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go s.Serve(ctx, ln)
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			hs, err := wire.ClientHandshake(ctx, nc, wire.MustSecurity(wire.SecurityConfig{Insecure: true}), "", wire.Hello{Role: wire.RoleClient, Name: "bench", BootID: 1})
			if err != nil {
				b.Fatal(err)
			}
			c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{})
			defer c.Close()
			r, err := c.Call(ctx, &wire.As{UID: who.uid, GID: who.uid, Msg: &wire.Open{Path: "f", Flags: syscall.O_WRONLY}})
			if err != nil {
				b.Fatal(err)
			}
			h := r.(*wire.OpenReply).Handle
			data := make([]byte, 4096)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := c.Call(ctx, &wire.Write{Handle: h, Data: data}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKillPrivCheck is the check each write through a user's handle
// makes (killPrivOnWrite on a file with no set-id bit): one fstat.
func BenchmarkKillPrivCheck(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "f"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := &Server{}
	of := &openFile{f: f, opener: &identity{uid: 1000, gid: 1000}}
	for b.Loop() {
		if err := s.killPrivOnWrite(of); err != nil {
			b.Fatal(err)
		}
	}
}
