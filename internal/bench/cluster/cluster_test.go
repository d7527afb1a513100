package cluster

import (
	"bytes"
	"context"
	"github.com/coopfs/coopfs/internal/bench/cluster/clustertest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	clustertest.Cleanup()
	os.Exit(code)
}

func coopfsBinary(t *testing.T) string {
	t.Helper()
	clustertest.RequireFUSE(t)
	return clustertest.Binary(t)
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// checkGone asserts that the cluster left no process, mount or directory.
func checkGone(t *testing.T, c *Cluster, pids []int) {
	t.Helper()
	for _, pid := range pids {
		// Reaped by Wait, so a live pid would be a stray process.
		if alive(pid) {
			t.Errorf("process %d still running after Close", pid)
		}
	}
	if live, err := MountsUnder(c.Dir()); err != nil || len(live) > 0 {
		t.Errorf("mounts left: %v %v", live, err)
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		t.Errorf("run directory %s still there: %v", c.Dir(), err)
	}
}

func pidsOf(c *Cluster) []int {
	var pids []int
	for _, p := range append([]*Proc{c.Server}, c.Clients...) {
		pids = append(pids, p.Pid)
	}
	return pids
}

func TestStartReadClose(t *testing.T) {
	bin := coopfsBinary(t)
	export := t.TempDir()
	want := bytes.Repeat([]byte("coopfs "), 100000)
	if err := os.WriteFile(filepath.Join(export, "f"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), Config{Binary: bin, Export: export, Clients: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Clients) != 2 {
		t.Fatalf("%d clients", len(c.Clients))
	}
	for _, mnt := range c.Mountpoints() {
		got, err := os.ReadFile(filepath.Join(mnt, "f"))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read through %s: %d bytes, %v", mnt, len(got), err)
		}
	}
	cs, err := c.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 || cs[0].Role != RoleServer || cs[1].Name != "client1" {
		t.Fatalf("counters of %v", cs)
	}
	for _, pc := range cs[1:] {
		if n := pc.Samples.Sum("coopfs_read_bytes_total", nil); n < float64(len(want)) {
			t.Errorf("%s counted %v bytes read, want >= %d", pc.Name, n, len(want))
		}
	}
	pids := pidsOf(c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, c, pids)
	if err := c.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
}

// TestCancelTearsDown: ending the context (Ctrl-C) tears the cluster down
// while a file is held open in a mount.
func TestCancelTearsDown(t *testing.T) {
	bin := coopfsBinary(t)
	export := t.TempDir()
	if err := os.WriteFile(filepath.Join(export, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Start(ctx, Config{Binary: bin, Export: export, Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(c.Mountpoints()[0], "f")) // keeps the mount busy
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pids := pidsOf(c)
	cancel()
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range append([]*Proc{c.Server}, c.Clients...) {
		select {
		case <-p.Done():
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%s still running 30s after cancel", p.Name)
		}
	}
	if err := c.Close(); err != nil { // waits for the teardown started by cancel
		t.Fatal(err)
	}
	checkGone(t, c, pids)
}

// TestStartFailureShowsLog: a server that cannot start is reported with its
// log, and nothing is left behind.
func TestStartFailureShowsLog(t *testing.T) {
	bin := coopfsBinary(t)
	dir := t.TempDir()
	_, err := Start(context.Background(), Config{Binary: bin, Export: dir, Clients: 1,
		ServerArgs: []string{"--block-size", "3KiB"}, Dir: filepath.Join(dir, "run")})
	if err == nil {
		t.Fatal("started with a bad block size")
	}
	if !strings.Contains(err.Error(), "server.log") {
		t.Errorf("error does not show the log: %v", err)
	}
	if live, _ := MountsUnder(dir); len(live) > 0 {
		t.Errorf("mounts left: %v", live)
	}
}

func TestIsUnder(t *testing.T) {
	for _, c := range []struct {
		p, d string
		want bool
	}{
		{"/a/b/c", "/a/b", true}, {"/a/b", "/a/b", false}, {"/a/bc", "/a/b", false}, {"/a", "/a/b", false},
	} {
		if got := isUnder(c.p, c.d); got != c.want {
			t.Errorf("isUnder(%q, %q) = %v", c.p, c.d, got)
		}
	}
}
