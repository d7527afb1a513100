package coop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/coopfs/coopfs/internal/obs"
)

// FaultConfig is the fault run: a concurrent copy under the directory
// policy during which one client's mount (a peer that serves others) is
// SIGKILLed.
type FaultConfig struct {
	Common
	Clients        int
	Victim         int     // 1-based client whose mount is killed
	KillAt         float64 // fraction of size / client link after the start
	Size           int64
	ForwardTimeout time.Duration
}

// FaultReport is the result of RunFault.
type FaultReport struct {
	Clients        int       `json:"clients"`
	Victim         string    `json:"victim"`
	KilledAfterS   float64   `json:"killed_after_s"`
	ForwardTimeout string    `json:"forward_timeout"`
	Size           int64     `json:"size"`
	Row            CopyRow   `json:"run"`
	SurvivorsOK    bool      `json:"survivors_ok"`
	ClientSeconds  []float64 `json:"client_elapsed_s"`
}

// RunFault runs the fault benchmark.
func RunFault(ctx context.Context, cfg FaultConfig) (*FaultReport, error) {
	if cfg.Clients < 2 || cfg.Victim < 1 || cfg.Victim > cfg.Clients {
		return nil, fmt.Errorf("fault: want --clients ≥ 2 and 1 ≤ --victim ≤ clients (got %d, %d)", cfg.Clients, cfg.Victim)
	}
	export, digest, err := cfg.dataset("big", cfg.Size)
	if err != nil {
		return nil, err
	}
	cl := linkMBps(cfg.ClientLink)
	if cl == 0 {
		cl = 100
	}
	kill := time.Duration(cfg.KillAt * float64(cfg.Size) / 1e6 / cl * float64(time.Second))
	ft := cfg.ForwardTimeout
	rep := &FaultReport{Clients: cfg.Clients, Victim: fmt.Sprintf("client%d", cfg.Victim),
		KilledAfterS: kill.Seconds(), Size: cfg.Size, ForwardTimeout: "5s (default)"}
	if ft > 0 {
		rep.ForwardTimeout = ft.String()
	}
	row, err := copyOnce(ctx, &cfg.Common, clusterConfig{
		Clients: cfg.Clients, Policy: "directory", ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink,
		ServerCache: serverCacheFor(cfg.Size), Export: export, ForwardTO: ft,
		Dir: filepath.Join(cfg.Dir, "fault"),
	}, digest, cfg.Victim-1, kill, 0)
	if err != nil {
		return nil, err
	}
	rep.Row = *row
	rep.SurvivorsOK = row.Verified
	for i, mb := range row.PerMBps {
		if i == cfg.Victim-1 || mb == 0 {
			rep.ClientSeconds = append(rep.ClientSeconds, 0)
			continue
		}
		rep.ClientSeconds = append(rep.ClientSeconds, float64(cfg.Size)/1e6/mb)
	}
	if !rep.SurvivorsOK {
		return rep, errors.New("fault: a surviving reader got wrong bytes or failed")
	}
	return rep, nil
}

// Table prints the survivors' outcome and the failure counters.
func (r *FaultReport) Table(w io.Writer) {
	s := r.Row.Stats
	fmt.Fprintf(w, "fault run: %d clients copy a %d MB file under directory; %s's mount SIGKILLed %.1f s in; forward timeout %s\n",
		r.Clients, r.Size/1e6, r.Victim, r.KilledAfterS, r.ForwardTimeout)
	t := newTab(w)
	fmt.Fprintln(t, "client\telapsed s\tMB/s\tpeer reads\tserver reads\tforwarded timeouts\tnacks\tforwards served")
	for i, c := range s.Clients {
		name := fmt.Sprintf("client%d", i+1)
		if c.Gone {
			fmt.Fprintf(t, "%s\tkilled\t\t\t\t\t\t\n", name)
			continue
		}
		fmt.Fprintf(t, "%s\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\n", name, at(r.ClientSeconds, i), at(r.Row.PerMBps, i),
			c.Reads[obs.LayerPeer], c.Reads[obs.LayerServerMemory]+c.Reads[obs.LayerServerDisk],
			c.Timeouts, c.Nacks, c.ForwardHits)
	}
	t.Flush()
	fmt.Fprintf(w, "server: forwards %.0f, forward misses %.0f, retries %.0f, pings %.0f, clients marked failed %.0f\n",
		s.Forwards, s.ForwardMisses, s.Retries, s.Pings, s.Failures)
	fmt.Fprintf(w, "survivors read correct bytes (SHA-256 = export's): %v\n", r.SurvivorsOK)
}

// Plots: none for the fault run.
func (r *FaultReport) Plots() []Plot { return nil }

func at(xs []float64, i int) float64 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}
