package demo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/cluster/clustertest"
	"github.com/coopfs/coopfs/internal/bench/nscluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	clustertest.Cleanup()
	os.Exit(code)
}

// demoDirs gives the test a temp dir of its own (TMPDIR, which the demo and
// the processes it starts inherit), so that demos or testbeds running beside
// it cannot be taken for its leftovers, and lists the run directories in it.
func demoDirs(t *testing.T) map[string]bool {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir())
	return runDirs()
}

// runDirs lists the run directories demos left in the temp dir.
func runDirs() map[string]bool {
	ms, _ := filepath.Glob(filepath.Join(os.TempDir(), "coopfs-demo-*"))
	out := map[string]bool{}
	for _, m := range ms {
		out[m] = true
	}
	return out
}

func scanChildren() []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	me := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == me && f[0] != "Z" {
			out = append(out, e.Name())
		}
	}
	return out
}

func alive(pid string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// checkClean asserts the demo left no process, mount or run directory.
func checkClean(t *testing.T, before map[string]bool) {
	t.Helper()
	if cs := scanChildren(); len(cs) > 0 {
		t.Errorf("child processes left: %v", cs)
	}
	for d := range runDirs() {
		if !before[d] {
			t.Errorf("run directory left: %s", d)
			if live, _ := cluster.MountsUnder(d); len(live) > 0 {
				t.Errorf("mounts left: %v", live)
			}
		}
	}
}

func TestDemoFUSE(t *testing.T) {
	clustertest.RequireFUSE(t)
	bin := clustertest.Binary(t)
	before := demoDirs(t)
	var progress bytes.Buffer
	r, err := Run(context.Background(), Config{Binary: bin, Clients: 2, Files: 2, FileSize: 3<<20 + 123, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode != ModeFUSE || !r.Verified() || len(r.PerClient) != 2 {
		t.Fatalf("report %+v", r)
	}
	for _, c := range r.PerClient {
		if c.Bytes != 2*(3<<20+123) {
			t.Errorf("%s read %d bytes", c.Name, c.Bytes)
		}
	}
	var reads float64
	for _, l := range r.ClientReads {
		reads += l.Reads
	}
	if reads == 0 || r.ServerBytesOut < 2*(3<<20) {
		t.Errorf("counters: client reads %v, server bytes out %v", r.ClientReads, r.ServerBytesOut)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 FUSE clients", "client1", "all clients", "ok", "Reads by layer", "Server sent"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	checkClean(t, before)
}

func TestDemoLibrary(t *testing.T) {
	bin := clustertest.Binary(t)
	before := demoDirs(t)
	var progress bytes.Buffer
	r, err := Run(context.Background(), Config{Binary: bin, Clients: 2, Files: 1, FileSize: 2 << 20, ForceLibrary: true, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode != ModeLibrary || !r.Verified() {
		t.Fatalf("report %+v", r)
	}
	var reads float64
	for _, l := range r.ClientReads {
		reads += l.Reads
	}
	if reads == 0 {
		t.Errorf("no client reads counted: %+v", r.ClientReads)
	}
	checkClean(t, before)
}

// TestDemoCancel interrupts a demo while its clients read (Ctrl-C) and
// checks that nothing is left behind.
func TestDemoCancel(t *testing.T) {
	clustertest.RequireFUSE(t)
	bin := clustertest.Binary(t)
	before := demoDirs(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Config{Binary: bin, Clients: 2, Files: 1, FileSize: 256 << 20}
	cfg.onReading = func() { time.AfterFunc(50*time.Millisecond, cancel) }
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg)
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("Run returned %v", err)
		if err == nil {
			t.Log("the demo finished before it was interrupted")
		} else if !errors.Is(err, context.Canceled) {
			t.Logf("interrupted demo: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("demo did not return 60s after cancel")
	}
	checkClean(t, before)
}

// netnsLeft lists the network namespaces this test process's testbeds
// left behind (their names start with "cfs<pid>-").
func netnsLeft() []string {
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "cfs"+strconv.Itoa(os.Getpid())+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestDemoHosts runs the testbed demo (clients as hosts, shaped links,
// policies side by side) on a small data set.
func TestDemoHosts(t *testing.T) {
	if err := nscluster.Unavailable(); err != nil {
		t.Skipf("the namespace testbed cannot run here: %v", err)
	}
	bin := clustertest.Binary(t)
	before := demoDirs(t)
	var progress bytes.Buffer
	res, err := RunAuto(context.Background(), Config{Binary: bin, Clients: 3, Files: 1, FileSize: 2<<20 + 77,
		ServerLink: "200mbit", ClientLink: "200mbit", Progress: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if res.Hosts == nil || res.Loopback != nil || res.Fallback != "" {
		t.Fatalf("not a testbed run: %+v", res)
	}
	h := res.Hosts
	if len(h.Runs) != 3 || !res.Verified() {
		t.Fatalf("runs %+v", h.Runs)
	}
	for _, p := range h.Runs {
		if p.Unavailable != "" {
			if p.Policy != "hints" || !strings.HasPrefix(p.Unavailable, "not available: ") {
				t.Errorf("%s: %s", p.Policy, p.Unavailable)
			}
			continue
		}
		if len(p.PerClient) != 3 || p.BytesRead() != 3*(2<<20+77) {
			t.Errorf("%s: read %d bytes: %+v", p.Policy, p.BytesRead(), p.PerClient)
		}
	}
	none, dir := h.run("none"), h.run("directory")
	if none == nil || dir == nil {
		t.Fatal("none or directory did not run")
	}
	// Under none the server sends every client every byte; under
	// directory it sends each block about once (no timing assertion).
	if none.ServerBytesOut < 3*(2<<20) || dir.ServerBytesOut > 2*(2<<20+77)+(1<<20) {
		t.Errorf("server sent %.0f bytes under none, %.0f under directory", none.ServerBytesOut, dir.ServerBytesOut)
	}
	var out bytes.Buffer
	if err := res.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 client hosts", "speed-up vs none", "server sent", "none", "directory", "hints", "ok"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if err := res.Plot(filepath.Join(t.TempDir(), "demo.png"), filepath.Join(t.TempDir(), "demo.svg")); err != nil {
		t.Error(err)
	}
	if !strings.Contains(progress.String(), "reading it at once") {
		t.Errorf("no progress shown:\n%s", progress.String())
	}
	checkClean(t, before)
	if ns := netnsLeft(); len(ns) > 0 {
		t.Errorf("network namespaces left: %v", ns)
	}
	t.Logf("\n%s", out.String())
}

// TestDemoHostsCancel interrupts the testbed demo while its clients read
// (Ctrl-C): no namespace, mount, process or directory is left.
func TestDemoHostsCancel(t *testing.T) {
	if err := nscluster.Unavailable(); err != nil {
		t.Skipf("the namespace testbed cannot run here: %v", err)
	}
	bin := clustertest.Binary(t)
	before := demoDirs(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Config{Binary: bin, Clients: 2, Files: 1, FileSize: 16 << 20, Policies: []string{"none"}, ServerLink: "50mbit"}
	cfg.onReading = func() { time.AfterFunc(300*time.Millisecond, cancel) }
	done := make(chan error, 1)
	go func() {
		_, err := RunAuto(ctx, cfg)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Log("the demo finished before it was interrupted")
		} else if !errors.Is(err, context.Canceled) {
			t.Errorf("interrupted demo: %v, want context.Canceled", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("demo did not return 90s after cancel")
	}
	checkClean(t, before)
	if ns := netnsLeft(); len(ns) > 0 {
		t.Errorf("network namespaces left: %v", ns)
	}
}

// TestDemoFallback: asked for loopback (as where the testbed cannot run),
// RunAuto runs the loopback demo and says why.
func TestDemoFallback(t *testing.T) {
	bin := clustertest.Binary(t)
	before := demoDirs(t)
	res, err := RunAuto(context.Background(), Config{Binary: bin, Clients: 2, Files: 1, FileSize: 1 << 20,
		Loopback: true, ForceLibrary: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hosts != nil || res.Loopback == nil || res.Fallback == "" || !res.Verified() {
		t.Fatalf("result %+v", res)
	}
	if res.Plot(filepath.Join(t.TempDir(), "x.png")) != nil {
		t.Error("a loopback run has nothing to plot and must not fail")
	}
	checkClean(t, before)
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{Clients: -1}, {Clients: 65}, {Files: -2}, {FileSize: -1}} {
		c.setDefaults()
		if err := c.validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	c := Config{}
	c.setDefaults()
	if err := c.validate(); err != nil || c.Clients != DefaultClients || c.FileSize != DefaultFileSize {
		t.Errorf("defaults %+v: %v", c, err)
	}
}
