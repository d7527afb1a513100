package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// handshakePair runs both handshakes over loopback TCP, with the dialer
// reaching the listener through dial (direct, or via a relay).
func handshakePair(t *testing.T, srv, cli *Security, serverName string, via func(addr string) string) (server, client *Handshake, serr, cerr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		hs  *Handshake
		err error
	}
	sc := make(chan res, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			sc <- res{nil, err}
			return
		}
		hs, err := ServerHandshake(nc, srv, HelloReply{BlockSize: 4096, Policy: "none"},
			func(*Handshake) (Welcome, error) { return Welcome{ClientID: 1}, nil })
		if err != nil {
			nc.Close()
		}
		sc <- res{hs, err}
	}()
	addr := ln.Addr().String()
	if via != nil {
		addr = via(addr)
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	client, cerr = ClientHandshake(context.Background(), nc, cli, serverName, Hello{Role: RoleClient, Name: "c"})
	if cerr != nil {
		nc.Close()
	}
	s := <-sc
	t.Cleanup(func() {
		for _, h := range []*Handshake{s.hs, client} {
			if h != nil && h.Conn != nil {
				h.Conn.Close()
			}
		}
	})
	return s.hs, client, s.err, cerr
}

// mitm terminates TLS toward both ends with its own session keys and
// relays the bytes in between: what an attacker on the path who does not
// hold the secret can do at best.
func mitm(t *testing.T, target string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	own := withTLS("the attacker does not know it")
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				down := tls.Server(nc, own.serverTLS())
				upTLS := tls.Client(up, own.clientTLS(""))
				go io.Copy(upTLS, down)
				io.Copy(down, upTLS)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestRelayWithOwnTLSSessionsIsRefused(t *testing.T) {
	_, _, serr, cerr := handshakePair(t, withTLS("cluster secret 0123456789"), withTLS("cluster secret 0123456789"), "", func(addr string) string {
		return mitm(t, addr)
	})
	if !errors.Is(cerr, ErrAuth) {
		t.Errorf("dialer through a relay: %v, want ErrAuth", cerr)
	}
	if !errors.Is(serr, ErrAuth) {
		t.Errorf("listener behind a relay: %v, want ErrAuth", serr)
	}
}

func TestStrangerGetsNothing(t *testing.T) {
	srv := withTLS("cluster secret 0123456789")
	_, hs, serr, cerr := handshakePair(t, srv, withTLS("a guess"), "", nil)
	if !errors.Is(cerr, ErrAuth) || !errors.Is(serr, ErrAuth) || hs != nil {
		t.Errorf("stranger with a wrong secret: dialer %v, listener %v", cerr, serr)
	}
	// A plaintext dialer gets a clear refusal, never a session.
	_, _, serr, cerr = handshakePair(t, srv, plain(""), "", nil)
	if cerr == nil || !strings.Contains(cerr.Error(), "requires TLS") || serr == nil {
		t.Errorf("plaintext dialer to a TLS listener: dialer %v, listener %v", cerr, serr)
	}
	// A TLS dialer to a plaintext listener is told what to check.
	_, _, serr, cerr = handshakePair(t, plain(""), srv, "", nil)
	if !errors.Is(serr, ErrMode) || cerr == nil || !strings.Contains(cerr.Error(), "--insecure") {
		t.Errorf("TLS dialer to a plaintext listener: dialer %v, listener %v", cerr, serr)
	}
}

// certFiles writes a CA and certificates for the given names into dir and
// returns the Security of each name.
func certFiles(t *testing.T, dir string, ca PEMPair, names ...string) map[string]*Security {
	t.Helper()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	out := map[string]*Security{}
	for _, n := range names {
		p, err := Issue(ca, n, []string{"127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		cf, kf := filepath.Join(dir, n+".crt"), filepath.Join(dir, n+".key")
		os.WriteFile(cf, p.Cert, 0o600)
		os.WriteFile(kf, p.Key, 0o600)
		s, err := NewSecurity(SecurityConfig{CertFile: cf, KeyFile: kf, CAFile: caFile})
		if err != nil {
			t.Fatal(err)
		}
		out[n] = s
	}
	return out
}

func TestCertificates(t *testing.T) {
	ca, err := NewCA("test cluster")
	if err != nil {
		t.Fatal(err)
	}
	sec := certFiles(t, t.TempDir(), ca, "server.example", "client1")
	shs, chs, serr, cerr := handshakePair(t, sec["server.example"], sec["client1"], "server.example", nil)
	if serr != nil || cerr != nil {
		t.Fatalf("certificates of one CA: %v / %v", serr, cerr)
	}
	if shs.PeerCert != "client1" || chs.PeerCert != "server.example" {
		t.Errorf("peer names: server sees %q, client sees %q", shs.PeerCert, chs.PeerCert)
	}
	// The name is checked: a certificate for another name is refused.
	if _, _, _, cerr := handshakePair(t, sec["client1"], sec["client1"], "server.example", nil); cerr == nil {
		t.Error("a listener with another name's certificate was accepted")
	}
	// A certificate from another CA is refused on both sides.
	other, _ := NewCA("other cluster")
	strangers := certFiles(t, t.TempDir(), other, "server.example", "mallory")
	if _, _, serr, _ := handshakePair(t, sec["server.example"], strangers["mallory"], "server.example", nil); serr == nil {
		t.Error("a dialer with another CA's certificate was accepted")
	}
	if _, _, _, cerr := handshakePair(t, strangers["server.example"], sec["client1"], "server.example", nil); cerr == nil {
		t.Error("a listener with another CA's certificate was accepted")
	}
	// A dialer with only the secret mode's ephemeral certificate gets nothing.
	if _, _, serr, _ := handshakePair(t, sec["server.example"], withTLS("x"), "", nil); serr == nil {
		t.Error("a dialer without a certificate was accepted")
	}
}

// recorder is a TCP relay that keeps every byte it forwards.
type recorder struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu <- struct{}{}
	r.buf.Write(p)
	<-r.mu
	return len(p), nil
}

func TestWireCarriesNoPlaintext(t *testing.T) {
	rec := &recorder{mu: make(chan struct{}, 1)}
	secret := "cluster secret 0123456789"
	secret2 := withTLS(secret)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	relay := func(addr string) string {
		rl, _ := net.Listen("tcp", "127.0.0.1:0")
		t.Cleanup(func() { rl.Close() })
		go func() {
			nc, err := rl.Accept()
			if err != nil {
				return
			}
			up, _ := net.Dial("tcp", addr)
			go io.Copy(io.MultiWriter(up, rec), nc)
			io.Copy(io.MultiWriter(nc, rec), up)
			nc.Close()
			up.Close()
		}()
		return rl.Addr().String()
	}
	shs, chs, serr, cerr := handshakePair(t, secret2, secret2, "", relay)
	if serr != nil || cerr != nil {
		t.Fatal(serr, cerr)
	}
	content := bytes.Repeat([]byte("top secret file content "), 100)
	srv := NewConn(shs.Conn, shs.Reader, ConnConfig{Handler: HandlerFunc(func(ctx context.Context, c *Conn, m Msg) (Msg, error) {
		return &BlockReply{Data: content}, nil
	})})
	cli := NewConn(chs.Conn, chs.Reader, ConnConfig{})
	defer srv.Close()
	defer cli.Close()
	r, err := cli.Call(context.Background(), &ReadBlock{File: 1})
	if err != nil || !bytes.Equal(r.(*BlockReply).Data, content) {
		t.Fatalf("call: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	rec.mu <- struct{}{}
	wire := rec.buf.Bytes()
	<-rec.mu
	if len(wire) < len(content) {
		t.Fatalf("recorded %d bytes only", len(wire))
	}
	for _, s := range []string{"top secret", secret} {
		if bytes.Contains(wire, []byte(s)) {
			t.Errorf("the wire carries %q in the clear", s)
		}
	}
}

// FuzzHandshake feeds arbitrary bytes to a plaintext listener's handshake
// (the TLS layer has its own fuzzing upstream): it must fail cleanly,
// never panic or hang.
func FuzzHandshake(f *testing.F) {
	hello := &Hello{Version: ProtocolVersion, Role: RoleClient, Name: "x", Nonce: bytes.Repeat([]byte{1}, nonceSize)}
	head, _ := appendFrame(nil, hello, 0, 0)
	auth, _ := appendFrame(nil, &Auth{Proof: bytes.Repeat([]byte{2}, 32)}, 0, 0)
	f.Add(append(append([]byte{}, head...), auth...))
	f.Add(head)
	f.Add([]byte{0x16, 3, 1, 0, 5})
	sec := plain("fuzz secret")
	f.Fuzz(func(t *testing.T, b []byte) {
		ServerHandshake(&scripted{r: bytes.NewReader(b)}, sec, HelloReply{}, func(*Handshake) (Welcome, error) { return Welcome{}, nil })
		readFrame(bufio.NewReader(bytes.NewReader(b)), make([]byte, HeaderSize), handshakeLimits)
	})
}

// scripted is a loopback connection whose dialer sends fixed bytes and
// reads nothing.
type scripted struct {
	net.Conn // nil: only the methods below are used
	r        *bytes.Reader
}

func (s *scripted) Read(p []byte) (int, error)       { return s.r.Read(p) }
func (s *scripted) Write(p []byte) (int, error)      { return len(p), nil }
func (s *scripted) Close() error                     { return nil }
func (s *scripted) SetDeadline(time.Time) error      { return nil }
func (s *scripted) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (s *scripted) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (s *scripted) SetReadDeadline(time.Time) error  { return nil }
func (s *scripted) SetWriteDeadline(time.Time) error { return nil }
