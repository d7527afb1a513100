package meta

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
)

// Defaults of Config.
const (
	DefaultRepeat    = 3
	DefaultPyModules = 300
	DefaultC2OFiles  = 2000
)

// Passthrough choices.
const (
	PassAuto     = "auto"     // bindfs if installed, else loopback
	PassBindfs   = "bindfs"   // bindfs from the distribution (apt-get install bindfs)
	PassLoopback = "loopback" // go-fuse's loopback file system, in its own process
)

// Targets of issue 9: coopfs time / passthrough time.
const (
	TargetWarm = 1.3
	TargetCold = 2.0
)

// Config is one run of `coopfs bench meta`.
type Config struct {
	// Repeat is the number of repetitions (the report gives medians).
	Repeat int
	// Tree is the directory whose tarball is extracted (default: the src/
	// directory of `go env GOROOT`). GenFiles > 0 generates a tree of that
	// many small files instead.
	Tree     string
	GenFiles int
	// PyModules is the number of modules of the generated Python package
	// tree (0: DefaultPyModules; < 0: no Python workload).
	PyModules int
	// C2OFiles is the number of files of the cross-client close-to-open
	// check (0: DefaultC2OFiles; < 0: skipped).
	C2OFiles int
	// Steps are the step keys to run (nil: all); StepTar and StepRm always
	// run, since they make and remove the tree, and a warm step brings its
	// cold step (the one that warms the caches).
	Steps []string
	// Passthrough is PassAuto, PassBindfs or PassLoopback.
	Passthrough string
	// Binary and Env run the coopfs processes ("" = this program).
	Binary string
	Env    []string
	// MountArgs are extra flags for `coopfs mount` (e.g. --attr-timeout).
	MountArgs []string
	// Dir holds the export, tarball and logs ("" = a temporary directory,
	// removed afterwards unless Keep).
	Dir  string
	Keep bool
	// Command is recorded in the report.
	Command  string
	Progress io.Writer
	Logger   *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Repeat == 0 {
		c.Repeat = DefaultRepeat
	}
	if c.PyModules == 0 {
		c.PyModules = DefaultPyModules
	}
	if c.C2OFiles == 0 {
		c.C2OFiles = DefaultC2OFiles
	}
	if c.Passthrough == "" {
		c.Passthrough = PassAuto
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate checks a Config after filling in defaults.
func (c *Config) Validate() error {
	c.setDefaults()
	switch {
	case c.Repeat < 1 || c.Repeat > 50:
		return fmt.Errorf("--repeat %d: want 1 to 50", c.Repeat)
	case c.GenFiles < 0:
		return fmt.Errorf("--gen-files %d: want 0 (tar the --tree) or a number of files", c.GenFiles)
	case c.GenFiles > 0 && c.Tree != "":
		return errors.New("--tree and --gen-files exclude each other: give one")
	case c.PyModules > 100000:
		return fmt.Errorf("--py-modules %d: want at most 100000", c.PyModules)
	}
	known := []string{StepRTT}
	for _, st := range steps() {
		known = append(known, st.key)
	}
	for _, k := range c.Steps {
		if !slices.Contains(known, k) {
			return fmt.Errorf("--steps: unknown step %q; the steps are %s", k, strings.Join(known, ", "))
		}
	}
	switch c.Passthrough {
	case PassAuto, PassBindfs, PassLoopback:
	default:
		return fmt.Errorf("--passthrough %q: want auto, bindfs or loopback", c.Passthrough)
	}
	return nil
}

// tools checks that the programs the workloads run are installed and
// returns the passthrough to use.
func (c *Config) tools() (string, error) {
	var missing []string
	for _, t := range []string{"tar", "find", "stat", "grep", "du", "rm"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("bench meta runs the real tools and cannot find %v: install them (apt-get install tar findutils grep coreutils)", missing)
	}
	_, err := exec.LookPath("bindfs")
	switch {
	case c.Passthrough == PassBindfs && err != nil:
		return "", errors.New("--passthrough bindfs: bindfs is not installed: apt-get install bindfs (or --passthrough loopback)")
	case c.Passthrough == PassAuto && err != nil:
		return PassLoopback, nil
	case c.Passthrough == PassAuto:
		return PassBindfs, nil
	}
	return c.Passthrough, nil
}

// selected reports whether step key runs: chosen, always run, or the cold
// step a chosen warm step needs before it (grep-cold before grep-warm).
func (c *Config) selected(key string) bool {
	warm, isCold := strings.CutSuffix(key, "-cold")
	return c.Steps == nil || key == StepTar || key == StepRm || slices.Contains(c.Steps, key) ||
		(isCold && slices.Contains(c.Steps, warm+"-warm"))
}
