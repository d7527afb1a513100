package meta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/report"
)

// Unit of the time rows.
const UnitSeconds = "s"

// Result is a finished run: the report (rows of seconds, medians, ratios)
// and the coopfs client's messages.
type Result struct {
	*report.Report
	// Messages[step][type] are the messages the coopfs client sent during
	// the step, one value per repetition.
	Messages map[string]map[string][]float64 `json:"messages"`
	// Tree describes the extracted tree.
	Tree TreeStats `json:"tree"`
	// C2O is the cross-client close-to-open phase (nil if skipped).
	C2O *C2OResult `json:"close_to_open,omitempty"`
	// Steps lists the step keys in order, with their targets.
	Steps []StepInfo `json:"steps"`
}

// TreeStats are the counts of the extracted tree.
type TreeStats struct {
	Source string `json:"source"`
	Files  int    `json:"files"`
	Dirs   int    `json:"dirs"`
	Bytes  int64  `json:"bytes"`
}

// StepInfo is one workload of the report.
type StepInfo struct {
	Key    string  `json:"key"`
	Name   string  `json:"name"`
	Target float64 `json:"target"` // coopfs / passthrough time
}

// RowKey is the key of a step's row for a target.
func RowKey(step, target string) string { return step + "/" + target }

// run is one run in progress.
type run struct {
	cfg   Config
	res   *Result
	s     *session
	steps []step
	dir   string
	drop  dropper
}

// Run runs the benchmark and returns its finished result. Everything
// started is stopped before it returns.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pass, err := cfg.tools()
	if err != nil {
		return nil, err
	}
	if err := cluster.FUSEUnavailable(); err != nil {
		return nil, fmt.Errorf("bench meta measures FUSE mounts, and FUSE cannot be used here: %w", err)
	}
	r := &run{cfg: cfg, s: &session{}}
	r.res = &Result{Report: report.New("meta", cfg.Command), Messages: map[string]map[string][]float64{}}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "coopfs-bench-meta-"); err != nil {
			return nil, err
		}
		if !cfg.Keep {
			defer func() {
				if live, _ := cluster.MountsUnder(dir); len(live) == 0 {
					os.RemoveAll(dir)
				}
			}()
		}
	}
	if r.dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, fmt.Errorf("--dir: %w", err)
	}
	if err := r.prepare(ctx, pass); err != nil {
		return nil, err
	}
	if err := r.measure(ctx, pass); err != nil {
		return nil, err
	}
	if cfg.C2OFiles > 0 {
		fmt.Fprintf(cfg.Progress, "close-to-open across two coopfs mounts, %d files...\n", cfg.C2OFiles)
		c2o, err := runC2O(ctx, &r.cfg, filepath.Join(r.dir, "export"), filepath.Join(r.dir, "c2o"), &r.drop)
		if err != nil {
			return nil, err
		}
		r.res.C2O = c2o
	}
	r.finish()
	return r.res, nil
}

// prepare makes the tarball, finds python3 and declares the rows.
func (r *run) prepare(ctx context.Context, pass string) error {
	p := r.cfg.Progress
	fmt.Fprintln(p, "preparing the tree...")
	tree, err := prepareTree(ctx, &r.cfg, r.dir)
	if err != nil {
		return err
	}
	r.s.tree = tree
	r.res.Tree = TreeStats{Source: tree.source, Files: tree.files, Dirs: tree.dirs, Bytes: tree.bytes}
	if r.cfg.PyModules > 0 {
		r.s.py = newPyPackage(r.cfg.PyModules)
		r.s.python, err = findPython(ctx)
		if err != nil {
			r.res.Notes = append(r.res.Notes, "Python import skipped: "+err.Error())
		}
	}
	params := r.res.Params
	params["repeat"] = strconv.Itoa(r.cfg.Repeat)
	params["tree"] = tree.source
	params["tree_files"] = strconv.Itoa(tree.files)
	params["tree_dirs"] = strconv.Itoa(tree.dirs)
	params["passthrough"] = passVersion(ctx, pass)
	if pass == PassLoopback && r.cfg.Passthrough == PassAuto {
		r.res.Notes = append(r.res.Notes, "bindfs is not installed (apt-get install bindfs): the passthrough is go-fuse's loopback file system")
	}
	params["coopfs_policy"] = "none"
	params["ratio"] = "coopfs time / passthrough time; a target is met when the ratio is at most the target"
	if r.s.python != "" {
		params["python_modules"] = strconv.Itoa(r.s.py.modules())
		params["python"] = r.s.python
	}
	if len(r.cfg.MountArgs) > 0 {
		params["mount_args"] = strings.Join(r.cfg.MountArgs, " ")
	}
	r.declareRows(pass)
	return nil
}

// declareRows picks the steps to run and declares their rows.
func (r *run) declareRows(pass string) {
	rep := r.res.Report
	for _, st := range steps() {
		if (st.isPython() && r.s.python == "") || !r.cfg.selected(st.key) {
			continue
		}
		r.steps = append(r.steps, st)
		r.res.Steps = append(r.res.Steps, StepInfo{Key: st.key, Name: st.name, Target: st.target})
		rep.Row(RowKey(st.key, TargetExt4), st.name+", export directly", UnitSeconds)
		rep.Row(RowKey(st.key, TargetPass), st.name+", "+pass, UnitSeconds).Compare(RowKey(st.key, TargetExt4), 0)
		rep.Row(RowKey(st.key, TargetCoopfs), st.name+", coopfs", UnitSeconds).Compare(RowKey(st.key, TargetPass), 0)
	}
	if !r.cfg.selected(StepRTT) {
		return
	}
	for _, q := range []struct{ key, name string }{{StepRTT, "median"}, {StepRTT + "-p90", "90th percentile"}} {
		name := fmt.Sprintf("lstat of a name whose entry expired, %s of %d calls", q.name, RTTFiles)
		rep.Row(RowKey(q.key, TargetExt4), name+", export directly", UnitMicros)
		rep.Row(RowKey(q.key, TargetPass), name+", "+pass, UnitMicros).Compare(RowKey(q.key, TargetExt4), 0)
		rep.Row(RowKey(q.key, TargetCoopfs), name+", coopfs", UnitMicros).Compare(RowKey(q.key, TargetPass), 0)
	}
}

// findPython returns the real interpreter behind python3 (not a pyenv
// shim, whose shell script would be timed too).
func findPython(ctx context.Context) (string, error) {
	if _, err := exec.LookPath("python3"); err != nil {
		return "", errors.New("python3 is not installed (apt-get install python3)")
	}
	out, err := exec.CommandContext(ctx, "python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("python3 does not run: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func passVersion(ctx context.Context, pass string) string {
	if pass == PassLoopback {
		return "go-fuse loopback (coopfs bench meta loopback-serve)"
	}
	out, err := exec.CommandContext(ctx, "bindfs", "--version").Output()
	if err != nil {
		return "bindfs"
	}
	return strings.TrimSpace(string(out))
}

// measure starts the three targets and runs every repetition.
func (r *run) measure(ctx context.Context, pass string) (err error) {
	export := filepath.Join(r.dir, "export")
	for _, d := range []string{export, filepath.Join(export, TargetExt4), filepath.Join(export, TargetPass), filepath.Join(export, TargetCoopfs)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	fmt.Fprintln(r.cfg.Progress, "mounting the passthrough and coopfs...")
	var targets []target
	defer func() {
		for _, t := range targets {
			err = errors.Join(err, t.close())
		}
	}()
	targets = append(targets, &ext4Target{dir: filepath.Join(export, TargetExt4), d: &r.drop})
	binary := r.cfg.Binary
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return fmt.Errorf("find the coopfs binary: %w", err)
		}
	}
	pt, err := newPassTarget(ctx, pass, binary, export, filepath.Join(r.dir, "mnt-passthrough"), &r.drop)
	if err != nil {
		return err
	}
	targets = append(targets, sub{pt, TargetPass})
	ct, err := newCoopfsTarget(ctx, &r.cfg, export, filepath.Join(r.dir, "coopfs"), 1, &r.drop)
	if err != nil {
		return err
	}
	targets = append(targets, sub{ct, TargetCoopfs})
	for rep := range r.cfg.Repeat {
		for _, t := range targets {
			fmt.Fprintf(r.cfg.Progress, "repetition %d of %d: %s...\n", rep+1, r.cfg.Repeat, t.name())
			if err := r.repetition(ctx, t); err != nil {
				return fmt.Errorf("repetition %d, %s: %w", rep+1, t.name(), err)
			}
		}
	}
	if r.drop.err != nil {
		r.res.Notes = append(r.res.Notes, "cold steps only remounted: "+r.drop.err.Error())
	}
	return nil
}

// sub is a mounted target whose workloads run in a subdirectory of its
// root, so that the three targets never meet in the export.
type sub struct {
	target
	dir string
}

func (s sub) root() string { return filepath.Join(s.target.root(), s.dir) }

// repetition runs every step once on t.
func (r *run) repetition(ctx context.Context, t target) error {
	root := t.root()
	if err := os.RemoveAll(filepath.Join(root, workDir)); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, workDir), 0o755); err != nil {
		return err
	}
	for _, st := range r.steps {
		if st.cold {
			if err := t.cold(ctx); err != nil {
				return err
			}
			root = t.root() // a remount may move it
		}
		before, err := t.messages(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := st.run(ctx, root, r.s); err != nil {
			return err
		}
		el := time.Since(start).Seconds()
		r.res.Get(RowKey(st.key, t.name())).Add(el)
		if before != nil {
			after, err := t.messages(ctx)
			if err != nil {
				return err
			}
			r.addMessages(st.key, subMessages(after, before))
		}
		if st.key == StepTar && r.s.python != "" && (r.cfg.selected(StepPyCold) || r.cfg.selected(StepPyWarm)) {
			if err := r.s.py.write(filepath.Join(root, pyDir)); err != nil {
				return err
			}
		}
	}
	if !r.cfg.selected(StepRTT) {
		return nil
	}
	return r.rtt(ctx, t)
}

// rtt runs the round-trip probe on t and counts the client's messages.
func (r *run) rtt(ctx context.Context, t target) error {
	p, err := probeRTT(ctx, t)
	if err != nil {
		return err
	}
	r.addRTT(t.name(), p)
	if p.msgs != nil {
		r.addMessages(StepRTT, p.msgs)
	}
	return nil
}

// addMessages records one repetition's messages of a step; types not seen
// before get zeros for the earlier repetitions.
func (r *run) addMessages(step string, m map[string]float64) {
	byType := r.res.Messages[step]
	if byType == nil {
		byType = map[string][]float64{}
		r.res.Messages[step] = byType
	}
	n := 0
	for _, v := range byType {
		n = max(n, len(v))
	}
	for typ, v := range m {
		for len(byType[typ]) < n {
			byType[typ] = append(byType[typ], 0)
		}
		byType[typ] = append(byType[typ], v)
	}
	for typ := range byType {
		for len(byType[typ]) < n+1 {
			byType[typ] = append(byType[typ], 0)
		}
	}
}

// finish computes medians and ratios and sets the targets' verdicts (the
// rows are times: a target is met when the ratio is at most the target).
func (r *run) finish() {
	rep := r.res.Report
	keys := []string{}
	for _, st := range r.steps {
		keys = append(keys, st.key)
	}
	if r.cfg.selected(StepRTT) {
		keys = append(keys, StepRTT)
	}
	for _, key := range keys {
		total := rep.Row("msgs/"+key, "messages sent by the coopfs client, "+key, "messages")
		byType := r.res.Messages[key]
		for i := range r.cfg.Repeat {
			var sum float64
			for _, v := range byType {
				if i < len(v) {
					sum += v[i]
				}
			}
			total.Add(sum)
		}
	}
	gw := rep.Get("msgs/" + StepGrepWarm)
	if gw != nil && r.res.Tree.Dirs > 0 {
		perDir := rep.Row("msgs-per-dir/"+StepGrepWarm, "messages per directory of the tree, warm grep -r (target <= 1)", "messages")
		perFile := rep.Row("msgs-per-file/"+StepGrepWarm, "messages per file of the tree, warm grep -r (target 0 beyond the per-directory ones)", "messages")
		for _, v := range gw.Samples {
			perDir.Add(v / float64(r.res.Tree.Dirs))
			perFile.Add(v / float64(r.res.Tree.Files))
		}
	}
	rep.Finish()
	for _, st := range r.steps {
		row := rep.Get(RowKey(st.key, TargetCoopfs))
		if row == nil || len(row.Ratios) == 0 {
			continue
		}
		row.Target = st.target
		met := row.Ratio <= st.target
		row.Met = &met
	}
}
