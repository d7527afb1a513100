package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/wire"
)

// connectionsGauge exports the server's connected clients as
// coopfs_server_connections.
func connectionsGauge(srv *server.Server) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coopfs_server_connections",
		Help: "Clients (mounts and proxies) connected now."}, func() float64 { return float64(srv.Connections()) })
}

// serverReport is what `coopfs status --server` prints; --json prints it
// as is.
type serverReport struct {
	Server    string        `json:"server"`
	Reachable bool          `json:"reachable"`
	Error     string        `json:"error,omitempty"`
	Handshake time.Duration `json:"handshake_ns"`
	RTT       time.Duration `json:"rtt_ns"`
	Policy    string        `json:"policy"`
	BlockSize uint32        `json:"block_size"`
	TLS       string        `json:"tls"`
	FreeBytes uint64        `json:"export_free_bytes"`
	// From the server's /metrics, with --metrics.
	Clients      *float64 `json:"clients,omitempty"`
	MessagesPerS *float64 `json:"messages_per_second,omitempty"`
	BytesOutPerS *float64 `json:"bytes_out_per_second,omitempty"`
	Healthy      bool     `json:"healthy"`
}

// serverStatus dials the server as a client would (TLS and the secret),
// times the handshake and one StatFs round trip, and with metricsAddr reads
// its clients and its load (two scrapes a second apart).
func serverStatus(ctx context.Context, addr, metricsAddr string, secFlags *securityFlags, asJSON bool, stdout io.Writer) error {
	sec, err := secFlags.load()
	if err != nil {
		return err
	}
	r := serverReport{Server: addr, TLS: sec.Mode()}
	if metricsAddr != "" {
		if err := r.load(ctx, metricsAddr); err != nil {
			return err
		}
	}
	start := time.Now()
	hs, c, err := agent.Dial(ctx, agent.DialConfig{Addr: addr, Security: sec,
		Hello: wire.Hello{Role: wire.RoleClient, Name: "coopfs-status", BootID: uint64(time.Now().UnixNano())}})
	if err != nil {
		r.Error = err.Error()
	} else {
		defer c.Close()
		r.Handshake = time.Since(start)
		r.Policy, r.BlockSize = hs.Reply.Policy, hs.Reply.BlockSize
		start = time.Now()
		m, err := c.Call(ctx, &wire.StatFsReq{})
		if sr, ok := m.(*wire.StatFsReply); err == nil && ok {
			r.RTT, r.Reachable = time.Since(start), true
			r.FreeBytes = sr.StatFs.Bavail * uint64(sr.StatFs.Frsize)
		} else {
			r.Error = fmt.Sprintf("statfs: %v %v", err, m)
		}
	}
	r.Healthy = r.Reachable
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		r.writeText(stdout)
	}
	if !r.Healthy {
		return errUnhealthy
	}
	return nil
}

// load reads the clients and the message and byte rates from the server's
// metrics: two scrapes a second apart.
func (r *serverReport) load(ctx context.Context, addr string) error {
	a, err := obs.Fetch(ctx, addr)
	if err != nil {
		return fmt.Errorf("cannot reach the server's metrics at %s: %w", addr, err)
	}
	const gap = time.Second
	select {
	case <-time.After(gap):
	case <-ctx.Done():
		return ctx.Err()
	}
	b, err := obs.Fetch(ctx, addr)
	if err != nil {
		return fmt.Errorf("cannot reach the server's metrics at %s: %w", addr, err)
	}
	clients := b.Sum("coopfs_server_connections", nil)
	msgs := (b.Sum(obs.MetricMessages, nil) - a.Sum(obs.MetricMessages, nil)) / gap.Seconds()
	out := (b.Sum(obs.MetricBytesOut, nil) - a.Sum(obs.MetricBytesOut, nil)) / gap.Seconds()
	r.Clients, r.MessagesPerS, r.BytesOutPerS = &clients, &msgs, &out
	return nil
}

func (r serverReport) writeText(w io.Writer) {
	var b strings.Builder
	state := "healthy"
	if !r.Healthy {
		state = "NOT HEALTHY"
	}
	fmt.Fprintf(&b, "coopfs status of server %s: %s\n", r.Server, state)
	if r.Error != "" {
		fmt.Fprintf(&b, "  problem: %s\n", r.Error)
	}
	if !r.Reachable {
		io.WriteString(w, b.String())
		return
	}
	rows := [][]string{{"server", ""},
		{"  handshake", r.Handshake.Round(time.Microsecond).String()},
		{"  round trip", r.RTT.Round(time.Microsecond).String()},
		{"  policy", r.Policy},
		{"  block size", humanBytes(float64(r.BlockSize))},
		{"  tls", r.TLS},
		{"  export free", humanBytes(float64(r.FreeBytes))}}
	if r.Clients != nil {
		rows = append(rows, []string{"  clients", count(*r.Clients)},
			[]string{"  messages/s", fmt.Sprintf("%.0f", *r.MessagesPerS)},
			[]string{"  bytes out/s", humanBytes(*r.BytesOutPerS)})
	}
	writeTable(&b, rows)
	io.WriteString(w, b.String())
}
