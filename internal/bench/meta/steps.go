package meta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Step keys: the first part of the row keys.
const (
	StepTar      = "tar"
	StepFindCold = "find-stat-cold"
	StepGrepCold = "grep-cold"
	StepGrepWarm = "grep-warm"
	StepFindWarm = "find-stat-warm"
	StepDuWarm   = "du-warm"
	StepPyCold   = "py-import-cold"
	StepPyWarm   = "py-import-warm"
	StepRm       = "rm"
)

// grepNeedle is looked for and never found: grep reads every file.
const grepNeedle = "coopfs-bench-meta-needle-0x7f3a"

// Directories below a target's root.
const (
	workDir = "bench-meta"    // everything of one repetition
	pyDir   = "bench-meta/py" // the generated Python package
)

// outsideDir is the working directory of every tool: never a directory in
// a mount, so that nothing between fork and exec waits for a FUSE server.
const outsideDir = "/"

// step is one timed workload.
type step struct {
	key    string
	name   string  // the command, for people
	cold   bool    // run after target.cold
	target float64 // ratio to the passthrough to reach
	// cmd is the command run in the target's root.
	cmd func(root string, s *session) *exec.Cmd
}

// session is what the steps share during a run.
type session struct {
	tree   *treeInfo
	python string // the python3 interpreter ("" = no Python steps)
	py     pyPackage
}

func (s *session) treePath(root string) string { return filepath.Join(root, workDir, s.tree.top) }

func steps() []step {
	command := func(args ...string) func(string, *session) *exec.Cmd {
		return func(root string, s *session) *exec.Cmd {
			a := make([]string, len(args))
			for i, x := range args {
				a[i] = strings.NewReplacer("TREE", s.treePath(root), "TARBALL", s.tree.tarball,
					"WORK", filepath.Join(root, workDir)).Replace(x)
			}
			c := exec.Command(a[0], a[1:]...)
			c.Dir = outsideDir
			return c
		}
	}
	find := command("find", "TREE", "-type", "f", "-exec", "stat", "{}", "+")
	grep := command("grep", "-r", "-F", "-e", grepNeedle, "TREE")
	py := func(root string, s *session) *exec.Cmd {
		c := exec.Command(s.python, "-c", "import pkg.all")
		c.Dir = outsideDir
		c.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH="+filepath.Join(root, pyDir))
		return c
	}
	return []step{
		{StepTar, "tar -xf TARBALL (into the target)", false, TargetCold, command("tar", "-xf", "TARBALL", "-C", "WORK")},
		{StepFindCold, "find -type f -exec stat {} +, cold", true, TargetCold, find},
		{StepGrepCold, "grep -r, cold", true, TargetCold, grep},
		{StepGrepWarm, "grep -r again, tree unchanged", false, TargetWarm, grep},
		{StepFindWarm, "find -type f -exec stat {} +, warm", false, TargetWarm, find},
		{StepDuWarm, "du -s, warm", false, TargetWarm, command("du", "-s", "TREE")},
		{StepPyCold, "python3 -c 'import pkg.all', cold", true, TargetCold, py},
		{StepPyWarm, "python3 -c 'import pkg.all', warm", false, TargetWarm, py},
		{StepRm, "rm -rf of the tree and the package", false, TargetCold, func(root string, s *session) *exec.Cmd {
			c := exec.Command("rm", "-rf", filepath.Join(root, workDir))
			c.Dir = outsideDir
			return c
		}},
	}
}

// isPython reports whether the step needs the interpreter.
func (st step) isPython() bool { return st.key == StepPyCold || st.key == StepPyWarm }

// run runs the step's command with its output discarded (to /dev/null, as
// a shell would, so no pipe is read); grep's "not found" (exit 1) is
// success.
func (st step) run(ctx context.Context, root string, s *session) error {
	c := st.cmd(root, s)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	var stderr strings.Builder
	c.Stdout, c.Stderr = null, &stderr
	stop := context.AfterFunc(ctx, func() {
		if c.Process != nil {
			_ = c.Process.Kill()
		}
	})
	defer stop()
	err = c.Run()
	var ee *exec.ExitError
	if st.key == StepGrepCold || st.key == StepGrepWarm {
		if errors.As(err, &ee) && ee.ExitCode() == 1 && stderr.Len() == 0 {
			return nil
		}
		if err == nil {
			return fmt.Errorf("%s: grep found %q in the tree: pick a tree without it", st.key, grepNeedle)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s in %s: %v: %w: %s", st.key, root, c.Args, err, strings.TrimSpace(lastLines(stderr.String(), 5)))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
