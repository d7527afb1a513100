package obs

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// The layers a read can be served by, nearest first. The simulator reports
// its hit distribution under the same names.
const (
	LayerLocalMemory  = "local_memory"
	LayerLocalDisk    = "local_disk"
	LayerPeer         = "peer"
	LayerProxy        = "proxy" // a caching proxy between client and server, when configured
	LayerServerMemory = "server_memory"
	LayerServerDisk   = "server_disk"
)

// Layers returns every layer name, nearest first.
func Layers() []string {
	return []string{LayerLocalMemory, LayerLocalDisk, LayerPeer, LayerProxy, LayerServerMemory, LayerServerDisk}
}

// The kinds of process at the other end of a connection (label peer_kind of
// the byte counters).
const (
	KindServer = "server"
	KindPeer   = "peer"
	KindClient = "client"
)

// Message directions (label dir of the message counter).
const (
	DirIn  = "in"
	DirOut = "out"
)

// Metric names, all prefixed coopfs_.
const (
	MetricReads     = "coopfs_reads_total"      // label layer
	MetricReadBytes = "coopfs_read_bytes_total" // label layer
	MetricBytesIn   = "coopfs_bytes_in_total"   // label peer_kind
	MetricBytesOut  = "coopfs_bytes_out_total"  // label peer_kind
	MetricMessages  = "coopfs_messages_total"   // labels type, dir
	// MetricMessageBytes is the bytes of those messages (frames included),
	// so that a benchmark can tell control traffic from block data.
	MetricMessageBytes = "coopfs_message_bytes_total" // labels type, dir
)

// Metrics is one process's counters and the registry they live on. Each
// process (and each server or client a test starts in one process) makes its
// own; nothing is registered on prometheus's global default registry.
//
// The counter vectors are exported for callers with labels of their own.
// The Count* helpers are safe for concurrent use and cheap (~20 ns) for the
// known layers and peer kinds, whose counters are bound at construction;
// other label values take a label lookup (~90 ns).
type Metrics struct {
	reg *prometheus.Registry

	Reads     *prometheus.CounterVec // block reads by the layer that served them
	ReadBytes *prometheus.CounterVec // bytes of those reads, by layer
	BytesIn   *prometheus.CounterVec // bytes received, by peer_kind
	BytesOut  *prometheus.CounterVec // bytes sent, by peer_kind
	Messages  *prometheus.CounterVec // protocol messages, by type and dir
	MsgBytes  *prometheus.CounterVec // bytes of those messages, by type and dir

	// Counters bound at construction for the known label values, so the
	// hot paths skip the label lookup. Read-only after NewMetrics.
	layers map[string][2]prometheus.Counter // reads, read bytes
	kinds  map[string][2]prometheus.Counter // bytes in, bytes out
	// msgs caches the message counters by wire type and direction (0 in,
	// 1 out), bound on first use: a label lookup per message was a few
	// per cent of a metadata round trip's CPU.
	msgs [256][2]atomic.Pointer[msgCounters]
}

// NewMetrics returns a fresh set of counters on a new registry, with the Go
// runtime and process collectors registered too. The five core layers and
// the three peer kinds start at zero so that they always show up.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		Reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricReads, Help: "Block reads, by the cache layer that served them.",
		}, []string{"layer"}),
		ReadBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricReadBytes, Help: "Bytes read, by the cache layer that served them.",
		}, []string{"layer"}),
		BytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBytesIn, Help: "Bytes received, by the kind of process that sent them.",
		}, []string{"peer_kind"}),
		BytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBytesOut, Help: "Bytes sent, by the kind of process they went to.",
		}, []string{"peer_kind"}),
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricMessages, Help: "Protocol messages, by message type and direction (in, out).",
		}, []string{"type", "dir"}),
		MsgBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricMessageBytes, Help: "Bytes of protocol messages (frames included), by message type and direction (in, out).",
		}, []string{"type", "dir"}),
	}
	m.reg.MustRegister(m.Reads, m.ReadBytes, m.BytesIn, m.BytesOut, m.Messages, m.MsgBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.layers = map[string][2]prometheus.Counter{}
	for _, l := range []string{LayerLocalMemory, LayerLocalDisk, LayerPeer, LayerServerMemory, LayerServerDisk} {
		m.layers[l] = [2]prometheus.Counter{m.Reads.WithLabelValues(l), m.ReadBytes.WithLabelValues(l)}
	}
	m.kinds = map[string][2]prometheus.Counter{}
	for _, k := range []string{KindServer, KindPeer, KindClient} {
		m.kinds[k] = [2]prometheus.Counter{m.BytesIn.WithLabelValues(k), m.BytesOut.WithLabelValues(k)}
	}
	return m
}

// Registry returns the registry the counters live on, for gathering.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Registerer returns the registry as a Registerer, to hand to packages that
// register collectors of their own (their names should start with coopfs_).
func (m *Metrics) Registerer() prometheus.Registerer { return m.reg }

// Register registers more collectors on this process's registry.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// CountRead counts one read of n bytes served by layer.
func (m *Metrics) CountRead(layer string, n int) {
	c, ok := m.layers[layer]
	if !ok {
		c = [2]prometheus.Counter{m.Reads.WithLabelValues(layer), m.ReadBytes.WithLabelValues(layer)}
	}
	c[0].Inc()
	c[1].Add(float64(n))
}

// CountIn counts n bytes received from a process of the given kind.
func (m *Metrics) CountIn(kind string, n int) {
	if c, ok := m.kinds[kind]; ok {
		c[0].Add(float64(n))
		return
	}
	m.BytesIn.WithLabelValues(kind).Add(float64(n))
}

// CountOut counts n bytes sent to a process of the given kind.
func (m *Metrics) CountOut(kind string, n int) {
	if c, ok := m.kinds[kind]; ok {
		c[1].Add(float64(n))
		return
	}
	m.BytesOut.WithLabelValues(kind).Add(float64(n))
}

// CountMessage counts one message of type typ in direction dir (DirIn, DirOut).
func (m *Metrics) CountMessage(typ, dir string) { m.Messages.WithLabelValues(typ, dir).Inc() }

// msgCounters are the bound message and byte counters of one wire type
// and direction.
type msgCounters struct{ n, bytes prometheus.Counter }

// countTyped counts one message of wire type number t and n bytes, whose
// name typ gives only on the first count, through the cache of bound
// counters.
func (m *Metrics) countTyped(t uint8, typ fmt.Stringer, dir string, n int) {
	d := 0
	if dir != DirIn {
		d = 1
	}
	p := &m.msgs[t][d]
	c := p.Load()
	if c == nil {
		c = &msgCounters{m.Messages.WithLabelValues(typ.String(), dir), m.MsgBytes.WithLabelValues(typ.String(), dir)}
		p.Store(c)
	}
	c.n.Inc()
	c.bytes.Add(float64(n))
}

// CountMessageBytes counts one message of type typ and n bytes in direction
// dir: the message counter and the byte counter.
func (m *Metrics) CountMessageBytes(typ, dir string, n int) {
	m.Messages.WithLabelValues(typ, dir).Inc()
	m.MsgBytes.WithLabelValues(typ, dir).Add(float64(n))
}
