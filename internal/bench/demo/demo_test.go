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
)

func TestMain(m *testing.M) {
	code := m.Run()
	clustertest.Cleanup()
	os.Exit(code)
}

// demoDirs lists the run directories demos left in the temp dir.
func demoDirs(t *testing.T) map[string]bool {
	t.Helper()
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
	for d := range demoDirs(t) {
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
