package main

import (
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// TestE2ECertificates: `coopfs ca init` and `coopfs ca issue` make the
// credentials; a server and a mount with certificates of the CA work
// together; a mount whose certificate comes from another CA, or that
// dials the server by a name its certificate does not carry, is refused
// with one clear line.
func TestE2ECertificates(t *testing.T) {
	needFUSE(t)
	ca, other, creds := testCAs(t, "server")
	srv := startServer(t, newExport(t), creds(ca, "server")...)
	m := startMount(t, srv.addr, creds(ca, "client1")...)
	mustWrite(t, m.path("f"), []byte("over TLS with certificates"))
	wantFile(t, "client with a certificate", m.path("f"), []byte("over TLS with certificates"))
	srv.waitStderr(t, "certificate=client1", 5*time.Second)

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"OtherCA", creds(other, "mallory"), []string{"refused our TLS handshake"}},
		{"WrongName", append(creds(ca, "client1"), "--tls-server-name", "not-the-server"), []string{"certificate is refused", "not-the-server"}},
		{"Secret", []string{"--secret-file", e2e.secret}, []string{"refused our TLS handshake"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newMountpoint(t)
			args := append([]string{"mount", "--server", srv.addr, "--reconnect-timeout", "2s"}, c.args...)
			p, code := runCoopfs(t, 20*time.Second, nil, append(args, dir)...)
			wantOneLineError(t, p, code, "coopfs mount:", c.want...)
			if e2eIsMounted(dir) {
				t.Errorf("%s is mounted", dir)
			}
		})
	}
	if srv.exited() {
		t.Fatalf("server exited; stderr:\n%s", srv.stderr.String())
	}
}

// TestE2ESecretCommand: `coopfs secret` writes a strong secret that serve
// and mount accept; a short secret is refused with a line naming the
// command.
func TestE2ESecretCommand(t *testing.T) {
	needFUSE(t)
	tmp := t.TempDir()
	s := filepath.Join(tmp, "secret")
	if p, code := runCoopfs(t, 10*time.Second, nil, "secret", s); code != 0 {
		t.Fatalf("coopfs secret: %d\n%s", code, p.stderr.String())
	}
	if p, code := runCoopfs(t, 10*time.Second, nil, "secret", s); code == 0 {
		t.Errorf("coopfs secret overwrote %s without --force", s)
	} else {
		wantOneLineError(t, p, code, "coopfs secret:", "--force")
	}
	short := filepath.Join(tmp, "short")
	mustWrite(t, short, []byte("hunter2\n"))
	p, code := runCoopfs(t, 10*time.Second, nil, "serve", "--export", newExport(t), "--listen", e2eFreeAddr(t), "--secret-file", short)
	wantOneLineError(t, p, code, "coopfs serve:", "128 bits", "coopfs secret")

	srv := startServer(t, newExport(t), "--secret-file", s)
	m := startMount(t, srv.addr, "--secret-file", s)
	mustWrite(t, m.path("f"), []byte("x"))
	wantFile(t, "client with the generated secret", m.path("f"), []byte("x"))
}

// TestE2ERelayRefused: a man in the middle that terminates TLS toward the
// mount and toward the server (it does not hold the secret) and relays the
// bytes in between: the mount is refused with one line, the server logs
// the failed authentication and keeps serving.
func TestE2ERelayRefused(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	ca, err := wire.NewCA("mallory")
	if err != nil {
		t.Fatal(err)
	}
	p, err := wire.Issue(ca, "mallory", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				up, err := tls.Dial("tcp", srv.addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
				if err != nil {
					return
				}
				defer up.Close()
				down := tls.Server(nc, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
				go io.Copy(up, down)
				io.Copy(down, up)
			}()
		}
	}()
	dir := newMountpoint(t)
	pr, code := runCoopfs(t, 20*time.Second, nil, "mount", "--server", ln.Addr().String(), "--reconnect-timeout", "2s", dir)
	wantOneLineError(t, pr, code, "coopfs mount:", "authentication failed")
	if e2eIsMounted(dir) {
		t.Errorf("%s is mounted through a relay", dir)
	}
	srv.waitStderr(t, "authentication failed", 5*time.Second)
	m := startMount(t, srv.addr)
	mustWrite(t, m.path("f"), []byte("direct"))
	wantFile(t, "client connected directly", m.path("f"), []byte("direct"))
}

// testCAs makes two CAs with `coopfs ca`: ca, with a certificate for
// 127.0.0.1 named after each of hosts and one for client1, and other, with
// one for mallory. creds(dir, name) are the flags that use dir's
// certificate name against ca.
func testCAs(t *testing.T, hosts ...string) (ca, other string, creds func(dir, name string) []string) {
	t.Helper()
	tmp := t.TempDir()
	ca, other = filepath.Join(tmp, "ca"), filepath.Join(tmp, "other")
	cmds := [][]string{{"ca", "init", "--dir", ca}}
	for _, h := range hosts {
		cmds = append(cmds, []string{"ca", "issue", "--dir", ca, "--host", "127.0.0.1", h})
	}
	cmds = append(cmds, []string{"ca", "issue", "--dir", ca, "client1"},
		[]string{"ca", "init", "--dir", other}, []string{"ca", "issue", "--dir", other, "mallory"})
	for _, args := range cmds {
		if p, code := runCoopfs(t, 20*time.Second, nil, args...); code != 0 {
			t.Fatalf("coopfs %s: exit %d\n%s", strings.Join(args, " "), code, p.stderr.String())
		}
	}
	creds = func(dir, name string) []string {
		return []string{"--tls-cert", filepath.Join(dir, name+".crt"), "--tls-key", filepath.Join(dir, name+".key"),
			"--tls-ca", filepath.Join(ca, "ca.crt")}
	}
	return ca, other, creds
}
