package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/coopfs/coopfs/internal/obs"
	"github.com/prometheus/client_golang/prometheus"
)

// startMetrics serves m on a free loopback port until the test ends.
func startMetrics(t *testing.T, m *obs.Metrics) string {
	t.Helper()
	srv, err := m.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	})
	return srv.Addr()
}

func sampleMetrics() *obs.Metrics {
	m := obs.NewMetrics()
	for range 3 {
		m.CountRead(obs.LayerLocalMemory, 1<<20)
	}
	m.CountRead(obs.LayerPeer, 1<<20)
	m.CountIn(obs.KindPeer, 1<<20)
	m.CountOut(obs.KindServer, 2048)
	m.CountMessage("read", obs.DirOut)
	m.CountMessage("read", obs.DirOut)
	m.CountMessage("data", obs.DirIn)
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "coopfs_open_files", Help: "test"})
	g.Set(5)
	m.Register(g)
	return m
}

func TestStatsText(t *testing.T) {
	addr := startMetrics(t, sampleMetrics())
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"stats", addr}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	s := out.String()
	lines := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		lines[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, want := range []string{
		"coopfs stats for " + addr,
		"local_memory 3 75.0% 3.0 MiB",
		"local_disk 0 0.0% 0 B",
		"peer 1 25.0% 1.0 MiB",
		"server_disk 0 0.0% 0 B",
		"total 4 100.0% 4.0 MiB",
		"server 0 B 2.0 KiB",
		"peer 1.0 MiB 0 B",
		"read 0 2",
		"data 1 0",
		"coopfs_open_files 5",
	} {
		if !lines[want] {
			t.Errorf("output lacks a line %q:\n%s", want, s)
		}
	}
	// Groups come in order: reads, bytes, messages, other.
	i1, i2, i3, i4 := strings.Index(s, "Reads by layer"), strings.Index(s, "Bytes"), strings.Index(s, "Messages"), strings.Index(s, "Other coopfs metrics")
	if !(0 < i1 && i1 < i2 && i2 < i3 && i3 < i4) {
		t.Errorf("groups out of order:\n%s", s)
	}
	if strings.Contains(s, "go_goroutines") || strings.Contains(s, "process_") {
		t.Errorf("non-coopfs metrics printed:\n%s", s)
	}
}

func TestStatsJSON(t *testing.T) {
	addr := startMetrics(t, sampleMetrics())
	var out, errb bytes.Buffer
	if err := runStats(context.Background(), []string{"--json", addr}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var r statsReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if len(r.Reads) != 5 || r.Reads[0].Layer != obs.LayerLocalMemory || r.Reads[0].Reads != 3 || r.Reads[0].Percent != 75 {
		t.Errorf("reads_by_layer = %+v", r.Reads)
	}
	if len(r.Messages) != 2 || r.Messages[1] != (msgCount{Type: "read", Out: 2}) {
		t.Errorf("messages = %+v", r.Messages)
	}
	if len(r.Other) != 1 || r.Other[0].Name != "coopfs_open_files" || r.Other[0].Value != 5 {
		t.Errorf("other = %+v", r.Other)
	}
}

func TestStatsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"stats", addr}, &out, &errb)
	msg := errb.String()
	if code != 1 || strings.Count(msg, "\n") != 1 ||
		!strings.Contains(msg, "cannot reach coopfs metrics at "+addr) ||
		!strings.Contains(msg, "is the process running with --metrics "+addr+"?") {
		t.Fatalf("exit %d, stderr %q; want exit 1 and one clear line", code, msg)
	}
}

func TestStatsUsage(t *testing.T) {
	for _, args := range [][]string{{"stats"}, {"stats", "a:1", "b:2"}, {"stats", "--bogus", "a:1"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d; want 2 (usage)", args, code)
		}
		if !strings.Contains(errb.String(), "Usage: coopfs stats") {
			t.Errorf("%v: no usage in %q", args, errb.String())
		}
	}
}
