package coop

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/coopfs/coopfs/internal/bench/testbed"
	"github.com/coopfs/coopfs/internal/bench/workload"
	"github.com/coopfs/coopfs/internal/obs"
)

// Common is what every benchmark needs.
type Common struct {
	Exec       Exec
	Dir        string // run directory: export, testbed hosts, logs
	ServerLink string // tc rate of the server's link
	ClientLink string // tc rate of each client's link
	Progress   io.Writer
}

func (c *Common) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "[%s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// linkMBps is a tc rate in MB/s of goodput (1448/1514 of the rate).
func linkMBps(rate string) float64 {
	r, err := testbed.ParseRate(rate)
	if err != nil || r == 0 {
		return 0
	}
	return float64(r) / 8 / 1e6 * 1448 / 1514
}

// dataset writes the benchmark file into the export (reused when it is
// already there with the right size) and returns its digest.
func (c *Common) dataset(name string, size int64) (string, string, error) {
	export := filepath.Join(c.Dir, "export")
	if err := os.MkdirAll(export, 0o755); err != nil {
		return "", "", err
	}
	path := filepath.Join(export, name)
	c.progress("writing %s (%d MB)", path, size/1e6)
	d, err := workload.WriteFile(path, size, uint64(size), nil)
	if err != nil {
		return "", "", err
	}
	return export, d.String(), nil
}

// CopyConfig is the concurrent copy benchmark (seed 000 figure 5).
type CopyConfig struct {
	Common
	Clients   []int    // client counts, e.g. 1,2,4,8,12
	Policies  []string // none, directory
	Size      int64    // bytes of the file
	BlockSize string
	ReadAhead int
	// Stagger delays client i's start by i × Stagger (0: all at once, the
	// seed's benchmark); for diagnosing lock-step effects.
	Stagger time.Duration
}

// CopyRow is one (policy, N) run.
type CopyRow struct {
	Policy   string    `json:"policy"`
	Clients  int       `json:"clients"`
	Bytes    int64     `json:"bytes"`
	WallS    float64   `json:"wall_s"`         // first start to last end
	AggMBps  float64   `json:"aggregate_mb_s"` // bytes of all / wall
	MeanMBps float64   `json:"mean_client_mb_s"`
	PerMBps  []float64 `json:"client_mb_s"`
	Verified bool      `json:"verified"`
	Stats    Stats     `json:"stats"`
	// PerClient is each client's time to first and last byte and its
	// progress (time to full fan-out).
	PerClient []ClientTimes `json:"per_client,omitempty"`
}

// CopyReport is the result of RunCopy.
type CopyReport struct {
	Config      CopyConfig `json:"-"`
	ServerLink  string     `json:"server_link"`
	ClientLink  string     `json:"client_link"`
	ServerMBps  float64    `json:"server_link_mb_s"`
	ClientMBps  float64    `json:"client_link_mb_s"`
	Size        int64      `json:"size"`
	BlockSize   string     `json:"block_size"`
	Rows        []CopyRow  `json:"rows"`
	StartedAt   time.Time  `json:"started_at"`
	ElapsedSecs float64    `json:"elapsed_s"`
}

// RunCopy runs the concurrent copy for every N and policy (interleaved, so
// the two policies of one N run side by side).
func RunCopy(ctx context.Context, cfg CopyConfig) (*CopyReport, error) {
	rep := &CopyReport{Config: cfg, ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink,
		ServerMBps: linkMBps(cfg.ServerLink), ClientMBps: linkMBps(cfg.ClientLink),
		Size: cfg.Size, BlockSize: cfg.BlockSize, StartedAt: time.Now()}
	export, digest, err := cfg.dataset("big", cfg.Size)
	if err != nil {
		return nil, err
	}
	for _, n := range cfg.Clients {
		for _, pol := range cfg.Policies {
			row, err := copyOnce(ctx, &cfg.Common, clusterConfig{
				Clients: n, Policy: pol, ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink,
				BlockSize: cfg.BlockSize, ReadAhead: cfg.ReadAhead,
				ServerCache: serverCacheFor(cfg.Size), Export: export,
				Dir: filepath.Join(cfg.Dir, fmt.Sprintf("copy-%s-%d", pol, n)),
			}, digest, -1, 0, cfg.Stagger)
			if err != nil {
				return rep, fmt.Errorf("copy %s N=%d: %w", pol, n, err)
			}
			rep.Rows = append(rep.Rows, *row)
			cfg.progress("copy %-9s N=%-2d aggregate %6.1f MB/s, mean client %5.1f MB/s, %s", pol, n, row.AggMBps, row.MeanMBps, copyLayers(row))
		}
	}
	rep.ElapsedSecs = time.Since(rep.StartedAt).Seconds()
	return rep, nil
}

// serverCacheFor sizes the server's cache to hold the whole file.
func serverCacheFor(size int64) string {
	mib := max(size>>20+64, 256)
	return strconv.FormatInt(mib, 10) + "MiB"
}

func copyLayers(r *CopyRow) string {
	s := r.Stats
	return fmt.Sprintf("reads: peer %.0f server_memory %.0f server_disk %.0f; timeouts %.0f nacks %.0f waits %.0f; cpu %.0f%%",
		s.ReadsBy(obs.LayerPeer), s.ReadsBy(obs.LayerServerMemory), s.ReadsBy(obs.LayerServerDisk),
		s.Total(func(c *ClientStats) float64 { return c.Timeouts }),
		s.Total(func(c *ClientStats) float64 { return c.Nacks }),
		s.Total(func(c *ClientStats) float64 { return c.ForwardWaits }), 100*s.MachineCPUBusy)
}

// copyOnce starts a cluster, preloads the file into the server's memory,
// runs N readers at once and tears down. With victim ≥ 0 the victim's mount
// is SIGKILLed killAfter into the run (the fault benchmark).
func copyOnce(ctx context.Context, cm *Common, cc clusterConfig, digest string, victim int, killAfter, stagger time.Duration) (*CopyRow, error) {
	cm.progress("copy %s N=%d: starting testbed", cc.Policy, cc.Clients)
	c, err := startCluster(ctx, cm.Exec, cc)
	if err != nil {
		return nil, err
	}
	defer c.close()
	if err := c.warm(ctx, []string{"big"}); err != nil {
		return nil, err
	}
	startAt := time.Now().Add(500 * time.Millisecond)
	args := func(i int, m *mount) []string {
		return []string{"--mode", "copy", "--file", filepath.Join(m.dir, "big"), "--digest", digest,
			"--start-at", strconv.FormatInt(startAt.Add(time.Duration(i)*stagger).UnixNano(), 10)}
	}
	var during func()
	mayFail := map[int]bool{}
	if victim >= 0 {
		mayFail[victim] = true
		during = func() {
			select {
			case <-time.After(time.Until(startAt) + killAfter):
			case <-ctx.Done():
				return
			}
			cm.progress("fault: SIGKILL the mount of %s", c.mounts[victim].host.Name)
			_ = c.mounts[victim].proc.Signal(os.Kill)
		}
	}
	res, st, err := c.measure(ctx, "copy", nil, args, mayFail, during)
	if err != nil {
		return nil, err
	}
	row := &CopyRow{Policy: cc.Policy, Clients: cc.Clients, Stats: st, Verified: true, PerClient: clientTimes(res)}
	var first, last int64
	var n int
	for i, r := range res {
		if r == nil {
			if !mayFail[i] {
				row.Verified = false
			}
			row.PerMBps = append(row.PerMBps, 0)
			continue
		}
		row.Verified = row.Verified && r.Verified
		row.Bytes += r.Bytes
		if first == 0 || r.StartNS < first {
			first = r.StartNS
		}
		last = max(last, r.EndNS)
		mbps := float64(r.Bytes) / r.Elapsed().Seconds() / 1e6
		row.PerMBps = append(row.PerMBps, mbps)
		row.MeanMBps += mbps
		n++
	}
	if n > 0 {
		row.MeanMBps /= float64(n)
		row.WallS = float64(last-first) / 1e9
		row.AggMBps = float64(row.Bytes) / row.WallS / 1e6
	}
	return row, nil
}
