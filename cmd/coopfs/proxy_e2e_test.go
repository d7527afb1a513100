package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// e2eProxy is a running `coopfs proxy`.
type e2eProxy struct {
	*e2eProc
	addr    string // where clients connect
	metrics string // its /metrics
}

// startProxy starts a proxy in front of upstream on a free port (with
// /metrics) and waits until it accepts clients.
func startProxy(t *testing.T, upstream string, extra ...string) *e2eProxy {
	t.Helper()
	p := &e2eProxy{addr: e2eFreeAddr(t), metrics: e2eFreeAddr(t)}
	args := append([]string{"proxy", "--upstream", upstream, "--listen", p.addr, "--metrics", p.metrics}, extra...)
	p.e2eProc = startProc(t, "proxy "+p.addr, args...)
	t.Cleanup(func() {
		if !p.stop(5 * time.Second) {
			t.Errorf("%s did not stop on SIGTERM within 5s; killed", p.name)
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.name, p.stderr.String())
		}
	})
	p.waitStarted(t, "msg=proxying", 15*time.Second)
	return p
}

// readWant reads name and fails unless it holds want, within 30s.
func readWant(t *testing.T, path string, want []byte) {
	t.Helper()
	var got []byte
	err := within(t, 30*time.Second, "read "+path, func() (err error) {
		got, err = os.ReadFile(path)
		return err
	})
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %s: %d bytes, err %v; want the %d bytes expected", path, len(got), err, len(want))
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := within(t, 30*time.Second, "write "+path, func() error { return os.WriteFile(path, data, 0o644) }); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// TestE2EProxyCascade: client → LAN proxy → WAN proxy → server, real
// processes on loopback. A client behind the proxies reads and writes; a
// second client behind the LAN proxy reads the same file from the proxy
// (counted as the proxy layer by it and by the proxy), without the server
// sending it again; close-to-open holds between a client behind the
// proxies and a client direct to the server, both ways.
func TestE2EProxyCascade(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	data := make([]byte, 3<<20+777)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(export, "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	srvMetrics := e2eFreeAddr(t)
	srv := startServer(t, export, "--metrics", srvMetrics)
	wan := startProxy(t, srv.addr, "--name", "wan", "--disk-cache", filepath.Join(t.TempDir(), "wan"), "--disk-cache-size", "64MiB", "--disk-banks", "4", "--disk-assoc", "4")
	lan := startProxy(t, wan.addr, "--name", "lan")
	aMetrics, cMetrics := e2eFreeAddr(t), e2eFreeAddr(t)
	a := startMount(t, lan.addr, "--metrics", aMetrics)
	b := startMount(t, srv.addr) // direct to the server

	readWant(t, a.path("data"), data)
	if got := scrapeReadBytes(t, aMetrics); serverBytes(got) != float64(len(data)) {
		t.Fatalf("first client behind the proxies: %v; want the file from the server's layers", got)
	}
	before := serverBytes(scrapeReadBytes(t, srvMetrics))
	c := startMount(t, lan.addr, "--metrics", cMetrics)
	readWant(t, c.path("data"), data)
	if got := scrapeReadBytes(t, cMetrics); got["proxy"] != float64(len(data)) || serverBytes(got) != 0 {
		t.Fatalf("second client behind the LAN proxy: %v; want all %d bytes from the proxy layer", got, len(data))
	}
	if after := serverBytes(scrapeReadBytes(t, srvMetrics)); after != before {
		t.Fatalf("the server sent %v more bytes for a block the proxies held", after-before)
	}
	if got := scrapeReadBytes(t, lan.metrics); got["proxy"] != float64(len(data)) {
		t.Fatalf("LAN proxy: %v; want its hits (%d bytes) counted as the proxy layer", got, len(data))
	}

	// Writes through the proxies reach the server (b sees them at open);
	// b's change is seen behind the proxies at the next open.
	out := make([]byte, 2<<20+5)
	rand.Read(out)
	writeFile(t, a.path("out"), out)
	readWant(t, b.path("out"), out)
	readWant(t, c.path("out"), out)
	for i, content := range [][]byte{[]byte("changed by the direct client\n"), bytes.Repeat([]byte("second change "), 100000)} {
		writeFile(t, b.path("data"), content)
		readWant(t, a.path("data"), content)
		readWant(t, c.path("data"), content)
		back := append(bytes.Clone(content), byte('0'+i))
		writeFile(t, c.path("data"), back)
		readWant(t, b.path("data"), back)
		readWant(t, a.path("data"), back)
	}
	// Directories, renames and attributes pass through too.
	if err := os.Mkdir(a.path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(a.path("out"), a.path("dir", "moved")); err != nil {
		t.Fatal(err)
	}
	readWant(t, b.path("dir", "moved"), out)
	if ents, err := os.ReadDir(c.path("dir")); err != nil || len(ents) != 1 || ents[0].Name() != "moved" {
		t.Fatalf("listing through the proxies: %v, %v", ents, err)
	}
}

// TestE2EProxyWarmRestart: a proxy restarted on its disk cache serves the
// blocks it held to a new client without fetching any file data from the
// server (the client's open revalidates the version through it); a file
// changed meanwhile is fetched afresh.
func TestE2EProxyWarmRestart(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	data := make([]byte, 5<<20+99)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(export, "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(export, "other"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srvMetrics := e2eFreeAddr(t)
	srv := startServer(t, export, "--metrics", srvMetrics)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	flags := []string{"--disk-cache", cacheDir, "--disk-cache-size", "64MiB", "--disk-banks", "4", "--disk-assoc", "4"}

	p1 := startProxy(t, srv.addr, flags...)
	m1 := startMount(t, p1.addr)
	readWant(t, m1.path("data"), data)
	readWant(t, m1.path("other"), []byte("old\n"))
	m1.cleanup(t)
	p1.stop(5 * time.Second)
	if err := os.WriteFile(filepath.Join(export, "other"), []byte("new, longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	before := serverBytes(scrapeReadBytes(t, srvMetrics))
	p2 := startProxy(t, srv.addr, flags...)
	m2Metrics := e2eFreeAddr(t)
	m2 := startMount(t, p2.addr, "--metrics", m2Metrics)
	readWant(t, m2.path("data"), data)
	if after := serverBytes(scrapeReadBytes(t, srvMetrics)); after != before {
		t.Fatalf("the server sent %v bytes to a proxy restarted with a warm disk cache; want none", after-before)
	}
	if got := scrapeReadBytes(t, m2Metrics); got["proxy"] != float64(len(data)) {
		t.Fatalf("client of the restarted proxy: %v; want all %d bytes from the proxy", got, len(data))
	}
	readWant(t, m2.path("other"), []byte("new, longer\n"))
	if after := serverBytes(scrapeReadBytes(t, srvMetrics)); after != before+float64(len("new, longer\n")) {
		t.Fatalf("the changed file: the server sent %v bytes; want its new content fetched", after-before)
	}
}

// TestE2EProxyUnreachable: a proxy whose upstream does not answer fails at
// start with one clear line; a running proxy whose upstream goes away gives
// its clients EIO (or ETIMEDOUT) within their reconnect timeout, no hang;
// a client that dies mid-request leaves the proxy serving the others; an
// upstream that comes back serves the same mount through the same proxy.
func TestE2EProxyUnreachable(t *testing.T) {
	needFUSE(t)
	p := startProc(t, "proxy to nowhere", "proxy", "--upstream", e2eFreeAddr(t), "--listen", e2eFreeAddr(t), "--reconnect-timeout", "1s")
	wantOneLineError(t, p, p.mustExit(t, 20*time.Second), "coopfs proxy:", "upstream unreachable", "--upstream")

	export := t.TempDir()
	if err := os.WriteFile(filepath.Join(export, "f"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, export)
	px := startProxy(t, srv.addr)
	dying := startMount(t, px.addr)
	m := startMount(t, px.addr, "--reconnect-timeout", "2s")
	readWant(t, m.path("f"), []byte("hello\n"))
	// A client killed while its read is in flight.
	go os.ReadFile(dying.path("f"))
	dying.cmd.Process.Kill()
	<-dying.done
	syscall.Unmount(dying.dir, syscall.MNT_DETACH) // its kernel mount outlives the process
	readWant(t, m.path("f"), []byte("hello\n"))

	srv.stop(5 * time.Second)
	// Until the mount has seen its connection end it answers from what its
	// callbacks cover (a name absent from a listing it holds: ENOENT), as
	// any callback holder does (TestE2EServerGoneLonger).
	m.waitStderr(t, "lost the connection to the server", 10*time.Second)
	err := within(t, 60*time.Second, "read with the upstream gone", func() error {
		_, err := os.ReadFile(m.path("g"))
		return err
	})
	if !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("read with the upstream gone: %v; want EIO or ETIMEDOUT", err)
	}
	if px.exited() {
		t.Fatalf("the proxy exited when its upstream went away; stderr:\n%s", px.stderr.String())
	}
	// The upstream comes back: the same mount, through the same proxy,
	// works again (its next request reconnects, the proxy dials afresh).
	startServerAt(t, srv.addr, export)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(m.path("f"))
		if err == nil && string(got) == "hello\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read after the upstream came back: %q, %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestE2EProxyCertificates: in certificate mode the proxy shows its own
// certificate on both sides: clients verify it as they verify a server,
// the upstream sees the proxy's name; a client of another CA is refused.
func TestE2EProxyCertificates(t *testing.T) {
	needFUSE(t)
	ca, other, creds := testCAs(t, "server", "lanproxy")
	srv := startServer(t, newExport(t), creds(ca, "server")...)
	px := startProxy(t, srv.addr, creds(ca, "lanproxy")...)
	m := startMount(t, px.addr, creds(ca, "client1")...)
	writeFile(t, m.path("f"), []byte("through a proxy with certificates"))
	readWant(t, filepath.Join(srv.export, "f"), []byte("through a proxy with certificates"))
	px.waitStderr(t, "certificate=client1", 5*time.Second)
	srv.waitStderr(t, "certificate=lanproxy", 5*time.Second)

	bad := startProc(t, "mount of another CA", append(append([]string{"mount", "--server", px.addr, "--reconnect-timeout", "1s"}, creds(other, "mallory")...), newMountpoint(t))...)
	code := bad.mustExit(t, 30*time.Second)
	if code == 0 || e2eIsMounted(bad.cmd.Args[len(bad.cmd.Args)-1]) {
		t.Fatalf("a client of another CA mounted through the proxy; stderr:\n%s", bad.stderr.String())
	}
}

// TestE2EProxyBadFlags: flags that cannot work are refused with one line
// before anything connects.
func TestE2EProxyBadFlags(t *testing.T) {
	needBinary(t)
	for _, c := range []struct {
		args   []string
		prefix string
		want   []string
	}{
		{[]string{"--write-policy", "write-back"}, "coopfs proxy:", []string{"write-back needs a disk cache", "--disk-cache"}},
		{[]string{"--write-policy", "sometimes"}, "invalid value", []string{"unknown write policy", "read-only, write-through"}},
		{[]string{"--disk-banks", "4"}, "coopfs proxy:", []string{"--disk-banks", "without --disk-cache"}},
	} {
		args := append([]string{"proxy", "--upstream", e2eFreeAddr(t), "--listen", e2eFreeAddr(t)}, c.args...)
		p := startProc(t, "proxy "+strings.Join(c.args, " "), args...)
		wantOneLineError(t, p, p.mustExit(t, 20*time.Second), c.prefix, c.want...)
	}
}

// TestE2EProxyWriteBackRecall: a write-back mount behind a proxy holds a
// write delegation at the server through the proxy; a client direct to
// the server, and another behind the same proxy, open the file: the
// recall reaches the writer through the proxy, which writes the file back
// through it, and both readers see the data.
func TestE2EProxyWriteBackRecall(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--recall-timeout", "10s")
	px := startProxy(t, srv.addr)
	a := startMount(t, px.addr, "--name", "A", "--write-policy", "write-back", "--write-back-delay", "1h",
		"--disk-cache", filepath.Join(t.TempDir(), "cache"), "--disk-cache-size", "64MiB", "--disk-banks", "4", "--disk-assoc", "4")
	direct := startMount(t, srv.addr, "--name", "direct")
	behind := startMount(t, px.addr, "--name", "behind")
	data := patterned(2<<20+99, 7)
	writeFile(t, a.path("f"), data)
	if got, _ := exportFile(t, srv, "f"); len(got) != 0 {
		t.Fatalf("the export has %d bytes of f before any recall", len(got))
	}
	readWant(t, direct.path("f"), data)
	wantExport(t, srv, "f", data)
	more := patterned(3<<20, 8)
	writeFile(t, a.path("f"), more)
	readWant(t, behind.path("f"), more)
	wantExport(t, srv, "f", more)
}
