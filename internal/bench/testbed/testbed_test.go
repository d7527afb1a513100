package testbed

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]uint64{
		"": 0, "0": 0, "none": 0, "100mbit": 100e6, "1gbit": 1e9, "1Gbit": 1e9,
		"12.5mbps": 100e6, "64kbit": 64e3, "1mibit": 1 << 20, "1000000": 1e6,
	} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"fast", "100mb/s", "-1mbit", "1kbit", "10tbit", "mbit"} {
		if got, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %d, want an error", in, got)
		}
	}
}

func TestTBFParams(t *testing.T) {
	// At 1 Gbit the bucket must hold >= 256 KB (MACHINE.md), and never
	// less than one 64 KiB GSO packet's worth of slack at low rates.
	if b := tbfFor(1e9).burst; b < 256<<10 {
		t.Errorf("burst at 1gbit = %d, want >= 256 KiB", b)
	}
	for _, r := range []uint64{1e6, 100e6, 1e9, 10e9} {
		p := tbfFor(r)
		if p.burst < minBurst || p.limit <= p.burst {
			t.Errorf("tbfFor(%d) = %+v: want burst >= %d and limit > burst", r, p, minBurst)
		}
	}
	got := strings.Join(tbfFor(100e6).args(), " ")
	if want := "root tbf rate 100000000bit burst 50000 limit 300000"; got != want {
		t.Errorf("args = %q, want %q", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{Prefix: "a b"}, {Prefix: "x"}, {Clients: -1}, {Clients: MaxClients + 1},
		{ServerLink: "fast"}, {ClientLink: "1 parsec"},
		{Subnet: netip.MustParsePrefix("8.8.8.0/24")},
		{Subnet: netip.MustParsePrefix("10.1.2.0/30"), Clients: 2},
		{Subnet: netip.MustParsePrefix("fd00::/64")},
	}
	for _, c := range bad {
		c.setDefaults()
		if err := c.validate(); err == nil {
			t.Errorf("validate(%+v) = nil, want an error", c)
		}
	}
	c := Config{Clients: 12, ServerLink: "100mbit", ClientLink: "1gbit"}
	c.setDefaults()
	if err := c.validate(); err != nil {
		t.Fatalf("validate(defaults) = %v", err)
	}
	if !defaultPrefixRE.MatchString(c.Prefix) {
		t.Errorf("default prefix %q does not match %v", c.Prefix, defaultPrefixRE)
	}
	if got := hostAddr(c.Subnet, 0).String(); got != "10.77.0.1" {
		t.Errorf("server address = %s, want 10.77.0.1", got)
	}
	if got := hostAddr(c.Subnet, 12).String(); got != "10.77.0.13" {
		t.Errorf("client12 address = %s, want 10.77.0.13", got)
	}
}

func TestCleanupRefusesBadPrefix(t *testing.T) {
	for _, p := range []string{"", "c", "../x", "a b"} {
		if err := Cleanup(p); err == nil {
			t.Errorf("Cleanup(%q) = nil, want an error", p)
		}
	}
}

func needRoot(t testing.TB) {
	t.Helper()
	if err := CheckPrereqs(); err != nil {
		t.Skipf("skipping: %v", err)
	}
}

// newTestbed builds a testbed whose work directory is a test temp dir and
// that is closed at the end of the test.
func newTestbed(t testing.TB, cfg Config) *Testbed {
	t.Helper()
	needRoot(t)
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = time.Second
	}
	tb, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tb
}

// snapshot is what the root namespace looks like, to compare after teardown.
func rootLinks(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 1 {
			names = append(names, f[1])
		}
	}
	return strings.Join(names, " ")
}

// assertClean fails unless nothing with the prefix remains: namespaces,
// marked processes, the given pids, mounts.
func assertClean(t testing.TB, prefix string, pids ...int) {
	t.Helper()
	if ns, err := listNamespaces(prefix); err != nil || len(ns) > 0 {
		t.Errorf("namespaces left: %v %v", ns, err)
	}
	if ps, err := testbedPids(prefix, nil); err != nil || len(ps) > 0 {
		t.Errorf("marked processes left: %v %v", ps, err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d still alive", pid)
		}
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), "/"+prefix) {
		t.Errorf("mounts with %q left:\n%s", prefix, mi)
	}
}

var kvRE = regexp.MustCompile(`(?m)^(\w+)=(.*)$`)

// logValues returns the key=value lines a helper printed to its log.
func logValues(t testing.TB, p *Proc) map[string]string {
	t.Helper()
	b, err := os.ReadFile(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range kvRE.FindAllStringSubmatch(string(b), -1) {
		for _, f := range strings.Fields(kv[0]) { // "bytes=1 secs=2 mbit=3"
			if k, v, ok := strings.Cut(f, "="); ok {
				m[k] = v
			}
		}
	}
	return m
}

// startServe runs the helper TCP server on host h and waits for its port
// from every other host.
func startServe(t testing.TB, tb *Testbed, h *Host, port uint16) *Proc {
	t.Helper()
	ctx := context.Background()
	argv, env := helperArgv(t, "serve", "0.0.0.0:"+strconv.Itoa(int(port)))
	p, err := h.Start(ctx, argv, env, "serve.log")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, o := range tb.Hosts() {
		if err := o.WaitTCP(wctx, h.AddrPort(port).String(), p); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// transfer runs the helper client on h against addr and returns its values.
func transfer(t testing.TB, h *Host, addr, op string, n int) map[string]string {
	t.Helper()
	argv, env := helperArgv(t, "client", addr, op, strconv.Itoa(n))
	p, err := h.Start(context.Background(), argv, env, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, p.LogTail(5))
	}
	return logValues(t, p)
}

func TestHostsReachEachOtherAndTeardownLeavesNothing(t *testing.T) {
	needRoot(t)
	before := rootLinks(t)
	tb := newTestbed(t, Config{Clients: 2})
	prefix, srv, cl := tb.Prefix(), tb.Server(), tb.Clients()
	if srv.Addr.String() != "10.77.0.1" || cl[1].Addr.String() != "10.77.0.3" || tb.Host("client2") != cl[1] {
		t.Fatalf("hosts: %v %v", srv, cl)
	}

	// Every client reaches the server, and client2 reaches client1, over
	// TCP, each from its own address; processes are not wrapped.
	serve := startServe(t, tb, srv, 7000)
	peer := startServe(t, tb, cl[0], 7001)
	if got := logValues(t, serve)["pid"]; got != strconv.Itoa(serve.Pid) {
		t.Errorf("serve printed pid %s, Proc.Pid = %d: the process is wrapped", got, serve.Pid)
	}
	for _, c := range cl {
		for _, op := range []string{"get", "put"} {
			v := transfer(t, c, srv.AddrPort(7000).String(), op, 1<<20)
			if !strings.HasPrefix(v["local"], c.Addr.String()+":") {
				t.Errorf("%s %s: local address %s, want %s", c.Name, op, v["local"], c.Addr)
			}
		}
	}
	transfer(t, cl[1], cl[0].AddrPort(7001).String(), "get", 1<<20)

	// DialContext runs in the host's namespace: its local address is the
	// host's, and loopback is the host's own.
	ctx := context.Background()
	c, err := cl[1].DialContext(ctx, "tcp", srv.AddrPort(7000).String())
	if err != nil {
		t.Fatal(err)
	}
	if la := c.LocalAddr().String(); !strings.HasPrefix(la, cl[1].Addr.String()+":") {
		t.Errorf("DialContext local address %s, want %s", la, cl[1].Addr)
	}
	c.Close()
	if c, err := srv.DialContext(ctx, "tcp", "127.0.0.1:7000"); err != nil {
		t.Errorf("server loopback: %v", err)
	} else {
		c.Close()
	}
	if c, err := cl[1].DialContext(ctx, "tcp", "127.0.0.1:7000"); err == nil {
		c.Close()
		t.Errorf("client2 reached port 7000 on its loopback: namespaces are not separate")
	}

	// Mounts are shared: a tmpfs mounted by a process in the server is read
	// by a process in client1; teardown detaches it.
	mnt := srv.Dir() + "/mnt"
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	argv, env := helperArgv(t, "mount", mnt)
	mp, err := srv.Start(ctx, argv, env, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := mp.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, mp.LogTail(5))
	}
	out, err := cl[0].Output(ctx, "cat", mnt+"/hello")
	if err != nil || string(out) != "hello from server" {
		t.Errorf("client1 read %q, %v through the server's mount, want %q", out, err, "hello from server")
	}

	// The bridge and a veth per host exist in the hub namespace.
	if out, err := exec.Command("ip", "-n", prefix+"hub", "-o", "link", "show", "type", "veth").Output(); err != nil || strings.Count(string(out), "master br0") != 3 {
		t.Errorf("hub veths: %v\n%s", err, out)
	}

	// A script ignoring SIGTERM with a background job: teardown kills the
	// whole group after StopGrace.
	sp, err := cl[1].Start(ctx, []string{"sh", "-c", "trap '' TERM; sleep 300 & echo trapped; sleep 300; wait"}, nil, "script.log")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); sp.LogTail(1) != "trapped" && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	inside, err := testbedPids(prefix, nil)
	if err != nil || len(inside) < 4 {
		t.Errorf("marked processes before teardown: %v %v, want serve, serve, sh, sleep, sleep", inside, err)
	}

	start := time.Now()
	if err := tb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("teardown took %v (StopGrace 1s: the script ignores SIGTERM)", time.Since(start))
	// Teardown stops gently first: the server got SIGTERM, not SIGKILL.
	if err := serve.Wait(); err == nil || !strings.Contains(err.Error(), "signal: terminated") {
		t.Errorf("serve ended with %v, want death by SIGTERM", err)
	}
	if sp.ExitCode() != -1 {
		t.Errorf("script exit code %d after teardown, want -1 (killed)", sp.ExitCode())
	}
	assertClean(t, prefix, append(inside, serve.Pid, peer.Pid, sp.Pid)...)
	if after := rootLinks(t); after != before {
		t.Errorf("root namespace links changed:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := srv.Start(ctx, []string{"true"}, nil, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

func TestShapedTransfer(t *testing.T) {
	tb := newTestbed(t, Config{Clients: 1, ServerLink: "100mbit", ClientLink: "100mbit"})
	for _, h := range []struct{ ns, dev string }{{tb.Server().NS, "eth0"}, {tb.Prefix() + "hub", "v-client1"}} {
		out, err := exec.Command("tc", "-n", h.ns, "qdisc", "show", "dev", h.dev).Output()
		if err != nil || !strings.Contains(string(out), "tbf") || !strings.Contains(string(out), "rate 100Mbit") {
			t.Errorf("%s %s qdisc: %v %s", h.ns, h.dev, err, out)
		}
	}
	startServe(t, tb, tb.Server(), 7000)
	const n = 4 << 20
	for _, op := range []string{"get", "put"} {
		v := transfer(t, tb.Clients()[0], tb.Server().AddrPort(7000).String(), op, n)
		t.Logf("100mbit tbf, %s %d MiB: %s s, goodput %s Mbit/s", op, n>>20, v["secs"], v["mbit"])
	}
}

func TestCancelTearsDown(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	tb, err := New(ctx, Config{Clients: 1, Dir: t.TempDir(), StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p, err := tb.Server().Start(context.Background(), []string{"sleep", "300"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-tb.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("testbed still up 15s after cancel")
	}
	if err := tb.Close(); err != nil {
		t.Errorf("Close after cancel: %v", err)
	}
	assertClean(t, tb.Prefix(), p.Pid)
}

func TestCleanupAfterAbandonedRun(t *testing.T) {
	tb := newTestbed(t, Config{Clients: 1})
	argv, env := helperArgv(t, "sleep")
	p, err := tb.Clients()[0].Start(context.Background(), argv, env, "")
	if err != nil {
		t.Fatal(err)
	}
	// Cleanup on a live testbed behaves as for a crashed run's leftovers.
	if err := Cleanup(tb.Prefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("process %d of the testbed still running 10s after Cleanup", p.Pid)
	}
	assertClean(t, tb.Prefix(), p.Pid)
	if _, err := New(context.Background(), Config{Prefix: tb.Prefix(), Dir: t.TempDir()}); err != nil {
		t.Errorf("New with a cleaned-up prefix: %v", err)
	} else {
		_ = Cleanup(tb.Prefix())
	}
}

func TestTwoTestbedsAreSeparate(t *testing.T) {
	tb := newTestbed(t, Config{})
	if _, err := New(context.Background(), Config{Prefix: tb.Prefix(), Dir: t.TempDir()}); err == nil {
		t.Fatal("second New with the same prefix succeeded")
	}
	// A second run with the same subnet is a separate network: its client
	// does not reach the first run's server.
	tb2 := newTestbed(t, Config{Clients: 1})
	startServe(t, tb, tb.Server(), 7000)
	if c, err := tb2.Clients()[0].DialContext(context.Background(), "tcp", tb.Server().AddrPort(7000).String()); err == nil {
		c.Close()
		t.Error("the second testbed's client reached the first testbed's server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := tb.Server().WaitTCP(ctx, "127.0.0.1:1"); err == nil {
		t.Error("WaitTCP to a port nobody listens on returned nil")
	} else {
		t.Logf("WaitTCP: %v", err)
	}
}

// TestOwnerExit runs a testbed owner process and ends it in every way a
// driver can end: signal with signal.NotifyContext, signal with
// HandleSignals, panic, and SIGKILL (leftovers then go with CleanupStale).
func TestOwnerExit(t *testing.T) {
	needRoot(t)
	for _, mode := range []string{"notify", "handle", "panic", "kill"} {
		t.Run(mode, func(t *testing.T) {
			argv, env := helperArgv(t, "owner", mode)
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			defer func() {
				if t.Failed() {
					t.Logf("owner stderr:\n%s", stderr.String())
				}
			}()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			v := map[string]string{}
			sc := bufio.NewScanner(out)
			for sc.Scan() && sc.Text() != "ready" {
				if k, val, ok := strings.Cut(sc.Text(), "="); ok {
					v[k] = val
				}
			}
			prefix := v["prefix"]
			if prefix == "" {
				_ = cmd.Wait()
				t.Fatal("owner did not come up")
			}
			defer os.RemoveAll(v["dir"])
			defer Cleanup(prefix) // in case the test fails half-way
			sleeper, _ := strconv.Atoi(v["sleeper"])
			switch mode {
			case "notify", "handle":
				_ = cmd.Process.Signal(syscall.SIGINT)
			case "kill":
				_ = cmd.Process.Kill()
			}
			go io.Copy(io.Discard, out)
			err = cmd.Wait()
			t.Logf("owner exited: %v", err)
			if mode == "kill" {
				// The kernel kills the owner's children (Pdeathsig).
				if left := waitGone([]int{sleeper}, 5*time.Second); len(left) > 0 {
					t.Errorf("sleeper %d alive after its owner's death", sleeper)
				}
				if left, _ := listNamespaces(prefix); len(left) == 0 {
					t.Error("no namespaces left after SIGKILL: expected leftovers for CleanupStale")
				}
				if err := CleanupStale(); err != nil {
					t.Fatal(err)
				}
			}
			waitGone([]int{sleeper}, 5*time.Second)
			assertClean(t, prefix, sleeper)
		})
	}
}

// TestSetupInterrupted cancels New part-way through setup: whatever it had
// made is gone when it returns.
func TestSetupInterrupted(t *testing.T) {
	needRoot(t)
	for _, d := range []time.Duration{0, 10 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		prefix := DefaultPrefix()
		tb, err := New(ctx, Config{Prefix: prefix, Clients: 4, ServerLink: "1gbit", ClientLink: "100mbit", Dir: t.TempDir()})
		cancel()
		if err == nil { // setup won the race; the cancelled ctx tears it down
			<-tb.Done()
			if err := tb.Close(); err != nil {
				t.Error(err)
			}
		} else {
			t.Logf("deadline %v: %v", d, err)
		}
		assertClean(t, prefix)
	}
}

func TestLogsAndExitStatus(t *testing.T) {
	tb := newTestbed(t, Config{})
	ctx := context.Background()
	var procs []*Proc
	for _, script := range []string{"echo one", "echo two; echo err >&2; exit 3"} {
		p, err := tb.Server().Start(ctx, []string{"sh", "-c", script}, []string{"X=1"}, "same.log")
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Wait()
		procs = append(procs, p)
	}
	if procs[0].Log == procs[1].Log || !strings.HasSuffix(procs[1].Log, "same.2.log") {
		t.Errorf("logs %q and %q: want the second renamed, not overwritten", procs[0].Log, procs[1].Log)
	}
	if got := procs[1].LogTail(2); got != "two\nerr" {
		t.Errorf("second log ends %q, want %q", got, "two\nerr")
	}
	if got := procs[0].LogTail(1); got != "one" {
		t.Errorf("first log ends %q, want %q", got, "one")
	}
	if err := procs[0].Wait(); err != nil || procs[0].ExitCode() != 0 {
		t.Errorf("first: %v, exit code %d", err, procs[0].ExitCode())
	}
	if err := procs[1].Wait(); err == nil || !strings.Contains(err.Error(), procs[1].Log) || procs[1].ExitCode() != 3 {
		t.Errorf("second: %v, exit code %d; want exit 3 and the log path in the error", err, procs[1].ExitCode())
	}
	out, err := tb.Server().Output(ctx, "sh", "-c", `echo "$COOPFS_TESTBED_HOST $COOPFS_TESTBED_ADDR"`)
	if err != nil || string(out) != "server 10.77.0.1\n" {
		t.Errorf("Output = %q, %v", out, err)
	}
}
