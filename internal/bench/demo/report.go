package demo

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/obs"
)

// Modes of a run.
const (
	ModeFUSE    = "FUSE"
	ModeLibrary = "client-library"
)

// Report is what a demo run measured.
type Report struct {
	Mode           string         `json:"mode"`
	Policy         string         `json:"policy"`
	FallbackReason string         `json:"fallback_reason,omitempty"`
	Clients        int            `json:"clients"`
	Files          int            `json:"files"`
	FileSize       int64          `json:"file_size"`
	Server         string         `json:"server"`
	Dir            string         `json:"dir"`
	LogDir         string         `json:"log_dir"`
	Elapsed        time.Duration  `json:"elapsed_ns"`
	PerClient      []ClientResult `json:"clients_results"`
	// Reads by layer, summed over the clients' counters.
	ClientReads []LayerReads `json:"client_reads"`
	// Reads the server served, by layer, and bytes it sent.
	ServerReads    []LayerReads `json:"server_reads"`
	ServerBytesOut float64      `json:"server_bytes_out"`
}

// ClientResult is one client's reads.
type ClientResult struct {
	Name       string        `json:"name"`
	Bytes      int64         `json:"bytes"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	Verified   bool          `json:"verified"`
	Mismatches []string      `json:"mismatches,omitempty"`
}

// LayerReads counts block reads served by one layer.
type LayerReads struct {
	Layer string  `json:"layer"`
	Reads float64 `json:"reads"`
	Bytes float64 `json:"bytes"`
}

// Verified reports whether every client read every byte right.
func (r *Report) Verified() bool {
	for _, c := range r.PerClient {
		if !c.Verified {
			return false
		}
	}
	return len(r.PerClient) > 0
}

// AggregateMBps is all bytes read by all clients over the wall time.
func (r *Report) AggregateMBps() float64 {
	var n int64
	for _, c := range r.PerClient {
		n += c.Bytes
	}
	return mbps(n, r.Elapsed)
}

func mbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds() / 1e6
}

// addCounters sums the processes' counters into the report.
func (r *Report) addCounters(cs []cluster.Counters) {
	var clients, server []obs.Samples
	for _, c := range cs {
		switch c.Role {
		case cluster.RoleServer:
			server = append(server, c.Samples)
			r.ServerBytesOut += c.Samples.Sum(obs.MetricBytesOut, nil)
		case cluster.RoleClient:
			clients = append(clients, c.Samples)
		}
	}
	r.ClientReads = byLayer(clients)
	r.ServerReads = byLayer(server)
}

func byLayer(ss []obs.Samples) []LayerReads {
	var out []LayerReads
	for _, l := range obs.Layers() {
		lr := LayerReads{Layer: l}
		for _, s := range ss {
			lr.Reads += s.Sum(obs.MetricReads, map[string]string{"layer": l})
			lr.Bytes += s.Sum(obs.MetricReadBytes, map[string]string{"layer": l})
		}
		if lr.Reads > 0 {
			out = append(out, lr)
		}
	}
	return out
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "coopfs demo: %d %s clients read the same %d files of %s at once from one server (%s, policy %s)\n",
		r.Clients, r.Mode, r.Files, mib(float64(r.FileSize)), r.Server, r.Policy)
	if r.FallbackReason != "" {
		fmt.Fprintf(&b, "(without FUSE: %s; clients are the client library in this process)\n", r.FallbackReason)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tread\ttime\tMB/s\tsha256\t")
	var total int64
	for _, c := range r.PerClient {
		ok := "ok"
		if !c.Verified {
			ok = "MISMATCH"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2fs\t%.0f\t%s\t\n", c.Name, mib(float64(c.Bytes)), c.Elapsed.Seconds(), mbps(c.Bytes, c.Elapsed), ok)
		total += c.Bytes
	}
	fmt.Fprintf(tw, "all clients\t%s\t%.2fs\t%.0f\t\t\n", mib(float64(total)), r.Elapsed.Seconds(), r.AggregateMBps())
	tw.Flush()
	for _, c := range r.PerClient {
		for _, m := range c.Mismatches {
			fmt.Fprintf(&b, "  %s: %s\n", c.Name, m)
		}
	}
	b.WriteString("\nReads by layer (block reads, summed over the clients' counters):\n")
	writeLayers(&b, r.ClientReads)
	b.WriteString("Reads the server served:\n")
	writeLayers(&b, r.ServerReads)
	fmt.Fprintf(&b, "Server sent %s to its clients (the clients read %s", mib(r.ServerBytesOut), mib(float64(total)))
	if total > 0 {
		fmt.Fprintf(&b, ": %.0f%% of it", 100*r.ServerBytesOut/float64(total))
	}
	b.WriteString(").\n")
	if r.Policy == "directory" {
		b.WriteString("Under the directory policy (balanced forwarding) the server forwards a miss to a client that\n" +
			"holds the block, and that client sends it directly: the peer reads did not cross the server's link.\n")
	}
	if r.LogDir != "" {
		fmt.Fprintf(&b, "Logs: %s\n", r.LogDir)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeLayers(b *strings.Builder, ls []LayerReads) {
	var total float64
	for _, l := range ls {
		total += l.Reads
	}
	if total == 0 {
		b.WriteString("  (none)\n")
		return
	}
	for _, l := range ls {
		fmt.Fprintf(b, "  %-14s %8.0f reads %5.1f%%  %s\n", l.Layer, l.Reads, 100*l.Reads/total, mib(l.Bytes))
	}
}

func mib(n float64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", n/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", n/(1<<20))
}
