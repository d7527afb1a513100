package coop

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// AndrewConfig is the no-sharing overhead run (seed 000 table 1): the
// Andrew-style phases through one client under none and directory.
type AndrewConfig struct {
	Common
	Repeats int // runs per policy, alternating which policy goes first
	Dirs    int // directories in the source tree
	Files   int // files per directory
}

// AndrewRun is one run's phase times.
type AndrewRun struct {
	Policy  string  `json:"policy"`
	Repeat  int     `json:"repeat"`
	Phases  []Phase `json:"phases"`
	TotalMS float64 `json:"total_ms"`
}

// AndrewReport is the result of RunAndrew.
type AndrewReport struct {
	Repeats    int         `json:"repeats"`
	Files      int         `json:"files"`
	TreeBytes  int64       `json:"tree_bytes"`
	ServerLink string      `json:"server_link"`
	ClientLink string      `json:"client_link"`
	Runs       []AndrewRun `json:"runs"`
	// Medians per policy and phase, in ms; "Total" is the sum of phases.
	Median map[string]map[string]float64 `json:"median_ms"`
	// Paired is, per phase, the median over repeats of directory/none − 1
	// within the same repeat (the two runs of a repeat are back to back,
	// so slow drifts of the shared machine cancel).
	Paired map[string]float64 `json:"paired_overhead"`
}

// paired computes Paired from the runs.
func (r *AndrewReport) paired() map[string]float64 {
	out := map[string]float64{}
	for _, ph := range andrewPhases {
		var xs []float64
		for i := 1; i <= r.Repeats; i++ {
			a, b := r.phaseMS("none", i, ph), r.phaseMS("directory", i, ph)
			if a > 0 && b > 0 {
				xs = append(xs, b/a-1)
			}
		}
		out[ph] = median(xs)
	}
	return out
}

func (r *AndrewReport) phaseMS(pol string, repeat int, ph string) float64 {
	for _, run := range r.Runs {
		if run.Policy != pol || run.Repeat != repeat {
			continue
		}
		if ph == "Total" {
			return run.TotalMS
		}
		for _, p := range run.Phases {
			if p.Name == ph {
				return p.MS
			}
		}
	}
	return 0
}

var andrewPhases = []string{"MakeDir", "Copy", "ScanDir", "ReadAll", "Make", "Total"}

// RunAndrew runs the phases Repeats times per policy, each on a fresh
// one-client cluster, and reports the medians.
func RunAndrew(ctx context.Context, cfg AndrewConfig) (*AndrewReport, error) {
	src := filepath.Join(cfg.Dir, "andrew-src")
	_ = os.RemoveAll(src)
	n, err := MakeSourceTree(src, cfg.Dirs, cfg.Files, 42)
	if err != nil {
		return nil, fmt.Errorf("andrew: source tree: %w", err)
	}
	export := filepath.Join(cfg.Dir, "andrew-export")
	if err := os.MkdirAll(export, 0o755); err != nil {
		return nil, err
	}
	rep := &AndrewReport{Repeats: cfg.Repeats, Files: cfg.Dirs * cfg.Files, TreeBytes: n,
		ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink}
	for i := range cfg.Repeats {
		pols := []string{"none", "directory"}
		if i%2 == 1 {
			slices.Reverse(pols)
		}
		for _, pol := range pols {
			run, err := andrewOnce(ctx, &cfg, src, export, pol, i)
			if err != nil {
				return rep, err
			}
			rep.Runs = append(rep.Runs, *run)
			cfg.progress("andrew %-9s run %d: %s total %.0f ms", pol, i+1, fmtPhases(run.Phases), run.TotalMS)
		}
	}
	rep.Median = map[string]map[string]float64{}
	for _, pol := range []string{"none", "directory"} {
		rep.Median[pol] = map[string]float64{}
		for _, ph := range andrewPhases {
			var xs []float64
			for _, r := range rep.Runs {
				if r.Policy != pol {
					continue
				}
				if ph == "Total" {
					xs = append(xs, r.TotalMS)
				}
				for _, p := range r.Phases {
					if p.Name == ph {
						xs = append(xs, p.MS)
					}
				}
			}
			rep.Median[pol][ph] = median(xs)
		}
	}
	rep.Paired = rep.paired()
	return rep, nil
}

func fmtPhases(ps []Phase) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("%s %.0f ms, ", p.Name, p.MS)
	}
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func andrewOnce(ctx context.Context, cfg *AndrewConfig, src, export, pol string, i int) (*AndrewRun, error) {
	c, err := startCluster(ctx, cfg.Exec, clusterConfig{Clients: 1, Policy: pol,
		ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink, Export: export,
		Dir: filepath.Join(cfg.Dir, fmt.Sprintf("andrew-%s-%d", pol, i+1))})
	if err != nil {
		return nil, err
	}
	defer c.close()
	name := fmt.Sprintf("run-%s-%d-%d", pol, i+1, time.Now().UnixNano())
	args := func(_ int, m *mount) []string {
		return []string{"--mode", "andrew", "--src", src, "--dst", filepath.Join(m.dir, name)}
	}
	res, _, err := c.measure(ctx, "andrew", nil, args, nil, nil)
	if err != nil {
		return nil, err
	}
	r := res[0]
	run := &AndrewRun{Policy: pol, Repeat: i + 1, Phases: r.Phases}
	for _, p := range r.Phases {
		run.TotalMS += p.MS
	}
	_ = os.RemoveAll(filepath.Join(export, name))
	return run, nil
}

// Table prints the median time per phase and policy and the overhead.
func (r *AndrewReport) Table(w io.Writer) {
	fmt.Fprintf(w, "Andrew-style run through one client: %d files (%d KB), medians of %d runs per policy, server link %s, client link %s\n",
		r.Files, r.TreeBytes/1000, r.Repeats, r.ServerLink, r.ClientLink)
	t := newTab(w)
	fmt.Fprintln(t, "policy\tMakeDir ms\tCopy ms\tScanDir ms\tReadAll ms\tMake ms\tTotal ms")
	for _, pol := range []string{"none", "directory"} {
		m := r.Median[pol]
		fmt.Fprintf(t, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\n", pol, m["MakeDir"], m["Copy"], m["ScanDir"], m["ReadAll"], m["Make"], m["Total"])
	}
	fmt.Fprint(t, "overhead")
	for _, ph := range andrewPhases {
		a, b := r.Median["none"][ph], r.Median["directory"][ph]
		if a > 0 {
			fmt.Fprintf(t, "\t%+.1f%%", 100*(b/a-1))
		} else {
			fmt.Fprint(t, "\t")
		}
	}
	fmt.Fprintln(t)
	fmt.Fprint(t, "paired overhead")
	for _, ph := range andrewPhases {
		fmt.Fprintf(t, "\t%+.1f%%", 100*r.paired()[ph])
	}
	fmt.Fprintln(t)
	t.Flush()
	fmt.Fprintln(w, "(overhead: of the medians; paired: median over repeats of directory/none − 1 within a repeat)")
}

// Plots: the median phase times side by side.
func (r *AndrewReport) Plots() []Plot {
	p := Plot{Name: "coop-andrew", Bars: true, Title: "Andrew-style phases through one client (medians)",
		YLabel: "time (ms)", Categories: andrewPhases[:5]}
	for _, pol := range []string{"none", "directory"} {
		s := Series{Label: pol}
		for _, ph := range andrewPhases[:5] {
			s.Y = append(s.Y, r.Median[pol][ph])
		}
		p.Series = append(p.Series, s)
	}
	return []Plot{p}
}
