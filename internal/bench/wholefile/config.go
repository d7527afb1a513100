package wholefile

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
)

// Experiments are the names Config.Experiments takes, in run order.
var Experiments = []string{"stagger", "web", "overload", "overhead", "warmup"}

// Config sizes and selects the experiments.
type Config struct {
	Policies    []string // policies, in report order ("none" is the baseline of overhead and overload)
	Experiments []string // a subset of Experiments; empty: all

	StaggerSize    int64 // the file of the staggered readers
	StaggerClients int

	WebFiles   int   // files of the web server
	WebMean    int64 // their mean size
	WebReads   int   // reads per client
	WebClients int

	OverloadSize  int64   // each of the two files of the overloaded server
	OverloadStart float64 // the share of the first pair's bytes that crosses the server's link before the second pair starts

	OverheadSizes []int64 // files read cold by one client
	OverheadReps  int

	WarmSize    int64 // the tree of the warm-up
	WarmFiles   int
	WarmClients int

	ServerLink, ClientLink string   // tc rates; "" unshaped
	ServeArgs, MountArgs   []string // extra flags of serve and of every mount
	Binary                 string   // the coopfs executable ("" = this program)
	Seed                   int64
	Keep                   bool
	Progress               io.Writer // one line per step; nil: none
	Logger                 *slog.Logger
}

// Defaults: the sizes (docs/benchmarks-wholefile.md).
func (c *Config) setDefaults() {
	def := func(p *int64, v int64) {
		if *p == 0 {
			*p = v
		}
	}
	defi := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if len(c.Policies) == 0 {
		c.Policies = []string{"none", "directory", "hints", "wholefile"}
	}
	if len(c.Experiments) == 0 {
		c.Experiments = Experiments
	}
	def(&c.StaggerSize, 100<<20)
	defi(&c.StaggerClients, 4)
	defi(&c.WebFiles, 5000)
	def(&c.WebMean, 100<<10)
	defi(&c.WebReads, 2000)
	defi(&c.WebClients, 4)
	def(&c.OverloadSize, 1<<30)
	if c.OverloadStart == 0 {
		c.OverloadStart = 0.5
	}
	if len(c.OverheadSizes) == 0 {
		c.OverheadSizes = []int64{1 << 20, 10 << 20, 100 << 20}
	}
	defi(&c.OverheadReps, 3)
	def(&c.WarmSize, 1<<30)
	defi(&c.WarmFiles, 64)
	defi(&c.WarmClients, 8)
	if c.ServerLink == "" {
		c.ServerLink = "100mbit"
	}
	if c.ClientLink == "" {
		c.ClientLink = "100mbit"
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	for _, e := range c.Experiments {
		if !slices.Contains(Experiments, e) {
			return fmt.Errorf("unknown experiment %q: use %v", e, Experiments)
		}
	}
	switch {
	case c.StaggerSize < 1 || c.WebMean < 1 || c.OverloadSize < 1 || c.WarmSize < 1:
		return errors.New("every size must be positive")
	case c.OverloadStart < 0 || c.OverloadStart > 1:
		return fmt.Errorf("--overload-start %g: want a share of the first pair's bytes, between 0 and 1", c.OverloadStart)
	case c.StaggerClients < 1 || c.WebClients < 1 || c.WarmClients < 1:
		return errors.New("every client count must be at least 1")
	case c.WebFiles < 1 || c.WebReads < 1 || c.WarmFiles < 1 || c.OverheadReps < 1:
		return errors.New("--web-files, --web-reads, --warm-files and --overhead-reps must be at least 1")
	}
	for _, s := range c.OverheadSizes {
		if s < 1 {
			return fmt.Errorf("overhead size %d: want positive sizes", s)
		}
	}
	return nil
}

func (c *Config) runs(exp string) bool { return slices.Contains(c.Experiments, exp) }
