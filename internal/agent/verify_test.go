package agent_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/server/servertest"
	"github.com/coopfs/coopfs/internal/wire"
)

// A cluster member that holds the secret and answers every forward with
// wrong bytes (right file, index and version): every reader still gets
// the right bytes, the member is reported and counted, and after
// server.BadBlockLimit reports the server stops forwarding to it.
func TestMaliciousPeerCannotPoisonCaches(t *testing.T) {
	export := t.TempDir()
	const blocks = 12
	data := pattern(blocks*4096, 9)
	os.WriteFile(filepath.Join(export, "f"), data, 0o644)
	secret := []byte("a cluster secret of more than 128 bits")
	sm := obs.NewMetrics()
	addr := servertest.Serve(t, server.Config{Export: export, BlockSize: 4096, Policy: "directory", Metrics: sm,
		Secret: secret, Directory: directory.Config{ServerLast: true}})
	ctx := t.Context() // the malicious member runs until the test ends
	sec := wire.MustSecurity(wire.SecurityConfig{Secret: secret})

	// The malicious member: a raw client that reads every block (so the
	// directory lists it as a holder) and answers forwards with garbage.
	mal := startMalicious(t, ctx, addr, sec, blocks, false)

	for i := range 3 {
		m := obs.NewMetrics()
		reader, err := agent.New(ctx, agent.Config{Server: addr, Secret: secret, Policy: "directory", Metrics: m,
			ForwardTimeout: 10 * time.Second, Name: "reader"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(ctx, reader, "f")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("reader %d: %d bytes, %v; want the file's bytes", i, len(got), err)
		}
		bad := scrape(t, m).Sum("coopfs_forwarded_bad_blocks_total", nil)
		if i == 0 && bad < 1 {
			t.Errorf("reader %d dropped no bad block (the malicious holder was never forwarded to?)", i)
		}
		reader.Close()
	}
	ss := scrape(t, sm)
	if n := ss.Sum("coopfs_directory_bad_blocks_reported_total", nil); n < server.BadBlockLimit {
		t.Errorf("the server got %v bad-block reports, want at least %d", n, server.BadBlockLimit)
	}
	if n := ss.Sum("coopfs_directory_distrusted_total", nil); n != 1 {
		t.Errorf("distrusted clients = %v, want 1", n)
	}
	// Once distrusted, the member gets no more forwards.
	before := mal.forwards()
	m := obs.NewMetrics()
	last, err := agent.New(ctx, agent.Config{Server: addr, Secret: secret, Policy: "directory", Metrics: m, Name: "last"})
	if err != nil {
		t.Fatal(err)
	}
	defer last.Close()
	if got, err := readAll(ctx, last, "f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("last reader: %v", err)
	}
	if after := mal.forwards(); after != before {
		t.Errorf("the distrusted member got %d more forwards", after-before)
	}
}

// A member that holds blocks but never answers a forward (it used to be
// forwarded to for ever, each reader waiting out its timeout): every
// silence is reported, and after server.BadBlockLimit the server stops
// forwarding to it.
func TestSilentPeerIsDistrusted(t *testing.T) {
	export := t.TempDir()
	const blocks = 12
	data := pattern(blocks*4096, 7)
	os.WriteFile(filepath.Join(export, "f"), data, 0o644)
	secret := []byte("a cluster secret of more than 128 bits")
	sm := obs.NewMetrics()
	addr := servertest.Serve(t, server.Config{Export: export, BlockSize: 4096, Policy: "directory", Metrics: sm,
		Secret: secret, Directory: directory.Config{ServerLast: true}})
	ctx := t.Context()
	sec := wire.MustSecurity(wire.SecurityConfig{Secret: secret})
	startMalicious(t, ctx, addr, sec, blocks, true)
	reader, err := agent.New(ctx, agent.Config{Server: addr, Secret: secret, Policy: "directory",
		ForwardTimeout: 200 * time.Millisecond, Name: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if got, err := readAll(ctx, reader, "f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reader: %d bytes, %v; want the file's bytes", len(got), err)
	}
	ss := scrape(t, sm)
	if n := ss.Sum("coopfs_directory_bad_blocks_reported_total", nil); n < server.BadBlockLimit {
		t.Errorf("the server got %v reports of silence, want at least %d", n, server.BadBlockLimit)
	}
	if n := ss.Sum("coopfs_directory_distrusted_total", nil); n != 1 {
		t.Errorf("distrusted clients = %v, want 1 (the silent holder)", n)
	}
}

type malicious struct {
	conn *wire.Conn
	n    chan struct{}
}

func (m *malicious) forwards() int { return len(m.n) }

// startMalicious starts the member; a silent one never answers a forward.
func startMalicious(t *testing.T, ctx context.Context, addr string, sec *wire.Security, blocks int, silent bool) *malicious {
	t.Helper()
	ln, _ := net.Listen("tcp", "127.0.0.1:0") // its peer listener: never used
	t.Cleanup(func() { ln.Close() })
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := wire.ClientHandshake(ctx, nc, sec, "", wire.Hello{Role: wire.RoleClient, Name: "mallory", Listen: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	me := hs.Welcome.ClientID
	m := &malicious{n: make(chan struct{}, 1000)}
	m.conn = wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Handler: wire.HandlerFunc(
		func(_ context.Context, _ *wire.Conn, msg wire.Msg) (wire.Msg, error) {
			fw, ok := msg.(*wire.Forward)
			if !ok {
				return nil, nil
			}
			m.n <- struct{}{}
			if silent {
				return nil, nil
			}
			go func() {
				pc, err := net.Dial("tcp", fw.RequesterAddr)
				if err != nil {
					return
				}
				phs, err := wire.ClientHandshake(ctx, pc, sec, "", wire.Hello{Role: wire.RolePeer, Name: "mallory"})
				if err != nil {
					pc.Close()
					return
				}
				c := wire.NewConn(phs.Conn, phs.Reader, wire.ConnConfig{})
				c.Send(&wire.PeerData{Token: fw.Token, File: fw.File, Index: fw.Index, Version: fw.Version,
					Holder: me, Data: bytes.Repeat([]byte("evil"), 1024)})
				time.Sleep(time.Second)
				c.Close()
			}()
			return nil, nil
		})})
	t.Cleanup(func() { m.conn.Close() })
	r, err := m.conn.Call(ctx, &wire.Open{Path: "f"})
	if err != nil {
		t.Fatal(err)
	}
	or := r.(*wire.OpenReply)
	for i := range blocks {
		if _, err := m.conn.Call(ctx, &wire.ReadBlock{Handle: or.Handle, File: or.Attr.Ino, Index: uint64(i), Version: or.Attr.Version}); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// The bytes between a client and the server, recorded by a TCP relay,
// carry no file content: the session is TLS.
func TestWireBetweenClientAndServerIsEncrypted(t *testing.T) {
	export := t.TempDir()
	content := bytes.Repeat([]byte("plainly readable file content; "), 4000)
	os.WriteFile(filepath.Join(export, "f"), content, 0o644)
	secret := []byte("a cluster secret of more than 128 bits")
	c := startServer(t, export, "127.0.0.1:0", secret, 4096)
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	var mu sync.Mutex
	var wire bytes.Buffer
	rec := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return wire.Write(p) })
	go func() {
		for {
			nc, err := rl.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", c.addr)
			if err != nil {
				nc.Close()
				return
			}
			go func() { io.Copy(io.MultiWriter(up, rec), nc); up.Close() }()
			go func() { io.Copy(io.MultiWriter(nc, rec), up); nc.Close() }()
		}
	}()
	a := newAgent(t, rl.Addr().String(), secret)
	got, err := readAll(context.Background(), a, "f")
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("read through the relay: %d bytes, %v", len(got), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if wire.Len() < len(content) {
		t.Fatalf("the relay saw %d bytes, less than the file", wire.Len())
	}
	for _, s := range [][]byte{[]byte("plainly readable"), secret} {
		if bytes.Contains(wire.Bytes(), s) {
			t.Errorf("the wire carries %q in the clear", s)
		}
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Under certificates, clients serve each other's misses: the holder checks
// that the requester's certificate names the address it dials, and the
// blocks pass the digest check.
func TestDirectoryPeersWithCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := wire.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	os.WriteFile(caFile, ca.Cert, 0o600)
	sec := func(name string) *wire.Security {
		p, err := wire.Issue(ca, name, []string{"127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		cf, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		os.WriteFile(cf, p.Cert, 0o600)
		os.WriteFile(kf, p.Key, 0o600)
		s, err := wire.NewSecurity(wire.SecurityConfig{CertFile: cf, KeyFile: kf, CAFile: caFile})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	export := t.TempDir()
	data := pattern(64<<10, 4)
	os.WriteFile(filepath.Join(export, "f"), data, 0o644)
	addr := servertest.Serve(t, server.Config{Export: export, BlockSize: 4096, Policy: "directory", Security: sec("server"),
		Directory: directory.Config{ServerLast: true}})
	ctx := t.Context()
	var ms []*obs.Metrics
	for _, name := range []string{"client1", "client2"} {
		m := obs.NewMetrics()
		a, err := agent.New(ctx, agent.Config{Server: addr, Security: sec(name), Policy: "directory", Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		got, err := readAll(ctx, a, "f")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes, %v", name, len(got), err)
		}
		ms = append(ms, m)
	}
	ss := scrape(t, ms[1])
	if hits := ss.Sum("coopfs_forwarded_peer_hits_total", nil); hits < 1 {
		t.Errorf("client2 got no block from client1 (peer hits %v, timeouts %v)", hits, ss.Sum("coopfs_forwarded_timeouts_total", nil))
	}
	if bad := ss.Sum("coopfs_forwarded_bad_blocks_total", nil); bad != 0 {
		t.Errorf("%v honest blocks failed the check", bad)
	}
}
