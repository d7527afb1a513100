package study

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/coopfs/coopfs/internal/sim"
	"github.com/coopfs/coopfs/internal/sim/classic"
	"github.com/coopfs/coopfs/internal/sim/dirsim"
	"github.com/coopfs/coopfs/internal/sim/hintsim"
	"github.com/coopfs/coopfs/internal/sim/nasd"
	"github.com/coopfs/coopfs/internal/sim/wholesim"
)

// Factory builds an algorithm for p.
type Factory func(p sim.Params) (sim.Algorithm, error)

// Algo is a registered algorithm: a name, a constructor and preset options
// (a variant of an algorithm is the same constructor with other options).
type Algo struct {
	Name    string
	Summary string
	New     Factory
	// Options are set in Params.Options before New is called; they
	// override the user's options of the same key (they define the variant).
	Options map[string]string
}

// Algorithms returns the registered algorithms. Owners of other packages add
// their lines here (additive edits only).
func Algorithms() []Algo {
	return []Algo{
		{Name: "baseline", Summary: "local LRU caches, server LRU cache, disk (no cooperation)",
			New: func(p sim.Params) (sim.Algorithm, error) { return classic.NewBaseline(p) }},
		{Name: "nchance", Summary: "N-chance forwarding with the xFS refinement (seed 002 3.1)",
			New: func(p sim.Params) (sim.Algorithm, error) { return classic.NewNChance(p) }},
		{Name: "gms", Summary: "Global Memory Service: manager copy counts, epochs, weights (seed 002 3.2)",
			New: func(p sim.Params) (sim.Algorithm, error) { return classic.NewGMS(p) }},
		{Name: "globallru", Summary: "ideal: replace the globally least recently used block (seed 002 3.3.2)",
			New: func(p sim.Params) (sim.Algorithm, error) { return classic.NewGlobalLRU(p) }},
		{Name: "optimal", Summary: "ideal: Belady over the client memories, with future knowledge (seed 002 3.3.1)",
			New: func(p sim.Params) (sim.Algorithm, error) { return classic.NewOptimal(p) }},
		// Hint-based (seed 002 chapter 4) and its server-memory variants.
		{Name: hintsim.Name, Summary: "hint-based: master copies, hints on open, best-guess replacement, discard cache (seed 002 ch. 4)",
			New: func(p sim.Params) (sim.Algorithm, error) { return hintsim.New(p) }},
		{Name: "hints-disk", Summary: "hint-based with server memory as a traditional disk cache (seed 002 table 5.7)",
			New: func(p sim.Params) (sim.Algorithm, error) { return hintsim.New(p) }, Options: map[string]string{"server_memory": "disk"}},
		{Name: "hints-coop", Summary: "hint-based with server memory as part of the cooperative cache (seed 002 table 5.7)",
			New: func(p sim.Params) (sim.Algorithm, error) { return hintsim.New(p) }, Options: map[string]string{"server_memory": "coop"}},
		// directory (NFS-cc, seed 000).
		{Name: "directory", Summary: "NFS-cc: server cache directory, round-robin forwarding, discard notifications (seed 000)",
			New: func(p sim.Params) (sim.Algorithm, error) { return dirsim.New(p) }},
		{Name: "directory-nonotify", Summary: "NFS-cc with discard notifications off (seed 000 table 5)",
			New:     func(p sim.Params) (sim.Algorithm, error) { return dirsim.New(p) },
			Options: map[string]string{dirsim.OptNotify: "off"}},
		{Name: "directory-balanced", Summary: "NFS-cc with balanced forwarding: least recently loaded holder, server last (coopfs serve --forward-choice balanced)",
			New:     func(p sim.Params) (sim.Algorithm, error) { return dirsim.New(p) },
			Options: map[string]string{dirsim.OptForward: "balanced"}},
		{Name: "nfs", Summary: "NFS: every miss to the server, on the directory's cost model (seed 000's baseline; contention=on queues at the links and the disk)",
			New:     func(p sim.Params) (sim.Algorithm, error) { return dirsim.New(p) },
			Options: map[string]string{dirsim.OptPolicy: "none"}},
		// wholefile (C2Cfs, seed 001).
		{Name: wholesim.Name, Summary: "C2Cfs: whole-file client caches, commit counters and valid-cache maps, segments from the holders (seed 001)",
			New: func(p sim.Params) (sim.Algorithm, error) { return wholesim.New(p) }},
		// NASD (seed 004).
		{Name: "nasd", Summary: "seed 004: S servers x C clients, server and client schemes from options (default 1-Chance servers, noncoop clients)",
			New: func(p sim.Params) (sim.Algorithm, error) { return nasd.NewFromParams(p) }},
		{Name: "nasd-N-N", Summary: "seed 004: noncoop servers and clients",
			New:     func(p sim.Params) (sim.Algorithm, error) { return nasd.NewFromParams(p) },
			Options: map[string]string{nasd.OptServerScheme: "noncoop", nasd.OptClientScheme: "noncoop"}},
		{Name: "nasd-G-N", Summary: "seed 004: global overflow cache server (75 %), noncoop clients",
			New:     func(p sim.Params) (sim.Algorithm, error) { return nasd.NewFromParams(p) },
			Options: map[string]string{nasd.OptServerScheme: "global", nasd.OptClientScheme: "noncoop"}},
		{Name: "nasd-1-N", Summary: "seed 004: 1-Chance servers (manager), noncoop clients",
			New:     func(p sim.Params) (sim.Algorithm, error) { return nasd.NewFromParams(p) },
			Options: map[string]string{nasd.OptServerScheme: "1chance", nasd.OptClientScheme: "noncoop"}},
		{Name: "nasd-1-1", Summary: "seed 004: 1-Chance servers and clients (manager)",
			New:     func(p sim.Params) (sim.Algorithm, error) { return nasd.NewFromParams(p) },
			Options: map[string]string{nasd.OptServerScheme: "1chance", nasd.OptClientScheme: "1chance"}},
	}
}

// Lookup returns the algorithm registered under name.
func Lookup(name string) (Algo, error) {
	for _, a := range Algorithms() {
		if a.Name == name {
			return a, nil
		}
	}
	return Algo{}, fmt.Errorf("unknown algorithm %q: want one of %s", name, strings.Join(Names(), ", "))
}

// Names lists the registered algorithm names, sorted.
func Names() []string {
	var out []string
	for _, a := range Algorithms() {
		out = append(out, a.Name)
	}
	sort.Strings(out)
	return out
}

// Has reports whether name is registered.
func Has(name string) bool {
	_, err := Lookup(name)
	return err == nil
}

// Build returns algorithm name for p with its preset options applied, and
// the parameters it was built with.
func Build(name string, p sim.Params) (sim.Algorithm, sim.Params, error) {
	a, err := Lookup(name)
	if err != nil {
		return nil, p, err
	}
	for k, v := range a.Options {
		p = p.WithOption(k, v)
	}
	alg, err := a.New(p)
	if err != nil {
		return nil, p, fmt.Errorf("%s: %w", name, err)
	}
	return alg, p, nil
}

// Study is a registered study: a named experiment that reproduces seed
// figures and tables.
type Study struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, env *Env) (*Report, error)
}

// Studies returns the registered studies.
func Studies() []Study {
	return []Study{
		{Name: "sarkar", Summary: "seed 002: figures 5.1, 5.2, 5.8-5.11, tables 5.3 and 5.7", Run: Sarkar},
		{Name: "nfscc", Summary: "seed 000: figure 6, tables 2-5 (forward misses with and without discard notifications), queue sweep", Run: NFSCCStudy},
		{Name: "sprite", Summary: "seed 002 on the four generated Sprite periods (tables 5.1/5.5 statistics): manager load, lookup messages, hint correctness, table 5.7 per period", Run: SpriteStudy},
		{Name: "scale", Summary: "the coordinator at scale: 100 to 10,000 clients reading a shared checkpoint and a Zipf training set under directory and hints: server messages per access and per client-second, directory memory, forward depth", Run: ScaleStudy},
		{Name: "nasd", Summary: "seed 004: figures 3-7 (server schemes, 1-Chance variants, nine combinations, client cache and hops sweeps)", Run: NASDStudy},
	}
}

// LookupStudy returns the study registered under name.
func LookupStudy(name string) (Study, error) {
	var names []string
	for _, s := range Studies() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Study{}, fmt.Errorf("unknown study %q: want one of %s", name, strings.Join(names, ", "))
}
