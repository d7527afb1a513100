package obs

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, "warn")
	l.Info("quiet")
	l.Warn("loud", "k", 1)
	if s := buf.String(); strings.Contains(s, "quiet") || !strings.Contains(s, "level=WARN msg=loud k=1") {
		t.Fatalf("log output %q", s)
	}
	buf.Reset()
	NewLogger(&buf, "shouty").Debug("hidden")
	if s := buf.String(); !strings.Contains(s, "unknown log level") || strings.Contains(s, "hidden") {
		t.Fatalf("unknown level output %q", s)
	}
	for in, ok := range map[string]bool{"debug": true, "INFO": true, "warning": true, "error": true, "": true, "loud": false} {
		if _, err := ParseLevel(in); (err == nil) != ok {
			t.Errorf("ParseLevel(%q) = %v", in, err)
		}
	}
}

// scrape renders m's registry as text and parses it back.
func scrape(t *testing.T, m *Metrics) Samples {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	ss, err := Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func TestMetricsArePerProcess(t *testing.T) {
	a, b := NewMetrics(), NewMetrics() // two in one process must not collide
	a.CountRead(LayerPeer, 4096)
	a.CountRead(LayerPeer, 100)
	a.CountRead(LayerLocalMemory, 1)
	a.CountIn(KindServer, 10)
	a.CountOut(KindClient, 20)
	a.CountMessage("read", DirOut)
	a.CountMessage("read", DirOut)
	a.CountMessage("data", DirIn)
	a.CountRead(LayerProxy, 5) // not pre-bound: takes the label lookup path
	a.CountIn("other", 3)
	ss := scrape(t, a)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{MetricReads, map[string]string{"layer": LayerPeer}, 2},
		{MetricReads, map[string]string{"layer": LayerServerDisk}, 0}, // pre-created
		{MetricReads, nil, 4},
		{MetricReads, map[string]string{"layer": LayerProxy}, 1},
		{MetricReadBytes, map[string]string{"layer": LayerProxy}, 5},
		{MetricBytesIn, map[string]string{"peer_kind": "other"}, 3},
		{MetricReadBytes, map[string]string{"layer": LayerPeer}, 4196},
		{MetricBytesIn, map[string]string{"peer_kind": KindServer}, 10},
		{MetricBytesOut, map[string]string{"peer_kind": KindClient}, 20},
		{MetricMessages, map[string]string{"type": "read", "dir": DirOut}, 2},
		{MetricMessages, map[string]string{"dir": DirIn}, 1},
	} {
		if got := ss.Sum(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v; want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := ss.Get(MetricReads, map[string]string{"layer": LayerServerMemory}); !ok {
		t.Error("server_memory layer not pre-created")
	}
	if got := scrape(t, b).Sum(MetricReads, nil); got != 0 {
		t.Errorf("second Metrics saw %v reads of the first", got)
	}
	for _, s := range ss {
		if !strings.HasPrefix(s.Name, "coopfs_") && !strings.HasPrefix(s.Name, "go_") && !strings.HasPrefix(s.Name, "process_") {
			t.Errorf("unexpected metric %s", s.Name)
		}
	}
}

func TestRegisterOwnCollectors(t *testing.T) {
	m := NewMetrics()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "coopfs_test_gauge", Help: "test"})
	if err := m.Register(g); err != nil {
		t.Fatal(err)
	}
	g.Set(7)
	if err := m.Register(g); err == nil {
		t.Fatal("registering the same collector twice succeeded")
	}
	c, _ := mem.New(mem.Config{Capacity: 100})
	c.Put(block.ID{File: 1}, 1, make([]byte, 30))
	c.Get(block.ID{File: 1}, 1)
	c.Get(block.ID{File: 2}, 1)
	if err := m.Register(NewTierCollector("memory", c.Stats)); err != nil {
		t.Fatal(err)
	}
	ss := scrape(t, m)
	tier := map[string]string{"tier": "memory"}
	for name, want := range map[string]float64{
		"coopfs_test_gauge": 7, "coopfs_cache_entries": 1, "coopfs_cache_bytes": 30,
		"coopfs_cache_capacity_bytes": 100, "coopfs_cache_hits_total": 1,
		"coopfs_cache_misses_total": 1, "coopfs_cache_evictions_total": 0,
	} {
		match := tier
		if name == "coopfs_test_gauge" {
			match = nil
		}
		if s, ok := ss.Get(name, match); !ok || s.Value != want {
			t.Errorf("%s = %+v (found %v); want %v", name, s, ok, want)
		}
	}
}

func TestServeFetch(t *testing.T) {
	m := NewMetrics()
	m.CountRead(LayerServerMemory, 1)
	srv, err := m.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()

	ss, err := Fetch(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if got := ss.Sum(MetricReads, map[string]string{"layer": LayerServerMemory}); got != 1 {
		t.Fatalf("fetched reads = %v; want 1", got)
	}
	if s, _ := ss.Get(MetricReads, nil); s.Type != "counter" || s.Help == "" {
		t.Fatalf("sample lacks type or help: %+v", s)
	}
	if _, err := Fetch(ctx, "http://"+srv.Addr()+"/metrics"); err != nil {
		t.Fatalf("Fetch with a full URL: %v", err)
	}
	if _, err := Fetch(ctx, srv.Addr()+"/nope/"); err == nil {
		t.Fatal("Fetch of a wrong path succeeded")
	}

	// The port is taken: a second server fails at once, clearly.
	err = NewMetrics().Serve(ctx, srv.Addr())
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "port in use") {
		t.Fatalf("Serve on a used port: %v", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	if _, err := Fetch(context.Background(), srv.Addr()); err == nil {
		t.Fatal("Fetch after shutdown succeeded")
	}
}

func TestParseHistogramSummary(t *testing.T) {
	in := `# HELP coopfs_lat_seconds latency
# TYPE coopfs_lat_seconds histogram
coopfs_lat_seconds_bucket{op="read",le="0.1"} 3
coopfs_lat_seconds_bucket{op="read",le="+Inf"} 5
coopfs_lat_seconds_sum{op="read"} 1.5
coopfs_lat_seconds_count{op="read"} 5
# TYPE coopfs_q summary
coopfs_q{quantile="0.5"} 2
coopfs_q_sum 10
coopfs_q_count 4
# TYPE coopfs_u untyped
coopfs_u 9
`
	ss, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range ss {
		got = append(got, s.Name+s.LabelString()+"="+fmtFloat(s.Value))
	}
	want := []string{
		`coopfs_lat_seconds_bucket{le="+Inf",op="read"}=5`,
		`coopfs_lat_seconds_bucket{le="0.1",op="read"}=3`,
		`coopfs_lat_seconds_count{op="read"}=5`,
		`coopfs_lat_seconds_sum{op="read"}=1.5`,
		`coopfs_q{quantile="0.5"}=2`,
		`coopfs_q_count=4`,
		`coopfs_q_sum=10`,
		`coopfs_u=9`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("parsed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := Parse(strings.NewReader("coopfs_x{ 1\n")); err == nil {
		t.Fatal("Parse of garbage succeeded")
	}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func TestWireObserver(t *testing.T) {
	m := NewMetrics()
	o := WireObserver{M: m, Kind: KindPeer}
	o.Message(DirOut, 1, 100)
	o.Message(DirIn, 1, 30)
	o.Message(DirIn, 1, 20)
	ss := scrape(t, m)
	if in, out := ss.Sum(MetricBytesIn, map[string]string{"peer_kind": KindPeer}), ss.Sum(MetricBytesOut, map[string]string{"peer_kind": KindPeer}); in != 50 || out != 100 {
		t.Fatalf("bytes in %v out %v; want 50 and 100", in, out)
	}
	if got := ss.Sum(MetricMessages, map[string]string{"dir": DirIn}); got != 2 {
		t.Fatalf("messages in = %v; want 2", got)
	}
}

func BenchmarkCountRead(b *testing.B) {
	m := NewMetrics()
	for b.Loop() {
		m.CountRead(LayerLocalMemory, 4096)
	}
}

func BenchmarkWireObserver(b *testing.B) {
	o := WireObserver{M: NewMetrics(), Kind: KindServer}
	for b.Loop() {
		o.Message(DirIn, 1, 4096)
	}
}

func TestSamplesSumBy(t *testing.T) {
	in := `coopfs_messages_total{dir="out",kind="client",type="Lookup"} 3
coopfs_messages_total{dir="out",kind="peer",type="Lookup"} 2
coopfs_messages_total{dir="in",kind="client",type="Lookup"} 7
coopfs_messages_total{dir="out",kind="client",type="Open"} 1
coopfs_other_total{type="Lookup"} 9
`
	ss, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	got := ss.SumBy("coopfs_messages_total", "type", map[string]string{"dir": "out"})
	if len(got) != 2 || got["Lookup"] != 5 || got["Open"] != 1 {
		t.Fatalf("SumBy = %v, want Lookup 5, Open 1", got)
	}
}
