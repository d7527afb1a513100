package study

import (
	"fmt"
	"strconv"
)

// Report turns the result into the study's rows, one table and plots per
// measure (each against the number of clients, one line per algorithm and
// pattern).
func (r *ScaleResult) Report() *Report {
	rep := &Report{Study: "scale"}
	c := r.Config
	for _, p := range r.Points {
		rep.Rows = append(rep.Rows, p.Metrics)
	}
	t := Table{Name: "scale", Title: "The coordinator at scale: server messages, directory memory, forward depth (hints: extra hops) against the clients",
		Header: []string{"pattern", "algorithm", "clients", "msgs/access", "msgs/client-s", "msgs/s", "clients/core", "peer%",
			"entries", "holders", "dir MB", "B/holder", "depth mean", "p99", "max", "waited%", "avg ms"}}
	for _, pat := range scalePatterns {
		for _, alg := range c.Algorithms {
			for _, n := range c.Clients {
				p, ok := r.find(alg, pat, n)
				if !ok {
					continue
				}
				f := p.Footprint
				mem, per, entries, holders := "-", "-", "-", "-"
				if f.Bytes() > 0 {
					mem, per = fmt.Sprintf("%.2f", float64(f.Bytes())/1e6), fmt.Sprintf("%.0f", f.BytesPerHolder())
					entries, holders = strconv.Itoa(f.Entries), strconv.FormatInt(f.Holders, 10)
				}
				t.Rows = append(t.Rows, []string{pat, alg, strconv.Itoa(n), fmt.Sprintf("%.3f", p.MsgsPerAccess),
					fmt.Sprintf("%.1f", p.MsgsPerClientSecond), fmt.Sprintf("%.0f", p.MsgsPerSecond), fmt.Sprintf("%.0f", p.ClientsPerServerCore),
					fmt.Sprintf("%.1f", 100*p.PeerFraction), entries, holders, mem, per,
					fmt.Sprintf("%.2f", p.Depth.Mean), strconv.Itoa(p.Depth.P99), strconv.Itoa(p.Depth.Max),
					fmt.Sprintf("%.1f", 100*ratio64(p.Depth.Waited, p.Depth.Reads)), fmt.Sprintf("%.3f", p.AvgAccessMs)})
			}
		}
	}
	rep.Tables = append(rep.Tables, t)

	line := func(name, title, ylabel string, dirOnly, logY bool, y func(ScalePoint) float64) Plot {
		pl := Plot{Name: name, Title: title, XLabel: "clients", YLabel: ylabel, LogX: true, LogY: logY}
		for _, pat := range scalePatterns {
			for _, alg := range c.Algorithms {
				s := Series{Label: alg + " " + pat}
				for _, n := range c.Clients {
					p, ok := r.find(alg, pat, n)
					if !ok || dirOnly && p.Footprint.Bytes() == 0 {
						continue
					}
					s.X = append(s.X, float64(n))
					s.Y = append(s.Y, y(p))
				}
				if len(s.X) > 0 {
					pl.Series = append(pl.Series, s)
				}
			}
		}
		return pl
	}
	rep.Plots = append(rep.Plots,
		line("msgs-per-access", "Server messages per access", "messages / access", false, false, func(p ScalePoint) float64 { return p.MsgsPerAccess }),
		line("msgs-per-client-s", fmt.Sprintf("Server messages per client-second (%g reads/s a client)", c.Rate), "messages / client-second", false, false,
			func(p ScalePoint) float64 { return p.MsgsPerClientSecond }),
		line("memory", "Directory memory", "MB", true, true, func(p ScalePoint) float64 { return float64(p.Footprint.Bytes()) / 1e6 }),
		line("depth-mean", "Forward depth, mean (directory: holders still waiting; hints: extra hops)", "1 + mean depth", false, true,
			func(p ScalePoint) float64 { return 1 + p.Depth.Mean }),
		line("depth-max", "Forward depth, maximum (directory: holders still waiting; hints: extra hops)", "1 + max depth", false, true,
			func(p ScalePoint) float64 { return 1 + float64(p.Depth.Max) }))
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("open loop: each client issues %g block reads a second (128 KiB blocks), starting at a uniformly random time within %v; the checkpoint is one file of %d blocks every client reads in order; the training set %d files of %d blocks, each client reading %d whole files picked Zipf(%g)",
			c.Rate, c.Stagger, c.CheckpointBlocks, c.Files, c.FileBlocks, c.Reads, c.Alpha),
		fmt.Sprintf("client caches %d blocks; the server's memory holds the data set once read from its disk; the cost model is the default (latencies and hops, no link queueing: contention=off)", c.CacheBlocks),
		"msgs/client-s: what a client reading at that rate costs the server (messages an access × the rate); msgs/s: the server's messages over the run's span of virtual time",
		"server messages: every message the server sends or receives (requests, replies and forwards, retries, discard notifications; hints: opens with their hints, fetches and their replies)",
		fmt.Sprintf("clients/core: 1 s / (%g µs a message × messages per client-second), the live server's CPU per message measured on this machine (docs/benchmarks-coop.md)", c.MessageCostUS),
		"depth (directory): for each read a peer served, how many holders in its chain were still waiting for the block (0: the holder had it); the simulator lets chains grow, the live agents cut them at the forward timeout",
		"depth (hints): the extra hops of each local miss (0: the first hint was right, or straight to the server)",
		"directory memory: directory.Footprint at the end of the run (slab, index, holder lists beyond 64 clients, client state, forward ring); the dense index carries the simulator's own words too")
	return rep
}
