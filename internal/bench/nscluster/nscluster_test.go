package nscluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/cluster/clustertest"
	"github.com/coopfs/coopfs/internal/obs"
)

func TestMain(m *testing.M) {
	code := m.Run()
	clustertest.Cleanup()
	os.Exit(code)
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{Clients: 1}, {Export: "/x"}, {Export: "/x", Clients: 999}} {
		if err := c.validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestStartReadScrapeClose starts a server and two client hosts, reads a
// file through both mounts, scrapes the counters and checks that Close
// leaves no mount, namespace or directory.
func TestStartReadScrapeClose(t *testing.T) {
	if err := Unavailable(); err != nil {
		t.Skipf("the namespace testbed cannot run here: %v", err)
	}
	bin := clustertest.Binary(t)
	export := t.TempDir()
	if err := os.WriteFile(filepath.Join(export, "f"), []byte(strings.Repeat("x", 300000)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), Config{Binary: bin, Clients: 2, ServerLink: "100mbit", Export: export,
		ServerArgs: []string{"--policy", "directory"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Dir()
	for _, m := range c.Mounts {
		b, err := os.ReadFile(filepath.Join(m.Dir, "f"))
		if err != nil || len(b) != 300000 {
			t.Errorf("%s: read %d bytes: %v", m.Name, len(b), err)
		}
	}
	cs, err := c.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Clients) != 2 || cs.Server.Sum(obs.MetricBytesOut, nil) == 0 {
		t.Errorf("counters: %d clients, server sent %v", len(cs.Clients), cs.Server.Sum(obs.MetricBytesOut, nil))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if live, _ := cluster.MountsUnder(dir); len(live) > 0 {
		t.Errorf("mounts left: %v", live)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("run directory left: %s (%v)", dir, err)
	}
}

// TestServerRejects: a server that exits while starting (here on an
// unknown policy) is ErrServerStart with the server's own words.
func TestServerRejects(t *testing.T) {
	if err := Unavailable(); err != nil {
		t.Skipf("the namespace testbed cannot run here: %v", err)
	}
	bin := clustertest.Binary(t)
	_, err := Start(context.Background(), Config{Binary: bin, Clients: 1, Export: t.TempDir(),
		ServerArgs: []string{"--policy", "no-such-policy"}})
	if !errors.Is(err, ErrServerStart) || !strings.Contains(err.Error(), "no-such-policy") {
		t.Errorf("got %v, want ErrServerStart naming the policy", err)
	}
}
