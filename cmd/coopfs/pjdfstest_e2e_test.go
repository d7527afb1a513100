package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pjdfstestConfig enables the features the issue names; naptime is above
// ext4's and coopfs's timestamp granularity.
const pjdfstestConfig = `[features]
posix_fallocate = {}
rename_ctime = {}
utime_now = {}
utimensat = {}

[settings]
naptime = 0.05
allow_remount = false

[dummy_auth]
entries = [
   ["nobody", "%s"],
   ["tests", "tests"],
]
`

// pjdfstestFUSEExceptions are tests that pass on ext4 and cannot pass on
// any FUSE mount, with the reason.
var pjdfstestFUSEExceptions = map[string]string{
	// glibc computes pathconf(_PC_LINK_MAX) from statfs's f_type; a FUSE
	// mount's is FUSE_SUPER_MAGIC, for which glibc answers 127 ("unknown"),
	// and pjdfstest skips the test. EMLINK itself passes through (checked
	// by hand: the 65000th link fails with EMLINK, as on ext4; 80 s).
	"link::link_count_max": "pathconf(LINK_MAX) is unknown on FUSE: skipped",
}

// findPjdfstest finds the pjdfstest binary on PATH or in cargo's bin directory.
func findPjdfstest() string {
	if p, err := exec.LookPath("pjdfstest"); err == nil {
		return p
	}
	for _, dir := range []string{os.Getenv("CARGO_HOME"), filepath.Join(os.Getenv("HOME"), ".cargo"), "/root/.cargo"} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "bin", "pjdfstest")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// needPjdfstest returns the pjdfstest binary and the group of user nobody,
// skipping (or failing, when COOPFS_REQUIRE_PJDFSTEST is set, as `make
// test` does) when the suite or its users are missing.
func needPjdfstest(t *testing.T) (bin, nobodyGroup string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + ": `make test` installs it (cargo install pjdfstest; useradd tests)"
		if os.Getenv("COOPFS_REQUIRE_PJDFSTEST") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	bin = findPjdfstest()
	if bin == "" {
		missing("pjdfstest not found on PATH or in ~/.cargo/bin")
	}
	for _, u := range []string{"nobody", "tests"} {
		if err := exec.Command("id", u).Run(); err != nil {
			missing("user %s missing", u)
		}
	}
	out, err := exec.Command("id", "-gn", "nobody").Output()
	if err != nil {
		missing("group of nobody: %v", err)
	}
	return bin, strings.TrimSpace(string(out))
}

const ext4Magic = 0xEF53

// ext4Dir returns a directory on ext4 with a short path (Unix socket paths
// hold at most 107 bytes, and pjdfstest binds sockets deep in its tree),
// reachable by every user; when the temporary directory's file system is
// not ext4 it loop-mounts an ext4 image.
func ext4Dir(t *testing.T) string {
	t.Helper()
	parent := os.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(parent, &st); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(parent, "pjd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if len(e2eMountsUnder(dir)) == 0 { // never recurse into a live mount
			os.RemoveAll(dir)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if st.Type == ext4Magic {
		return dir
	}
	img := filepath.Join(dir, "ext4.img")
	mnt := filepath.Join(dir, "ext4")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	runCmd(t, time.Minute, "truncate", "-s", "512M", img)
	runCmd(t, time.Minute, "mkfs.ext4", "-q", "-F", img)
	runCmd(t, time.Minute, "mount", "-o", "loop", img, mnt)
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	if err := os.Chmod(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s is not ext4: using a loop-mounted ext4 image", parent)
	return mnt
}

var pjdfstestLine = regexp.MustCompile(`^(\S+::\S+)\s+(ok|FAILED|skipped)\s*$`)

// pjdfstestRun is one run of the suite: per-test results and its summary line.
type pjdfstestRun struct {
	results map[string]string // test → ok, FAILED, skipped
	summary string
	took    time.Duration
}

func runPjdfstest(t *testing.T, bin, config, dir string) pjdfstestRun {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(bin, "-c", config, "-p", dir)
	out, _ := cmd.CombinedOutput() // non-zero when a test fails: the results say which
	r := pjdfstestRun{results: map[string]string{}, took: time.Since(start)}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		if m := pjdfstestLine.FindStringSubmatch(line); m != nil {
			r.results[m[1]] = m[2]
		}
		if strings.HasPrefix(line, "Summary:") {
			r.summary = line
		}
	}
	if r.summary == "" || len(r.results) == 0 {
		t.Fatalf("pjdfstest in %s printed no results:\n%s", dir, out)
	}
	return r
}

// TestPjdfstest runs pjdfstest on ext4 and on a coopfs mount of an ext4
// export, side by side, and fails if any test that passes on ext4 does not
// pass on coopfs (bar pjdfstestFUSEExceptions). The mount's server trusts
// client root (--squash none): pjdfstest runs as root and switches to other
// users itself, and needs root's powers (chown, mknod) as on a local disk.
func TestPjdfstest(t *testing.T) {
	comparePjdfstest(t, "")
}

// TestPjdfstestDeep is TestPjdfstest run in a directory two levels below
// the mount's root (and below ext4's directory), both levels NAME_MAX
// bytes long. The suite makes paths of up to PATH_MAX − 1 bytes from the
// root of the file system namespace (it makes its base path absolute), so
// the directory is also bind-mounted at a short path and the suite run
// there: its longest paths are then more than PATH_MAX bytes from the
// export root, as a process whose working directory is deep makes them,
// and the server resolves them in chunks.
func TestPjdfstestDeep(t *testing.T) {
	comparePjdfstest(t, filepath.Join(strings.Repeat("a", 255), strings.Repeat("b", 255)))
}

// comparePjdfstest runs the suite in sub (a relative path, "" for the top)
// of an ext4 directory and of a coopfs mount, and compares.
func comparePjdfstest(t *testing.T, sub string) {
	needFUSE(t)
	bin, nobodyGroup := needPjdfstest(t)
	base := ext4Dir(t)
	local := filepath.Join(base, "l")
	export := filepath.Join(base, "e")
	mnt := filepath.Join(base, "m")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(local, sub), filepath.Join(export, sub)} {
		// Writable by the users pjdfstest switches to, as its book asks,
		// and every directory above reachable by them.
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		for p := d; len(p) > len(base); p = filepath.Dir(p) {
			if err := os.Chmod(p, 0o777); err != nil {
				t.Fatal(err)
			}
		}
	}
	config := filepath.Join(base, "pjdfstest.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(pjdfstestConfig, nobodyGroup)), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, export)
	m := startMountAt(t, srv.addr, mnt)

	localDir, coopDir := local, m.dir
	where := ""
	if sub != "" {
		where = " two levels down"
		localDir = bindAt(t, filepath.Join(local, sub), filepath.Join(base, "lb"))
		coopDir = bindAt(t, filepath.Join(m.dir, sub), filepath.Join(base, "mb"))
	}
	ext4 := runPjdfstest(t, bin, config, localDir)
	coop := runPjdfstest(t, bin, config, coopDir)
	report := fmt.Sprintf("pjdfstest on ext4%s:   %s (%.1fs)\npjdfstest on coopfs%s: %s (%.1fs)\n",
		where, ext4.summary, ext4.took.Seconds(), where, coop.summary, coop.took.Seconds())
	fmt.Print(report)
	t.Log("\n" + report)
	if f := os.Getenv("COOPFS_PJDFSTEST_SUMMARY"); f != "" {
		if err := appendFile(f, report); err != nil {
			t.Errorf("write %s: %v", f, err)
		}
	}
	if n := countResult(ext4, "FAILED"); n > 0 {
		t.Logf("%d tests fail on ext4 itself here (the machine, not coopfs): %s", n, strings.Join(names(ext4, "FAILED"), " "))
	}
	var regressions []string
	for name, res := range ext4.results {
		if res != "ok" || coop.results[name] == "ok" {
			continue
		}
		if why, ok := pjdfstestFUSEExceptions[name]; ok {
			t.Logf("%s: %s on coopfs (known: %s)", name, coop.results[name], why)
			continue
		}
		regressions = append(regressions, fmt.Sprintf("%s: %q on coopfs", name, coop.results[name]))
	}
	sort.Strings(regressions)
	if len(regressions) > 0 {
		t.Errorf("%d pjdfstest tests pass on ext4%s but not on coopfs:\n%s", len(regressions), where, strings.Join(regressions, "\n"))
	}
}

// bindAt bind-mounts directory src at the new directory dst (unmounted
// when the test ends) and returns dst.
func bindAt(t *testing.T, src, dst string) string {
	t.Helper()
	if err := os.Mkdir(dst, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mount %s: %v", dst, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dst, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dst, err)
		}
	})
	return dst
}

// appendFile appends s to file f (the summary `make test` prints holds
// every run of the suite).
func appendFile(f, s string) error {
	w, err := os.OpenFile(f, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := w.WriteString(s); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

func countResult(r pjdfstestRun, res string) int { return len(names(r, res)) }

// names lists the tests with result res, sorted.
func names(r pjdfstestRun, res string) []string {
	var ns []string
	for n, v := range r.results {
		if v == res {
			ns = append(ns, n)
		}
	}
	sort.Strings(ns)
	return ns
}
